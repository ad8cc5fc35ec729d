"""Soak benchmark: long runs that must stay flat in memory and free of errors.

``mara-bench soak`` (or ``python -m benchmarks soak``) runs two parts on one preset:

1. the PettingZoo environment for ``env_steps`` steps (default 1,000,000) with a random
   legal policy, over as many episodes as that takes;
2. the batched simulator at B = ``num_envs`` (default 256) for ``batched_steps`` steps
   (default 100,000) with random legal actions, finished environments resetting
   automatically.

On the way it checks, and raises ``RuntimeError`` on the first violation: every observation
and reward is finite, masks always allow idling, and every finished episode has
``arrived == completed + expired``, utilisation and completion rate in [0, 1] and a shaped
return equal to its number of successes (to 1e-6). Memory is sampled at 20 checkpoints per
part: the resident set size (``/proc/self/statm``) and the peak RSS so far
(``ru_maxrss``). "Start" is the first checkpoint (after 5% of the steps, so imports, buffers
and the first episodes are allocated); the part counts as flat when the peak RSS grows by
less than 5% (and 16 MiB) from there to the end.

    mara-bench soak --preset CoRE-v0 --env-steps 1000000 --batched-steps 100000
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.flags import Command, add_out, add_presets, integer
from benchmarks.report import markdown_table
from benchmarks.store import write_atomic
from core_env.utils.checks import check_int

CHECKPOINTS = 20
"""Memory samples per part."""


def rss_mib() -> float:
    """Current resident set size in MiB (Linux ``/proc``; falls back to the peak)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * resource.getpagesize() / 2**20
    except (OSError, ValueError, IndexError):
        return peak_rss_mib()


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (``ru_maxrss``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if platform.system() == "Darwin" else peak / 2**10


def _check_episode(stats: dict[str, Any], where: str) -> None:
    if stats["arrived"] != stats["completed"] + stats["expired"]:
        raise RuntimeError(f"{where}: arrived {stats['arrived']} != completed "
                           f"{stats['completed']} + expired {stats['expired']}")
    for key in ("utilization", "completion_rate"):
        if not 0.0 <= stats[key] <= 1.0:
            raise RuntimeError(f"{where}: {key} = {stats[key]} outside [0, 1]")
    if abs(stats["return"] - stats["completed"]) > 1e-6:
        raise RuntimeError(f"{where}: shaped return {stats['return']} != successes "
                           f"{stats['completed']}")


def _sample(series: list[dict[str, float]], steps: int, t0: float) -> None:
    series.append({"steps": steps, "rss_mib": round(rss_mib(), 2),
                   "peak_rss_mib": round(peak_rss_mib(), 2),
                   "seconds": round(time.perf_counter() - t0, 2)})


def _verdict(series: list[dict[str, float]]) -> dict[str, Any]:
    start, end = series[0], series[-1]
    growth = end["peak_rss_mib"] - start["peak_rss_mib"]
    return {"peak_rss_start_mib": start["peak_rss_mib"], "peak_rss_end_mib": end["peak_rss_mib"],
            "rss_start_mib": start["rss_mib"], "rss_end_mib": end["rss_mib"],
            "peak_rss_growth_mib": round(growth, 2),
            "flat": bool(growth < max(0.05 * start["peak_rss_mib"], 16.0))}


def _bar(total: int, desc: str, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="step", disable=not progress, mininterval=1.0)


def soak_pettingzoo(preset: str, steps: int, seed: int, progress: bool = False
                    ) -> dict[str, Any]:
    """Part 1: ``steps`` PettingZoo env steps with a random legal policy."""
    import core_env

    env = core_env.parallel_env(preset=preset)
    agents = env.possible_agents
    rng = np.random.default_rng(seed)
    every = max(steps // CHECKPOINTS, 1)
    series: list[dict[str, float]] = []
    episodes = completed = arrived = 0
    obs, _ = env.reset(seed=seed)
    bar = _bar(steps, "soak: PettingZoo", progress)
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        mask = np.stack([obs[a]["action_mask"] for a in agents])
        act = (rng.random(mask.shape) * mask).argmax(axis=1)
        obs, rew, _, _, infos = env.step(dict(zip(agents, act.tolist(), strict=False)))
        if not np.isfinite(rew[agents[0]]):
            raise RuntimeError(f"step {step}: reward {rew[agents[0]]}")
        if not env.agents:
            stats = infos[agents[0]]["episode"]
            _check_episode(stats, f"PettingZoo episode {episodes}")
            episodes += 1
            completed += stats["completed"]
            arrived += stats["arrived"]
            obs, _ = env.reset()
        if step % 64 == 0 or not env.agents:
            o = np.stack([obs[a]["observation"] for a in agents])
            if not np.all(np.isfinite(o)):
                raise RuntimeError(f"step {step}: non-finite observation")
        if step % every == 0:
            _sample(series, step, t0)
            bar.update(every)
    bar.close()
    seconds = time.perf_counter() - t0
    return {"steps": steps, "episodes": episodes, "seconds": round(seconds, 1),
            "steps_per_second": round(steps / seconds), "tasks_arrived": arrived,
            "completion_rate": completed / max(arrived, 1), "memory": series,
            **_verdict(series)}


def soak_batched(preset: str, num_envs: int, steps: int, seed: int, progress: bool = False
                 ) -> dict[str, Any]:
    """Part 2: ``steps`` batched steps at B = ``num_envs`` with random legal actions."""
    import core_env

    envs = core_env.make_batched(preset, num_envs=num_envs, seed=seed, copy=False)
    obs, mask = envs.reset()
    rng = np.random.default_rng(seed)
    every = max(steps // CHECKPOINTS, 1)
    series: list[dict[str, float]] = []
    episodes = completed = arrived = 0
    bar = _bar(steps, "soak: batched", progress)
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        act = (rng.random(mask.shape) * mask).argmax(axis=-1)
        obs, mask, reward, _done, info = envs.step(act)
        if not np.all(np.isfinite(reward)):
            raise RuntimeError(f"batched step {step}: non-finite reward")
        if step % 16 == 0:
            if not np.all(np.isfinite(obs)):
                raise RuntimeError(f"batched step {step}: non-finite observation")
            if not np.all(mask[..., 0] == 1):
                raise RuntimeError(f"batched step {step}: a mask forbids idling")
        ep = info["episode"]
        for i in range(ep["env"].size):
            _check_episode({key: ep[key][i] for key in ep}, f"batched step {step}, env "
                           f"{int(ep['env'][i])}")
        episodes += int(ep["env"].size)
        completed += int(ep["completed"].sum()) if ep["env"].size else 0
        arrived += int(ep["arrived"].sum()) if ep["env"].size else 0
        if step % every == 0:
            _sample(series, step, t0)
            bar.update(every)
    bar.close()
    seconds = time.perf_counter() - t0
    return {"steps": steps, "num_envs": num_envs, "env_steps": steps * num_envs,
            "episodes": episodes, "seconds": round(seconds, 1),
            "env_steps_per_second": round(steps * num_envs / seconds),
            "tasks_arrived": arrived, "completion_rate": completed / max(arrived, 1),
            "memory": series, **_verdict(series)}


def run(preset: str = "CoRE-v0", env_steps: int = 1_000_000, batched_steps: int = 100_000,
        num_envs: int = 256, seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Both parts; returns the machine-readable result (see the module docstring).

    Raises:
        ValueError: a non-positive step count or batch size.
        RuntimeError: the first invariant violated.
    """
    for name, value in (("env_steps", env_steps), ("batched_steps", batched_steps),
                        ("num_envs", num_envs)):
        check_int(name, value, 1)
    return _soak(preset, env_steps, batched_steps, num_envs, seed, progress)


def _soak(preset: str, env_steps: int, batched_steps: int, num_envs: int, seed: int,
          progress: bool) -> dict[str, Any]:
    """:func:`run` on checked arguments."""
    from benchmarks.store import code_version, config_record

    start = {"rss_mib": round(rss_mib(), 2), "peak_rss_mib": round(peak_rss_mib(), 2)}
    pz = soak_pettingzoo(preset, env_steps, seed, progress)
    batched = soak_batched(preset, num_envs, batched_steps, seed, progress)
    return {"preset": preset, "seed": seed, "env_steps": env_steps,
            "batched_steps": batched_steps, "num_envs": num_envs,
            "config_hash": config_record(preset)["config_hash"],
            "code_version": code_version(), "machine": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__,
            "process_start": start, "pettingzoo": pz, "batched": batched,
            "errors": 0, "flat": pz["flat"] and batched["flat"]}


def format_table(res: dict[str, Any]) -> str:
    """Markdown summary of :func:`run`'s result."""
    pz, bt = res["pettingzoo"], res["batched"]
    rows = [
        ("PettingZoo env steps", (f"{pz['steps']:,} ({pz['episodes']:,} episodes, "
                                 f"{pz['steps_per_second']:,} steps/s)")),
        ("PettingZoo peak RSS start -> end", (f"{pz['peak_rss_start_mib']:.1f} -> "
                                             f"{pz['peak_rss_end_mib']:.1f} MiB "
                                             f"(RSS {pz['rss_start_mib']:.1f} -> "
                                             f"{pz['rss_end_mib']:.1f})")),
        (f"batched steps at B = {bt['num_envs']}", (f"{bt['steps']:,} ({bt['env_steps']:,} "
                                                   f"env-steps, {bt['episodes']:,} episodes, "
                                                   f"{bt['env_steps_per_second']:,} env-steps/s)")),
        ("batched peak RSS start -> end", (f"{bt['peak_rss_start_mib']:.1f} -> "
                                          f"{bt['peak_rss_end_mib']:.1f} MiB "
                                          f"(RSS {bt['rss_start_mib']:.1f} -> "
                                          f"{bt['rss_end_mib']:.1f})")),
        ("memory flat", "yes" if res["flat"] else "NO"),
        ("errors", str(res["errors"])),
    ]
    return markdown_table(["measure", "value"], rows)


def write(res: dict[str, Any], out: Path) -> None:
    """Write ``soak.json`` and ``table.md`` into ``out`` (atomically)."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "soak.json", json.dumps(res, indent=2))
    write_atomic(out / "table.md", format_table(res))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_presets(parser, ["CoRE-v0"], one=True)
    parser.add_argument("--env-steps", type=integer(1), default=1_000_000,
                        help="PettingZoo env steps")
    parser.add_argument("--batched-steps", type=integer(1), default=100_000,
                        help="batched steps")
    parser.add_argument("--num-envs", type=integer(1), default=256, help="batch size B")
    parser.add_argument("--seed", type=integer(0), default=0, help="seed")
    add_out(parser, Path("results/soak"), "results folder")


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench soak``: every value checked by argparse."""
    res = _soak(args.presets[0], args.env_steps, args.batched_steps, args.num_envs, args.seed,
                progress=True)
    write(res, args.out)
    print(format_table(res))
    print(f"results in {args.out}/")
    return 0


COMMAND = Command("soak", "1M env steps + 100k batched steps: memory and errors",
                  add_arguments, run_command)
