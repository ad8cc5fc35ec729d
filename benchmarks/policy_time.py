"""Policy inference cost: wall time of whole episodes per policy, in one process, one torch
thread, interleaved over the same seeds (``python -m benchmarks policy-time``).

    python -m benchmarks policy-time --policies mara lara --preset CoRE-v0 --seeds 5

For every seed, each policy runs the full episode (forecasts included: the forecast wrapper
is part of the policy's cost) after one untimed warm-up episode per policy; the report gives
every policy's median seconds per episode and per step, and each median episode time over
the last policy's (the baseline), as the ratio of medians and the median of per-seed ratios.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.flags import Command, add_out, add_policies, add_presets, add_seeds, write_json
from benchmarks.report import markdown_table


def run(policies: Sequence[str], preset: str = "CoRE-v0", seeds: int = 5,
        seed_offset: int = 1000, progress: bool = False) -> dict[str, Any]:
    """Time full episodes (see the module docstring)."""
    import torch
    from tqdm import tqdm

    import core_env
    from mara_agents.policy import make_policy, run_episode

    if len(policies) < 2:
        raise ValueError(f"policies: expected at least two names (the last is the baseline), "
                         f"got {list(policies)}")
    torch.set_num_threads(1)
    made = {name: make_policy(name, core_env.parallel_env(preset=preset), preset=preset)
            for name in policies}
    for env, pol in made.values():  # warm-up (imports, allocation, torch kernels)
        run_episode(env, pol, seed=seed_offset - 1)
    secs: dict[str, list[float]] = {p: [] for p in policies}
    steps: dict[str, list[int]] = {p: [] for p in policies}
    for s in tqdm(range(seed_offset, seed_offset + seeds), desc="policy time", unit="seed",
                  disable=not progress):
        for name, (env, pol) in made.items():
            t = time.perf_counter()
            st = run_episode(env, pol, seed=s)
            secs[name].append(time.perf_counter() - t)
            steps[name].append(int(st["length"]))
    base = policies[-1]
    rows = []
    for name in policies:
        a, b = np.asarray(secs[name]), np.asarray(secs[base])
        rows.append({"policy": name, "median_s_per_episode": float(np.median(a)),
                     "median_ms_per_step": float(np.median(
                         1e3 * a / np.maximum(np.asarray(steps[name]), 1))),
                     "ratio_of_medians": float(np.median(a) / np.median(b)),
                     "median_ratio": float(np.median(a / b))})
    return {"preset": preset, "seeds": list(range(seed_offset, seed_offset + seeds)),
            "baseline": base, "rows": rows, "seconds": secs}


def format_table(res: dict[str, Any]) -> str:
    return markdown_table(
        ["policy", "median s / episode", "median ms / step", "ratio of medians",
         "median per-seed ratio"],
        [[r["policy"], f"{r['median_s_per_episode']:.2f}", f"{r['median_ms_per_step']:.2f}",
          f"{r['ratio_of_medians']:.2f}", f"{r['median_ratio']:.2f}"] for r in res["rows"]],
        title=(f"Episode wall time on {res['preset']}, seeds {res['seeds'][0]}-"
               f"{res['seeds'][-1]}, one torch thread (baseline: {res['baseline']})"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_policies(parser, ["mara", "lara"],
                 help="policies to time (at least two); the last is the baseline")
    add_presets(parser, ["CoRE-v0"], one=True)
    add_seeds(parser, seeds=5, seed_offset=1000)
    add_out(parser, None, "write the result as JSON here")


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench policy-time``: argparse checked each value; :func:`run` checks that
    there are at least two policies."""
    res = run(args.policies, args.presets[0], args.seeds, args.seed_offset, progress=True)
    print(format_table(res))
    write_json(args.out, res)
    return 0


COMMAND = Command("policy-time", "episode wall time per policy (inference cost)",
                  add_arguments, run_command)
