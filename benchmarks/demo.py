"""The demo run by ``make demo``: every shipped policy on the training and heavy loads.

Until the agents exist this runs the random masked policy only and prints a summary table.
"""

from __future__ import annotations

import statistics

import numpy as np

import core_env
from benchmarks.speed import random_masked

KEYS = ("arrived", "completed", "expired", "completion_rate", "utilization",
        "capacity_conflicts")


def run_episode(preset: str, seed: int) -> dict:
    env = core_env.parallel_env(preset=preset)
    rng = np.random.default_rng(seed + 1_000_003)
    obs, _ = env.reset(seed=seed)
    agents = env.possible_agents
    info: dict = {}
    while env.agents:
        mask = np.stack([obs[a]["action_mask"] for a in agents])
        acts = random_masked(rng, mask)
        obs, _, _, _, info = env.step({a: int(x) for a, x in zip(agents, acts)})
    return info[agents[0]]["episode"]


def main(presets=("CoRE-v0", "CoRE-Heavy-v0"), seeds=(0, 1, 2)) -> str:
    lines = ["| preset | policy | seeds | " + " | ".join(KEYS) + " |",
             "|---|---|---|" + "---|" * len(KEYS)]
    for preset in presets:
        eps = [run_episode(preset, s) for s in seeds]
        cells = []
        for k in KEYS:
            v = statistics.mean(e[k] for e in eps)
            cells.append(f"{v:.3f}" if isinstance(eps[0][k], float) else f"{v:.1f}")
        lines.append(f"| {preset} | random (masked) | {list(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
