"""Where the simulator's model of a live episode is wrong (docs/live.md, "Results").

    python -m experiments.scripts.live_gap results/live-v0/records

For every real observation in the records (written by ``mara-bench live``), the difference
between the real ln loss and the task's reference curve (its one-node pilot run) at the
model's cumulative work, i.e. what the replayed simulator would have shown at that point.
Prints the median per learning-rate scaling of the job variant and node count k.
"""

from __future__ import annotations

import argparse
import collections
import statistics
from pathlib import Path

import numpy as np

from core_env import pmath
from core_env.curves import LOG_WORK_GRID
from core_env.live import LiveRecord


def residuals(folder: Path) -> dict[tuple[str, int], list[float]]:
    """(lr scaling, nodes) -> real ln loss minus the reference curve at the model's work."""
    out: dict[tuple[str, int], list[float]] = collections.defaultdict(list)
    for path in sorted(folder.glob("*.npz")):
        rec = LiveRecord.load(path)
        for task, _, k, work, loss, _ in rec.obs:
            table = rec.workload.log_loss[task].astype(np.float64)
            ref = pmath.interp(np.log([work]), LOG_WORK_GRID, table)[0]
            scaling = str(rec.jobs[task].variant.get("lr_scaling", "-"))
            out[(scaling, k)].append(float(np.log(loss) - ref))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=Path, help="a records/ folder of mara-bench live")
    args = ap.parse_args()
    res = residuals(args.records)
    ks = sorted({k for _, k in res})
    print("| lr scaling | " + " | ".join(f"k={k}" for k in ks) + " |")
    print("|---" * (len(ks) + 1) + "|")
    for scaling in sorted({s for s, _ in res}):
        cells = [f"{statistics.median(res[(scaling, k)]):+.3f} (n={len(res[(scaling, k)])})"
                 if (scaling, k) in res else "-" for k in ks]
        print(f"| {scaling} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
