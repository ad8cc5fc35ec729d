"""FM calibration on curves of data sets the network never saw (a group-held-out split).

The banks' ``calibration`` split (:data:`core_env.banks.SPLITS`) is every fifth *curve* of
the train split, so its curves come from the same data sets and environments as the curves
the network is fitted on, while ``mara-bench forecast`` scores the held-out split, whose data
sets and environments are new. This script replaces the split for its own process: the
calibration curves are whole *groups* (data sets / environments) of the train split, about
one in five, at least one per bank (sb3-rl: Pendulum-v1; real-vision: mnist1d), and the fit
curves the other groups.

``train`` trains an FM with that split (``mara-train-forecaster``'s flags after ``--``);
``calibrate`` fits calibrators on 20,000 calibration cases (seed 777; the synthetic mix and
the ``real-calibration`` mix at the run's real weight) and prints the [q10, q90] coverage of
every ``mara-bench forecast`` cell (same mixes, prefixes and seed, 1,000 cases each) for
each of them:

* ``raw``: the samples as drawn; ``pooled``: one temperature (``widen``'s spread) for the
  pool, as ``mara-train-forecaster`` fits it;
* ``two-sided``: a temperature for each side of the median, each leaving 10% outside;
* ``minimax``, ``minimax-2s``: one, or one per side, minimising the worst (family,
  prefix-third) calibration group's distance to 0.8 coverage (the groups of
  :func:`mara_agents.forecast.calibrate.case_groups`);
* ``best-on-benchmark``: the pair of side temperatures with the most benchmark cells in
  0.7-0.9, chosen *on the benchmark cells themselves*: not a calibrator, the ceiling of any
  pair of global temperatures for this network.

    python -m experiments.scripts.fm_group_calibration train -- --real-weight 0.25 --out /tmp/g.pt
    python -m experiments.scripts.fm_group_calibration calibrate /tmp/g.pt --real-weight 0.25
    python -m experiments.scripts.fm_group_calibration calibrate mara_agents/forecast/weights/fm_default.pt --curve-split
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.forecast import MIXES, PREFIXES
from core_env import banks
from core_env.curves import FAMILIES
from core_env.forecast.cases import ForecastCases, make_cases
from mara_agents.forecast.calibrate import SPREAD_GRID, case_groups
from mara_agents.forecast.forecaster import FlowMatchingForecaster, sorted_quantiles
from mara_agents.forecast.train import TrainConfig, draw_cases


def group_split(self: banks.CurveBank, split: str) -> np.ndarray:
    """:meth:`core_env.banks.CurveBank.split` with ``fit`` / ``calibration`` by group."""
    if split not in ("fit", "calibration"):
        return _curve_split(self, split)
    train = _curve_split(self, "train")
    names = np.unique(self.groups[train])
    k = max(1, round(names.size / banks.CALIBRATION_EVERY))
    if names.size > 2:
        pick = names[np.linspace(0, names.size - 1, k + 2)[1:-1].round().astype(int)]
    else:
        pick = names[-1:]
    cal = np.isin(self.groups[train], pick)
    return train[cal] if split == "calibration" else train[~cal]


_curve_split = banks.CurveBank.split


def log_parts(fm: FlowMatchingForecaster, cases: ForecastCases
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows with a finite positive truth not yet reached; the median of ln raw remaining and
    its distances to the 10% and 90% quantiles."""
    _, y_now = cases.batch.last()
    ok = (np.isfinite(cases.remaining) & (cases.remaining > 0) & (cases.batch.length > 0)
          & (y_now > cases.log_targets))
    rows = np.flatnonzero(ok)
    lr = np.log(np.maximum(np.sort(fm.sample_remaining(cases.batch, cases.log_targets, rows),
                                   axis=1), 1e-12))
    q10, q50, q90 = sorted_quantiles(lr, (0.1, 0.5, 0.9))
    return rows, q50, q50 - q10, q90 - q50


def coverage(lo: float, hi: float, med: np.ndarray, dl: np.ndarray, dh: np.ndarray,
             t: np.ndarray) -> float:
    return float(np.mean((med - lo * dl <= t) & (t <= med + hi * dh)))


def calibrate(path: str, real_weight: float) -> None:
    fm = FlowMatchingForecaster.load(path)
    cal = draw_cases(np.random.default_rng(777), TrainConfig(real_weight=real_weight), 20000,
                     real_mix="real-calibration")
    rows, med, dl, dh = log_parts(fm, cal)
    t = np.log(cal.remaining[rows])
    g = case_groups(cal)[rows]
    ids, counts = np.unique(g, return_counts=True)
    ids = ids[counts >= 50]

    def worst(lo: float, hi: float) -> float:
        return max(abs(coverage(lo, hi, med[g == i], dl[g == i], dh[g == i], t[g == i]) - 0.8)
                   for i in ids)

    grid = SPREAD_GRID
    coarse = grid[::3]
    found = {
        "raw": (1.0, 1.0),
        "pooled": min(((s, s) for s in grid),
                      key=lambda p: abs(coverage(*p, med, dl, dh, t) - 0.8)),
        "two-sided": (min(grid, key=lambda s: abs(np.mean(t < med - s * dl) - 0.1)),
                      min(grid, key=lambda s: abs(np.mean(t > med + s * dh) - 0.1))),
        "minimax": min(((s, s) for s in grid), key=lambda p: worst(*p)),
        "minimax-2s": min(((a, b) for a in coarse for b in coarse), key=lambda p: worst(*p)),
    }
    cells = []
    for i, (mix, prefix) in enumerate((m, p) for m in MIXES for p in PREFIXES):
        cases = make_cases(np.random.default_rng([12345, i]), mix, 1000, prefix)
        groups = (np.full(1000, "held-out") if mix == "held-out"
                  else np.asarray(FAMILIES)[cases.family])
        r, m, lo, hi = log_parts(fm, cases)
        truth = np.log(cases.remaining[r])
        for name in np.unique(groups):
            s = groups[r] == name
            cells.append((f"{name} {prefix:.0%}", m[s], lo[s], hi[s], truth[s]))

    def cell_covs(lo: float, hi: float) -> list[float]:
        return [coverage(lo, hi, *c[1:]) for c in cells]

    found["best-on-benchmark"] = max(((a, b) for a in coarse for b in coarse),
                                     key=lambda p: (sum(0.7 <= c <= 0.9 for c in cell_covs(*p)),
                                                    min(cell_covs(*p))))
    print(f"{path}, real weight {real_weight}: {len(cells)} benchmark cells")
    print("| calibrator | lower / upper temperature | calibration: pooled, worst group's "
          "distance to 0.8 | benchmark cells in 0.7-0.9 | lowest / highest cell |")
    print("|---|---|---|---|---|")
    for name, (lo, hi) in found.items():
        covs = cell_covs(lo, hi)
        print(f"| {name} | {lo:.2f} / {hi:.2f} | {coverage(lo, hi, med, dl, dh, t):.2f}, "
              f"{worst(lo, hi):.2f} | {sum(0.7 <= c <= 0.9 for c in covs)} / {len(covs)} | "
              f"{min(covs):.2f} / {max(covs):.2f} |")
        print("    " + ", ".join(f"{c[0]} {v:.2f}" for c, v in zip(cells, covs, strict=False)))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=("train", "calibrate"))
    p.add_argument("checkpoint", nargs="?", help="calibrate: the FM checkpoint")
    p.add_argument("--real-weight", type=float, default=0.25)
    p.add_argument("--curve-split", action="store_true",
                   help="keep the banks' own by-curve calibration split")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="train: -- mara-train-forecaster flags")
    a = p.parse_args(argv)
    if not a.curve_split:
        banks.CurveBank.split = group_split
    if a.command == "train":
        from mara_agents.forecast.train import main as train_main

        train_main([x for x in a.rest if x != "--"])
    else:
        if not a.checkpoint:
            p.error("calibrate needs a checkpoint")
        calibrate(a.checkpoint, a.real_weight)


if __name__ == "__main__":
    main(sys.argv[1:])
