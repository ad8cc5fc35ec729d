"""Tune the peer schedulers on the selection seeds (experiments/peer_params.py).

    python -m experiments.scripts.tune_peers [--peers las laira ...] [--out results/tune]
        [--seeds 48] [--workers 2]

Runs LARA and every configuration of each peer's grid on CoRE-v0 seeds 100-147 (resumable:
the results folder is a benchmark store) and prints, per peer, the configurations by mean
completion rate with the paired difference to LARA; the first row is the chosen default.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.suites import run_suite
from experiments.peer_params import GRIDS, configurations

PRESET = "CoRE-v0"
SEED_OFFSET = 100


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    ap.add_argument("--out", type=Path, default=Path("results/tune"))
    ap.add_argument("--seeds", type=int, default=48)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    for peer in args.peers:
        specs = [f"experiments.peer_params:{name}" for name in configurations(peer)]
        out = args.out / peer
        run_suite("baselines", out, policies=["lara", *specs], presets=[PRESET],
                  seeds=args.seeds, seed_offset=SEED_OFFSET, workers=args.workers,
                  progress=False)
        summary = json.loads((out / "results.json").read_text())["summary"]
        rows = [r for r in summary if r["policy"] in specs]
        rows.sort(key=lambda r: -r["completion_rate"])
        print(f"\n{peer}: CoRE-v0 seeds {SEED_OFFSET}-{SEED_OFFSET + args.seeds - 1}")
        print("| configuration | completion | vs LARA (95% CI) |\n|---|---|---|")
        for r in rows:
            name = r["policy"].split(":")[1].removeprefix(peer + "__") or "(grid)"
            print(f"| {name} | {100 * r['completion_rate']:.1f}% | "
                  f"{100 * r['diff_vs_ref']:+.1f} ({100 * r['diff_ci_low']:+.1f}, "
                  f"{100 * r['diff_ci_high']:+.1f}) |")


if __name__ == "__main__":
    main()
