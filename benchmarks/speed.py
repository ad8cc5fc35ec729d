"""Simulator speed: PettingZoo env steps/s vs the batched simulator's node-decisions/s.

Both run the same random masked policy (uniform over each node's legal actions); only the
environment's ``step`` (and the resets it triggers) is timed, not the policy. Runs are
interleaved and repeated; the medians and their ratio are reported.

    python -m benchmarks speed --runs 5
"""

from __future__ import annotations

import platform
import statistics
import time
from typing import Any

import numpy as np

import core_env
from benchmarks.report import markdown_table


def random_masked(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """Uniform legal action per row of ``mask[..., K+1]`` (idle is always legal)."""
    u = rng.random(mask.shape, dtype=np.float32) * mask
    return u.argmax(axis=-1)


def pettingzoo_steps_per_second(preset: str, steps: int, seed: int) -> float:
    env = core_env.parallel_env(preset=preset)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    agents = env.possible_agents
    elapsed = 0.0
    for _ in range(steps):
        if not env.agents:
            t0 = time.perf_counter()
            obs, _ = env.reset()
            elapsed += time.perf_counter() - t0
        mask = np.stack([obs[a]["action_mask"] for a in agents])
        acts = random_masked(rng, mask)
        actions = {a: int(x) for a, x in zip(agents, acts)}
        t0 = time.perf_counter()
        obs, *_ = env.step(actions)
        elapsed += time.perf_counter() - t0
    return steps / elapsed


def batched_decisions_per_second(preset: str, num_envs: int, steps: int, seed: int,
                                 copy: bool) -> float:
    env = core_env.make_batched(preset, num_envs=num_envs, seed=seed, copy=copy)
    rng = np.random.default_rng(seed)
    obs, mask = env.reset()
    elapsed = 0.0
    for _ in range(steps):
        acts = random_masked(rng, mask)
        t0 = time.perf_counter()
        obs, mask, *_ = env.step(acts)
        elapsed += time.perf_counter() - t0
    return steps * num_envs * env.n_nodes / elapsed


def run(preset: str = "CoRE-v0", runs: int = 5, pz_steps: int = 3000, num_envs: int = 256,
        batched_steps: int = 1500, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Median throughputs over ``runs`` interleaved repetitions."""
    from tqdm import tqdm

    from core_env import pmath

    n = core_env.make_config(preset).cluster.n_nodes
    pz, bn, bc = [], [], []
    for r in tqdm(range(runs), desc="speed runs", unit="run", disable=not progress):
        pz.append(pettingzoo_steps_per_second(preset, pz_steps, seed + r))
        bn.append(batched_decisions_per_second(preset, num_envs, batched_steps, seed + r, False))
        bc.append(batched_decisions_per_second(preset, num_envs, batched_steps, seed + r, True))
    pz_med = statistics.median(pz)
    result = {
        "preset": preset, "runs": runs, "seed": seed, "num_envs": num_envs,
        "pz_steps": pz_steps, "batched_steps": batched_steps,
        "machine": platform.platform(), "numpy": np.__version__, "pmath": pmath.BACKEND,
        "pettingzoo_steps_per_s": pz_med,
        "pettingzoo_decisions_per_s": pz_med * n,
        "batched_decisions_per_s": statistics.median(bn),
        "batched_decisions_per_s_copy": statistics.median(bc),
        "all": {"pettingzoo_steps_per_s": pz, "batched_decisions_per_s": bn,
                "batched_decisions_per_s_copy": bc},
    }
    result["ratio"] = result["batched_decisions_per_s"] / result["pettingzoo_decisions_per_s"]
    result["ratio_copy"] = (result["batched_decisions_per_s_copy"]
                            / result["pettingzoo_decisions_per_s"])
    return result


def format_table(res: dict[str, Any]) -> str:
    rows = [
        ("PettingZoo env steps/s", f"{res['pettingzoo_steps_per_s']:,.0f}"),
        ("PettingZoo env node-decisions/s", f"{res['pettingzoo_decisions_per_s']:,.0f}"),
        (f"batched (B={res['num_envs']}) node-decisions/s",
         f"{res['batched_decisions_per_s']:,.0f}"),
        ("  ratio batched / PettingZoo", f"{res['ratio']:.1f}x"),
        (f"batched (B={res['num_envs']}, copy=True) node-decisions/s",
         f"{res['batched_decisions_per_s_copy']:,.0f}"),
        ("  ratio (copy=True) / PettingZoo", f"{res['ratio_copy']:.1f}x"),
    ]
    return markdown_table(["measure", "value"], rows, title=(
        f"Speed on {res['preset']} (median of {res['runs']} runs, seed {res['seed']})"))
