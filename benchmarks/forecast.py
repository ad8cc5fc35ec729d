"""The ``forecast`` suite: remaining-work accuracy of FM vs WLS vs the naive anchor vs oracle.

For each group (the in-distribution families ``supervised``, ``rl``, ``vision`` of the
``train`` mix, the ``held-out`` mix pooled, and each real family ``lcdb``, ``scan``,
``sb3-rl``, ``real-vision`` on the held-out split of its bank, mix ``real-held-out``) and
each prefix (10%, 20%, 40% of the work to
target), cases are drawn with :func:`core_env.forecast.cases.make_cases` from a fixed seed;
every forecaster predicts the remaining work from the same prefixes. Metrics over cases with
a finite positive truth (SPEC §4):

* ``median_rel`` / ``mean_rel``: |q50 - true| / true (median and mean);
* ``median_abs_log``: median |ln(q50 / true)| (scale-free);
* ``coverage``: fraction of cases with q10 <= true <= q90;
* ``ratio_vs_wls``: a forecaster's median_rel / WLS's median_rel in the same group.

Plus the median time of one ``predict`` call for 64 tasks (one CPU thread).

    python -m benchmarks forecast --cases 2000 --seed 12345 --out results/forecast
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.flags import Command, add_out, integer
from benchmarks.plots import save_figure
from benchmarks.report import markdown_table
from benchmarks.store import write_atomic, write_csv
from core_env.banks import REAL_FAMILIES
from core_env.curves import FAMILIES
from core_env.forecast import OracleForecaster, forecast, naive_slope_forecaster
from core_env.forecast.cases import make_cases

PREFIXES = (0.1, 0.2, 0.4)
SYNTHETIC_GROUPS = ("supervised", "rl", "vision", "held-out")
GROUPS = SYNTHETIC_GROUPS + REAL_FAMILIES
MIXES = ("train", "held-out", "real-held-out")
"""Case sets are drawn from these mixes (groups: families, pooled, families)."""
ORDER = ("fm", "fm-v1", "wls", "naive", "oracle")
"""Forecasters in the table's order (checkpoints given with ``--fm-checkpoint`` last)."""
METRICS = ("n", "median_rel", "mean_rel", "median_abs_log", "coverage", "ratio_vs_wls")


def forecasters(include_fm: bool = True, fm_checkpoints: Sequence[str | Path] = ()
                ) -> dict[str, Any]:
    """The forecasters compared (oracle tables are attached per case set): WLS, the naive
    anchor, the shipped FMs (``fm`` and ``fm-v1``,
    :data:`~mara_agents.forecast.registry.FM_CHECKPOINTS`) and any FM checkpoints given
    (named ``fm:<file stem>``)."""
    from mara_agents.forecast.registry import FM_CHECKPOINTS, make_forecaster

    out: dict[str, Any] = {"wls": make_forecaster("wls"), "naive": naive_slope_forecaster()}
    if include_fm:
        for name in FM_CHECKPOINTS:  # torch only when needed
            out[name] = make_forecaster(name)
    for path in fm_checkpoints:
        from mara_agents.forecast.forecaster import FlowMatchingForecaster

        name = f"fm:{Path(path).stem}"
        if name in out:
            raise ValueError(f"fm checkpoint {path}: a second checkpoint named {name!r}")
        out[name] = FlowMatchingForecaster.load(path)
    return out


def evaluate(preds: dict[str, Any], truth: np.ndarray, groups: np.ndarray
             ) -> dict[str, dict[str, dict[str, float]]]:
    """Metrics per forecaster and group (see the module docstring)."""
    ok = np.isfinite(truth) & (truth > 0)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, rw in preds.items():
        out[name] = {}
        for g in np.unique(groups):
            sel = ok & (groups == g)
            t = truth[sel]
            q50 = np.asarray(rw.q50)[sel]
            rel = np.abs(q50 - t) / t
            out[name][str(g)] = {
                "n": int(sel.sum()),
                "median_rel": float(np.median(rel)),
                "mean_rel": float(np.mean(rel)),
                "median_abs_log": float(np.median(np.abs(np.log(np.maximum(q50, 1e-9) / t)))),
                "coverage": float(np.mean((np.asarray(rw.q10)[sel] <= t)
                                          & (t <= np.asarray(rw.q90)[sel]))),
            }
    for per_group in out.values():
        for g, m in per_group.items():
            m["ratio_vs_wls"] = m["median_rel"] / max(out["wls"][g]["median_rel"], 1e-12)
    return out


def predict_time_ms(f: Any, cases: Any, n_tasks: int = 64, repeats: int = 15) -> float:
    """Median wall time of one predict_batch call on ``n_tasks`` cases (one thread)."""
    threads: int | None
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        threads = None
    else:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
    idx = np.arange(n_tasks)
    batch = type(cases.batch)(*(a[idx] for a in cases.batch))
    budgets = np.full(n_tasks, 1e9)
    times = []
    for _ in range(repeats + 2):
        t0 = time.perf_counter()
        forecast(f, batch, cases.log_targets[idx], budgets)
        times.append(time.perf_counter() - t0)
    if threads is not None:
        torch.set_num_threads(threads)
    return 1e3 * statistics.median(times[2:])


def run(n_cases: int = 2000, seed: int = 12345, include_fm: bool = True,
        progress: bool = True, fm_checkpoints: Sequence[str | Path] = ()) -> dict[str, Any]:
    """Run the suite; returns a JSON-able dict of results with the settings."""
    fcs = forecasters(include_fm, fm_checkpoints)
    rows: list[dict[str, Any]] = []
    timing: dict[str, float] = {}
    plan = [(mix, p) for mix in MIXES for p in PREFIXES]
    iterator = plan
    if progress:
        from tqdm import tqdm

        iterator = tqdm(plan, desc="forecast", unit="case set")
    for i, (mix, prefix) in enumerate(iterator):
        rng = np.random.default_rng([seed, i])
        cases = make_cases(rng, mix, n_cases, prefix)
        budgets = np.full(n_cases, 1e9)
        preds = {name: forecast(f, cases.batch, cases.log_targets, budgets)
                 for name, f in fcs.items()}
        preds["oracle"] = forecast(OracleForecaster(cases.log_loss_table), cases.batch,
                                   cases.log_targets, budgets)
        groups = (np.full(n_cases, "held-out") if mix == "held-out"
                  else np.asarray(FAMILIES)[cases.family])
        for name, per_group in evaluate(preds, cases.remaining, groups).items():
            for group, m in per_group.items():
                rows.append({"forecaster": name, "group": group, "mix": mix,
                             "prefix": prefix, "seed": seed, "case_set": i, **m})
        if i == 0:
            timing = {name: predict_time_ms(f, cases) for name, f in fcs.items()}
    return {"suite": "forecast", "seed": seed, "cases_per_set": n_cases,
            "prefixes": list(PREFIXES), "rows": rows, "predict_ms_64_tasks": timing}


def write(result: dict[str, Any], out: Path) -> None:
    """results JSON, CSV, a Markdown table and a PNG (median error vs prefix per group)."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "forecast.json", json.dumps(result, indent=2))
    rows = result["rows"]
    write_csv(out / "forecast.csv", rows, list(rows[0]))
    write_atomic(out / "forecast.md", format_table(result))
    _plot(result, out / "forecast.png")


def format_table(result: dict[str, Any]) -> str:
    names = sorted({r["forecaster"] for r in result["rows"]},
                   key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    header = (["group", "prefix"] + [f"{n} med rel" for n in names]
              + [f"{n} med abs log" for n in names]
              + [f"{n} cov" for n in names if n != "oracle"])
    by = {(r["forecaster"], r["group"], r["prefix"]): r for r in result["rows"]}
    body = []
    for g in GROUPS:
        for p in result["prefixes"]:
            if (names[0], g, p) not in by:
                continue
            body.append([g, f"{p:.0%}"] + [f"{by[(n, g, p)]['median_rel']:.3f}" for n in names]
                        + [f"{by[(n, g, p)]['median_abs_log']:.3f}" for n in names]
                        + [f"{by[(n, g, p)]['coverage']:.2f}" for n in names if n != "oracle"])
    lines = [markdown_table(header, body, title=(
        f"Remaining-work forecast error (seed {result['seed']}, "
        f"{result['cases_per_set']} cases per mix and prefix)")).rstrip("\n")]
    for fm in (n for n in names if n.startswith("fm")):
        lines += ["", f"{fm} / WLS median relative error: "
                  + ", ".join(f"{g} {p:.0%}: {by[(fm, g, p)]['ratio_vs_wls']:.2f}"
                              for g in GROUPS for p in result["prefixes"]
                              if (fm, g, p) in by)]
    t = result.get("predict_ms_64_tasks", {})
    if t:
        lines += ["", "predict() for 64 tasks, median ms on one thread: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in t.items())]
    return "\n".join(lines) + "\n"


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(16, 6.8), sharey=True)
    axes = axes.ravel()
    by: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in result["rows"]:
        by.setdefault((r["forecaster"], r["group"]), []).append((r["prefix"], r["median_abs_log"]))
    for ax, g in zip(axes, GROUPS, strict=False):
        for (name, group), pts in sorted(by.items()):
            if group != g or name == "oracle":
                continue
            pts.sort()
            ax.plot([100 * p for p, _ in pts], [v for _, v in pts], marker="o", label=name)
        ax.set_title(g)
        ax.set_xlabel("prefix (% of work to target)")
        ax.grid(alpha=0.3)
    for ax in axes[::4]:
        ax.set_ylabel("median |ln(pred / true)|")
    axes[0].legend()
    fig.suptitle(f"Remaining-work forecast error by family and prefix (seed {result['seed']}, "
                 f"{result['cases_per_set']} cases per mix and prefix)")
    fig.tight_layout()
    save_figure(fig, path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cases", type=integer(10), default=2000,
                        help="cases per mix and prefix")
    parser.add_argument("--seed", type=integer(0), default=12345, help="seed of the cases")
    parser.add_argument("--no-fm", action="store_true", help="skip the flow-matching forecaster")
    parser.add_argument("--fm-checkpoint", type=Path, action="append", default=[],
                        help="also evaluate this FM checkpoint (named fm:<file stem>; "
                             "repeatable)")
    add_out(parser, Path("results/forecast"), "results folder")


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench forecast``: every value checked by argparse."""
    res = run(args.cases, args.seed, include_fm=not args.no_fm,
              fm_checkpoints=args.fm_checkpoint)
    write(res, args.out)
    print(format_table(res))
    print(f"results in {args.out}/")
    return 0


COMMAND = Command("forecast", "remaining-work forecast accuracy: FM vs WLS vs the naive "
                              "anchor vs the oracle", add_arguments, run_command)
