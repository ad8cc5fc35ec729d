"""The live runtime's overhead against the size of a work unit, for a torch job (issue 60).

    python experiments/scripts/live_overhead.py OUT [UNIT_SAMPLES ...]

For each unit size (samples per work unit of ``cnn-digits``, 8 channels, sqrt learning-rate
scaling), records a pilot set of two variants (learning rates 0.05 and 0.1; 2 seeds, 40
units, alpha from 2 nodes) into ``OUT/pilots-<u>.npz``, runs ``mara-bench live`` with LARA on
``Live-Small-v0`` (work clock, seeds 0-4) on them into ``OUT/live-<u>``, and prints the
median overhead and packing shares, the episode's wall time and its migrations.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

from benchmarks import live
from core_env.live import make_pilots


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    out = Path(argv[1])
    sizes = [int(u) for u in argv[2:]] or [256, 4096]
    print("| samples per unit | runtime overhead (median) | packing loss (median) | "
          "episode s (median) | migrations per episode (median) |")
    print("|---|---|---|---|---|")
    for u in sizes:
        path = out / f"pilots-{u}.npz"
        if not path.is_file():
            make_pilots([("cnn-digits", {"channels": 8, "lr": lr, "unit_samples": u,
                                         "lr_scaling": "sqrt"}) for lr in (0.05, 0.1)],
                        seeds=2, units=40, nodes=(2,)).save(path)
        rows = live.run("Live-Small-v0", ["lara"], range(5), out / f"live-{u}", progress=False,
                        pilots=str(path.resolve()))
        print(f"| {u} | {100 * statistics.median(r['overhead_fraction'] for r in rows):.1f}% | "
              f"{100 * statistics.median(r['packing_fraction'] for r in rows):.1f}% | "
              f"{statistics.median(r['episode_seconds'] for r in rows):.1f} | "
              f"{statistics.median(r['migrations'] for r in rows):.0f} |",
              flush=True)


if __name__ == "__main__":
    main(sys.argv)
