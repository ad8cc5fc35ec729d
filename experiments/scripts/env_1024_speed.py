"""env.step alone of the PettingZoo env at 1,024 nodes, flat against ``observations="blocks"``
(issue 70's target: blocks at least 300 steps/s): every node on its first visible task (the
first legal non-idle action, else idle), 200 timed steps per run, 3 runs of each, medians.

    python experiments/scripts/env_1024_speed.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import core_env


def main() -> None:
    rates: dict[str, list[float]] = {}
    for _ in range(3):
        for mode in ("full", "blocks"):
            env = core_env.parallel_env(preset="CoRE-v0", n_nodes=1024, observations=mode)
            obs, _ = env.reset(seed=0)
            spent, steps = 0.0, 0
            while steps < 200:
                acts = {}
                for agent, o in obs.items():
                    legal = np.flatnonzero(o["action_mask"])
                    acts[agent] = int(legal[min(1, len(legal) - 1)])
                start = time.perf_counter()
                obs, *_ = env.step(acts)
                spent += time.perf_counter() - start
                steps += 1
                if not env.agents:
                    obs, _ = env.reset()
            rates.setdefault(mode, []).append(steps / spent)
    for mode, v in rates.items():
        print(f"{mode}: {[round(x) for x in v]} steps/s, median {statistics.median(v):.0f}")


if __name__ == "__main__":
    main()
