"""Per-bin calibration of an FM forecaster (a Mondrian split of the calibration cases).

Fits one temperature (``widen``'s spread, the grid of
:data:`mara_agents.forecast.calibrate.SPREAD_GRID`) per bin of an observable key on
calibration cases (``draw_cases`` with ``--real-weight``, the banks' ``real-calibration``
split; seed 777, not the training run's draw), then reports the [q10, q90] coverage of
every cell of ``mara-bench forecast`` (same mixes, prefixes and seed) with each case widened
by its bin's temperature. Keys, all observable at prediction time:

* ``none``: one bin (the pooled temperature);
* ``fhat``: the forecast's own progress, work done / (work done + median raw remaining);
* ``psi``: the share of the log-loss gap to the target closed so far;
* ``rough``: the residual deviation of the last 16 log-losses around a line in log work;
* ``fhat_rough``: ``fhat`` x ``rough`` (bins x bins cells).

    python -m experiments.scripts.fm_mondrian /tmp/fm_w0.5.pt --real-weight 0.5 --key fhat --bins 5
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.forecast import MIXES, PREFIXES
from core_env.curves import FAMILIES
from core_env.forecast.cases import ForecastCases, make_cases
from mara_agents.forecast.calibrate import SPREAD_GRID
from mara_agents.forecast.forecaster import FlowMatchingForecaster, widen
from mara_agents.forecast.train import TrainConfig, draw_cases

KEYS = ("none", "fhat", "psi", "rough", "fhat_rough")


def raw_and_key(fm: FlowMatchingForecaster, cases: ForecastCases, key: str
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows with a finite positive truth not yet reached, their sorted raw samples and
    keys (float[m] or float[m, 2])."""
    x_now, y_now = cases.batch.last()
    ok = (np.isfinite(cases.remaining) & (cases.remaining > 0) & (cases.batch.length > 0)
          & (y_now > cases.log_targets))
    rows = np.flatnonzero(ok)
    raw = np.sort(fm.sample_remaining(cases.batch, cases.log_targets, rows), axis=1)
    s = raw.shape[1]
    med = raw[:, (s - 1) // 2: s // 2 + 1].mean(axis=1)
    s_now = np.exp(x_now[rows])
    fhat = s_now / (s_now + med)
    if key == "none":
        return rows, raw, np.zeros(rows.size)
    if key == "fhat":
        return rows, raw, fhat
    if key == "psi":
        y0 = cases.batch.log_loss[rows, 0]
        return rows, raw, (y0 - y_now[rows]) / np.maximum(y0 - cases.log_targets[rows], 1e-9)
    length = cases.batch.length[rows]
    ll, lw = cases.batch.log_loss[rows], cases.batch.log_work[rows]
    pos = np.arange(ll.shape[1])[None, :]
    m = (pos >= (length - 16)[:, None]) & (pos < length[:, None])
    n = m.sum(1)
    dx = np.where(m, lw - (np.where(m, lw, 0).sum(1) / n)[:, None], 0)
    dy = np.where(m, ll - (np.where(m, ll, 0).sum(1) / n)[:, None], 0)
    slope = (dx * dy).sum(1) / np.maximum((dx * dx).sum(1), 1e-12)
    rough = np.sqrt(((dy - slope[:, None] * dx) ** 2 * m).sum(1) / np.maximum(n - 2, 1))
    return rows, raw, rough if key == "rough" else np.stack([fhat, rough], 1)


def covered(samples: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """bool[m]: each truth inside its row's [q10, q90]."""
    q10, q90 = np.quantile(samples, (0.1, 0.9), axis=1)
    return (q10 <= truth) & (truth <= q90)


def coverage(samples: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(covered(samples, truth)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--real-weight", type=float, default=0.0)
    ap.add_argument("--key", choices=KEYS, default="none")
    ap.add_argument("--bins", type=int, default=5)
    ap.add_argument("--cases", type=int, default=1000)
    args = ap.parse_args()
    fm = FlowMatchingForecaster.load(args.checkpoint)
    nb = 1 if args.key == "none" else args.bins
    cal = draw_cases(np.random.default_rng(777), TrainConfig(real_weight=args.real_weight),
                     4000, real_mix="real-calibration")
    rows, raw, key = raw_and_key(fm, cal, args.key)
    qs = np.linspace(0, 1, nb + 1)[1:-1]
    edges = [np.quantile(k, qs) for k in (key.T if key.ndim == 2 else [key])]

    def bins(k: np.ndarray) -> np.ndarray:
        cols = k.T if k.ndim == 2 else [k]
        out = np.zeros(len(cols[0]), dtype=np.int64)
        for e, c in zip(edges, cols, strict=False):
            out = out * nb + np.searchsorted(e, c, side="right")
        return out

    b, truth = bins(key), cal.remaining[rows]
    spreads = np.ones(nb ** len(edges))
    for j in range(spreads.size):
        sel = b == j
        if sel.any():
            cov = [coverage(widen(raw[sel], float(s), presorted=True), truth[sel])
                   for s in SPREAD_GRID]
            spreads[j] = SPREAD_GRID[int(np.argmin(np.abs(np.asarray(cov) - 0.8)))]
    print("bin edges", [np.round(e, 3).tolist() for e in edges], "spreads",
          np.round(spreads, 2).tolist())
    cells = []
    for i, (mix, prefix) in enumerate((m, p) for m in MIXES for p in PREFIXES):
        cases = make_cases(np.random.default_rng([12345, i]), mix, args.cases, prefix)
        rows, raw, key = raw_and_key(fm, cases, args.key)
        sp, t = spreads[bins(key)], cases.remaining[rows]
        out = np.empty_like(raw)
        for s in np.unique(sp):
            out[sp == s] = widen(raw[sp == s], float(s), presorted=True)
        inside = covered(out, t)
        groups = (np.full(rows.size, "held-out") if mix == "held-out"
                  else np.asarray(FAMILIES)[cases.family[rows]])
        cells += [(g, prefix, float(np.mean(inside[groups == g]))) for g in np.unique(groups)]
    cov = [c for *_, c in cells]
    print(f"cells in 0.7-0.9: {sum(0.7 <= c <= 0.9 for c in cov)}/{len(cov)}, lowest "
          f"{min(cov):.2f}, highest {max(cov):.2f}")
    for g, p, c in cells:
        print(f"  {g:12s} {p:.1f} {c:.2f}")


if __name__ == "__main__":
    main()
