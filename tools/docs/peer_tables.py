"""The tables of docs/baselines.md ("Measured completion rates") from a `schedule` run.

    mara-bench schedule --out results/schedule          # seeds 0-49, every preset, the bound
    python -m tools.docs.peer_tables results/schedule/results.json

Prints, over the seeds of the run: every policy's mean completion rate per preset and its
paired difference to LARA (points, 95% Student-t interval); for the peers and LARA the paired
difference to MARA; for the peers, LARA and MARA the share of the clairvoyant bound and the
task switches per episode; and per preset MARA minus the best peer (the peer with the
highest mean completion rate there).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.stats import DIFFERENCE, RATE, mean_ci
from mara_agents.policy import BASELINES, MARA, PEERS

PRESETS = ("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0", "CoRE-Real-v0",
           "CoRE-RealTrace-v0")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _ci(values: list[float], signed: bool, bounds) -> str:
    m, lo, hi = mean_ci(values, bounds=bounds)
    f = "{:+.1f}" if signed else "{:.1f}"
    return f"{f.format(100 * m)} ({f.format(100 * lo)}, {f.format(100 * hi)})"


def main(path: str) -> None:
    data = json.loads(Path(path).read_text())
    eps: dict[tuple[str, str], dict[int, dict]] = {}
    for r in data["episodes"]:
        eps.setdefault((r["preset"], r["policy"]), {})[r["seed"]] = r
    bounds = {(b["preset"], b["seed"]): b["bound"] for b in data.get("bounds", [])}
    presets = [p for p in PRESETS if (p, "lara") in eps]
    policies = [p for p in (*BASELINES, MARA) if all((s, p) in eps for s in presets)]
    seeds = sorted(eps[(presets[0], "lara")])
    print(f"seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}), presets {', '.join(presets)}\n")

    def rate(preset, policy):
        return [eps[(preset, policy)][s]["completion_rate"] for s in seeds]

    def diff(preset, a, b):
        return [x - y for x, y in zip(rate(preset, a), rate(preset, b), strict=False)]

    short = [p.removeprefix("CoRE-").removesuffix("-v0") for p in presets]
    print("Completion rate (%), mean over the seeds\n")
    print(_table(["policy", *short], [[f"`{p}`", *(f"{100 * sum(rate(s, p)) / len(seeds):.1f}"
                                                    for s in presets)] for p in policies]))
    group = [p for p in (*PEERS, "lara", MARA) if p in policies]
    for ref, rows in (("lara", policies), (MARA, group)):
        if ref not in policies:
            continue
        print(f"\nPaired difference to {ref} (points, 95% CI)\n")
        print(_table(["policy", *short], [[f"`{p}`", *(_ci(diff(s, p, ref), True, DIFFERENCE)
                                                       for s in presets)]
                                          for p in rows if p != ref]))
    print("\nShare of the clairvoyant bound (completed / bound, %, 95% CI) and task switches "
          "per episode (mean)\n")
    rows = []
    for p in group:
        cells = []
        for s in presets:
            shares = [eps[(s, p)][k]["completed"] / bounds[(s, k)] for k in seeds
                      if bounds.get((s, k), 0) > 0]
            sw = sum(eps[(s, p)][k]["switches"] for k in seeds) / len(seeds)
            cells.append(f"{_ci(shares, False, RATE) if shares else '-'}; {sw:.0f}")
        rows.append([f"`{p}`", *cells])
    print(_table(["policy", *short], rows))
    if MARA in policies:
        print("\nMARA minus the best peer (points, paired 95% CI)\n")
        rows = []
        for s in presets:
            best = max((p for p in PEERS if p in policies), key=lambda p: sum(rate(s, p)))
            rows.append([s, f"`{best}`", f"{100 * sum(rate(s, best)) / len(seeds):.1f}%",
                         _ci(diff(s, MARA, best), True, DIFFERENCE)])
        print(_table(["preset", "best peer", "its completion", "MARA - best peer"], rows))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/schedule/results.json")
