"""How much faster k nodes train a real job: the live runtime's scaling curve (docs/live.md).

    python -m experiments.scripts.live_scaling [--seeds 5] [--slots 60]

For the ``mlp-digits`` job at each learning-rate scaling (none, sqrt, linear) and k in
{1, 2, 4, 8}, trains ``--slots`` slots of one work unit per node with k nodes, in this
process, and counts the slots to first reach validation losses 0.5, 0.3 and 0.2. With the
simulator's law (k nodes deliver k**alpha times the work of one per slot), slots(1) /
slots(k) = k**alpha, so each (seed, level) gives alpha = ln(slots(1) / slots(k)) / ln(k).
Prints the median alpha over seeds and levels per scaling and k.
"""

from __future__ import annotations

import argparse
import math
import statistics

from core_env.live import JobSpec, make_job

LEVELS = (0.5, 0.3, 0.2)
NODES = (1, 2, 4, 8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--slots", type=int, default=60)
    args = ap.parse_args()
    print("| lr scaling | k=2 | k=4 | k=8 |\n|---|---|---|---|")
    for scaling in ("none", "sqrt", "linear"):
        alphas: dict[int, list[float]] = {k: [] for k in NODES[1:]}
        for seed in range(args.seeds):
            losses = {}
            for k in NODES:
                job = make_job(JobSpec("mlp-digits", {"lr_scaling": scaling}, seed=seed))
                losses[k] = [job.train(1, k) for _ in range(args.slots)]
            for level in LEVELS:
                slots = {k: next((i + 1 for i, v in enumerate(ls) if v <= level), None)
                         for k, ls in losses.items()}
                if slots[1] is None:
                    continue
                for k in NODES[1:]:
                    if slots[k] is not None:
                        alphas[k].append(math.log(slots[1] / slots[k]) / math.log(k))
        cells = [f"{statistics.median(alphas[k]):.2f}" if alphas[k] else "-" for k in NODES[1:]]
        print(f"| {scaling} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
