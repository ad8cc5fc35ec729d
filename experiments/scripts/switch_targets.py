"""Issue 59's tables from a results folder of ``mara-bench default``: per preset, LARA, the
best peer (by mean completion), the shipped MARA and MARA with its decoded placement, with
MARA's paired differences (95% CI) and its restores per episode against LARA's; then every
policy's completion rate (%) and restores per episode on every preset.

    mara-bench default --presets CoRE-v0:switch_cost=0.1 CoRE-v0:switch_cost=0.2 \\
        CoRE-v0:switch_cost=0.3 CoRE-Switch-v0 CoRE-Cluster-v0 --policies lara las \\
        successive_halving optimus slaq laira mara experiments.variants:mara_decoded \\
        --seeds 50 --out results/switch_targets
    python experiments/scripts/switch_targets.py results/switch_targets
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.stats import DIFFERENCE, mean_ci

MARA, DECODED = "mara", "experiments.variants:mara_decoded"
NOT_PEERS = {"lara", MARA, DECODED}


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit(__doc__)
    episodes = json.loads((Path(argv[1]) / "results.json").read_text())["episodes"]
    by: dict[str, dict[str, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for e in episodes:
        by[e["preset"]][e["policy"]][e["seed"]] = e

    def rate(p, pol):
        return np.array([by[p][pol][s]["completion_rate"] for s in sorted(by[p][pol])])

    def diff(p, a, b):
        m, lo, hi = mean_ci(list(rate(p, a) - rate(p, b)), bounds=DIFFERENCE)
        return f"{100 * m:+.1f} ({100 * lo:+.1f}, {100 * hi:+.1f})"

    def restores(p, pol):
        return float(np.mean([e["restores"] for e in by[p][pol].values()]))

    print("| preset | LARA | best peer | MARA, decoded placement | MARA | MARA - LARA | "
          "MARA - best peer | restores MARA / LARA (decoded) |")
    print("|---|---|---|---|---|---|---|---|")
    for p in by:
        peers = [q for q in by[p] if q not in NOT_PEERS]
        best = max(peers, key=lambda q: rate(p, q).mean())
        ratio = restores(p, MARA) / restores(p, "lara")
        ratio_dec = restores(p, DECODED) / restores(p, "lara")
        print(f"| `{p}` | {100 * rate(p, 'lara').mean():.1f} | {best} "
              f"{100 * rate(p, best).mean():.1f} | {100 * rate(p, DECODED).mean():.1f} | "
              f"{100 * rate(p, MARA).mean():.1f} | {diff(p, MARA, 'lara')} | "
              f"{diff(p, MARA, best)} | {ratio:.2f} ({ratio_dec:.2f}) |")
    presets = list(by)
    policies = sorted({q for p in presets for q in by[p]},
                      key=lambda q: np.mean([rate(p, q).mean() for p in presets]))
    print()
    print("| policy | " + " | ".join(f"`{p}`" for p in presets) + " |")
    print("|---|" + "---|" * len(presets))
    for q in policies:
        name = "MARA, decoded placement" if q == DECODED else f"`{q}`"
        print(f"| {name} | " + " | ".join(
            f"{100 * rate(p, q).mean():.1f} ({restores(p, q):.0f})" for p in presets) + " |")


if __name__ == "__main__":
    main(sys.argv)
