"""Simulator speed: the compiled kernels against the numpy reference, in one run.

For each backend of :data:`core_env.dynamics.BACKENDS` (``numba``, the default, and
``numpy``, the reference the kernels must equal bit for bit), in interleaved runs:

* the PettingZoo env's steps/s on ``--preset`` (one preset, CoRE-v0);
* the batched simulator at B = 1, 64 and 256 on that preset: env-steps/s and node-decisions/s,
  and at B = 256 with ``observations="blocks"`` (no per-node copies of the task table);
* cluster sizes N = 16, 64, 256 and 1,024 with K = N / 2 and the training load per node
  (:func:`core_env.presets.scaled`): the PettingZoo env's steps/s and the batched
  simulator's (B = 8) env-steps/s, and the log-log slope of the batched step cost against
  N * K (least squares over the sizes);
* the first ``reset`` and ``step`` of a fresh process, with numba's on-disk cache empty
  (compilation) and filled (every later process).

Every measurement drives the env with the same random legal-action policy and times only
the env's ``step`` (with the resets it triggers), for ``--seconds`` of timed work after one
untimed step. Ratios are taken between the backends' medians in the same run.

    python -m benchmarks speed --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

import core_env
from benchmarks.flags import (
    VALUE,
    Command,
    add_out,
    add_presets,
    arg_type,
    integer,
    positive,
    write_json,
)
from benchmarks.report import markdown_table
from core_env.presets import scaled

SIZES = (16, 64, 256, 1024)
BATCH_SIZES = (1, 64, 256)
SCALE_BATCH = 8


def random_masked(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """Uniform legal action per row of ``mask[..., K+1]`` (idle is always legal)."""
    u = rng.random(mask.shape, dtype=np.float32) * mask
    return u.argmax(axis=-1)


def _config(preset: str, n: int | None):
    return core_env.make_config(preset) if n is None else scaled(n, n // 2)


def pettingzoo_rate(cfg, backend: str, seconds: float, seed: int) -> float:
    """PettingZoo env steps per second (resets included)."""
    env = core_env.CoreSchedulerEnv(cfg, backend=backend)
    rng = np.random.default_rng(seed)
    agents = env.possible_agents
    obs, _ = env.reset(seed=seed)
    elapsed, steps = 0.0, -1
    while elapsed < seconds or steps < 3:
        if not env.agents:
            t0 = time.perf_counter()
            obs, _ = env.reset()
            elapsed += time.perf_counter() - t0
        acts = random_masked(rng, np.stack([obs[a]["action_mask"] for a in agents]))
        actions = dict(zip(agents, acts.tolist(), strict=False))
        t0 = time.perf_counter()
        obs, *_ = env.step(actions)
        if steps >= 0:  # the first step is a warm-up
            elapsed += time.perf_counter() - t0
        steps += 1
    return steps / elapsed


def batched_rate(cfg, backend: str, num_envs: int, seconds: float, seed: int,
                 observations: str = "full") -> float:
    """Batched env-steps per second (``copy=False``; auto-resets included)."""
    env = core_env.BatchedCoreEnv(cfg, num_envs, seed=seed, copy=False, backend=backend,
                                  observations=observations)
    rng = np.random.default_rng(seed)
    _obs, mask = env.reset()
    elapsed, steps = 0.0, -1
    while elapsed < seconds or steps < 3:
        acts = random_masked(rng, mask)
        t0 = time.perf_counter()
        _obs, mask, *_ = env.step(acts)
        if steps >= 0:
            elapsed += time.perf_counter() - t0
        steps += 1
    return steps * num_envs / elapsed


_FIRST = """
import json, sys, time
t0 = time.perf_counter()
import core_env
t1 = time.perf_counter()
env = core_env.parallel_env(preset=sys.argv[1], backend=sys.argv[2])
env.reset(seed=0)
t2 = time.perf_counter()
env.step({a: 0 for a in env.possible_agents})
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first_reset": t2 - t1, "first_step": t3 - t2}))
"""


def first_call(preset: str, backend: str, cache_dir: str | None) -> dict[str, float]:
    """Seconds of ``import core_env``, the first reset and the first step in a fresh
    process, with numba's cache in ``cache_dir`` (``None``: the default cache)."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", _FIRST, preset, backend], env=env,
                         capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def slope(sizes: list[int], env_steps_per_s: list[float]) -> float:
    """Least-squares slope of ln(seconds per env-step) against ln(N * K), K = N / 2."""
    x = np.log([n * (n // 2) for n in sizes])
    y = -np.log(env_steps_per_s)
    return float(np.polyfit(x, y, 1)[0])


def run(preset: str = "CoRE-v0", runs: int = 3, seconds: float = 1.0,
        backends: tuple[str, ...] = ("numpy", "numba"), batch_sizes=BATCH_SIZES,
        sizes=SIZES, scale_batch: int = SCALE_BATCH, seed: int = 0,
        first: bool = True, progress: bool = False) -> dict[str, Any]:
    """Median throughputs over ``runs`` interleaved repetitions (module docstring).

    Raises:
        ValueError: an unknown backend, or ``numba`` without numba.
    """
    for b in backends:
        core_env.dynamics.check_backend(b)
    return _measure(preset, runs, seconds, backends, batch_sizes, sizes, scale_batch, seed,
                    first, progress)


def _measure(preset: str, runs: int, seconds: float, backends: tuple[str, ...],
             batch_sizes, sizes, scale_batch: int, seed: int, first: bool,
             progress: bool) -> dict[str, Any]:
    """:func:`run` on checked arguments."""
    from tqdm import tqdm

    from core_env import pmath

    jobs = [("pettingzoo", None, 1)] + [("batched", None, b) for b in batch_sizes]
    jobs += [("blocks", None, max(batch_sizes))]
    jobs += [(kind, n, scale_batch if kind == "batched" else 1)
             for n in sizes for kind in ("pettingzoo", "batched")]
    raw: dict[str, dict[str, list[float]]] = {}
    bar = tqdm(total=runs * len(jobs) * len(backends), desc="speed", unit="measure",
               disable=not progress)
    for r in range(runs):
        for kind, n, bsz in jobs:
            key = f"{kind}/{'preset' if n is None else n}/B={bsz}"
            for backend in backends:
                cfg = _config(preset, n)
                rate = (pettingzoo_rate(cfg, backend, seconds, seed + r) if kind == "pettingzoo"
                        else batched_rate(cfg, backend, bsz, seconds, seed + r,
                                          "blocks" if kind == "blocks" else "full"))
                raw.setdefault(key, {}).setdefault(backend, []).append(rate)
                bar.update()
    bar.close()
    med = {key: {b: statistics.median(v) for b, v in by.items()} for key, by in raw.items()}
    result: dict[str, Any] = {
        "preset": preset, "runs": runs, "seconds": seconds, "seed": seed,
        "backends": list(backends), "batch_sizes": list(batch_sizes), "sizes": list(sizes),
        "scale_batch": scale_batch, "machine": platform.platform(), "numpy": np.__version__,
        "pmath": pmath.BACKEND, "median_steps_per_s": med, "all_steps_per_s": raw,
        "slope": {b: slope(list(sizes), [med[f"batched/{n}/B={scale_batch}"][b]
                                         for n in sizes]) for b in backends}
        if len(sizes) >= 2 else {},
    }
    if first:
        with tempfile.TemporaryDirectory() as tmp:
            result["first_call"] = {b: {"empty cache": first_call(preset, b, tmp),
                                        "cached": first_call(preset, b, tmp)}
                                    for b in backends}
    return result


def format_table(res: dict[str, Any]) -> str:
    """The result as Markdown tables (figures per second; ratios between backends)."""
    backends, med = res["backends"], res["median_steps_per_s"]
    ratio_of = backends[-1] if len(backends) > 1 else None

    def cells(key: str, per_node: int = 0) -> list[str]:
        row = [f"{med[key][b]:,.0f}" for b in backends]
        if ratio_of:
            row.append(f"{med[key][ratio_of] / med[key][backends[0]]:.1f}x")
        if per_node:
            row.append(f"{med[key][backends[-1]] * per_node:,.0f}")
        return row

    head = [*backends] + ([f"{ratio_of} / {backends[0]}"] if ratio_of else [])
    n = core_env.make_config(res["preset"]).cluster.n_nodes
    rows = [["PettingZoo env steps/s", *cells("pettingzoo/preset/B=1", n)]]
    rows += [[f"batched B={b} env-steps/s", *cells(f"batched/preset/B={b}", n)]
             for b in res["batch_sizes"]]
    big = max(res["batch_sizes"])
    rows.append([f"batched B={big}, observation blocks, env-steps/s",
                 *cells(f"blocks/preset/B={big}", n)])
    out = markdown_table(["measure", *head, f"node-decisions/s ({backends[-1]})"], rows,
                         title=f"Speed on {res['preset']} (medians of {res['runs']} runs, "
                               f"seed {res['seed']})")
    rows = []
    for size in res["sizes"]:
        rows.append([f"{size}", f"{size // 2}", *cells(f"pettingzoo/{size}/B=1", size),
                     *cells(f"batched/{size}/B={res['scale_batch']}", size)])
    sub = [f"PettingZoo {b}" for b in backends] + (["ratio"] if ratio_of else []) + [
        "node-decisions/s"]
    sub += [f"batched B={res['scale_batch']} {b}" for b in backends] + (
        ["ratio"] if ratio_of else []) + ["node-decisions/s"]
    out += "\n" + markdown_table(["N", "K", *sub], rows, title=(
        "Cluster sizes (K = N/2, training load per node; steps/s and env-steps/s)"))
    if res["slope"]:
        out += "\nlog-log slope of the batched step cost against N*K: " + ", ".join(
            f"{b} {s:.2f}" for b, s in res["slope"].items()) + "\n"
    if res.get("first_call"):
        rows = [[b, cache, f"{v['import']:.2f}", f"{v['first_reset']:.2f}",
                 f"{v['first_step']:.3f}"]
                for b, by in res["first_call"].items() for cache, v in by.items()]
        out += "\n" + markdown_table(
            ["backend", "numba cache", "import s", "first reset s", "first step s"], rows,
            title="A fresh process (compilation happens once; the cache is on disk)")
    return out


def _backend(text: str) -> str:
    """A backend of :data:`core_env.dynamics.BACKENDS` that this installation can run."""
    from core_env.dynamics import BACKENDS, check_backend
    from core_env.utils.checks import fail

    if text not in BACKENDS:
        fail(VALUE, text, f"one of {', '.join(BACKENDS)}")
    return check_backend(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_presets(parser, ["CoRE-v0"], one=True)
    parser.add_argument("--runs", type=integer(1), default=3, help="interleaved repetitions")
    parser.add_argument("--seconds", type=positive, default=1.0,
                        help="timed seconds per measurement")
    parser.add_argument("--backends", nargs="+", type=arg_type(_backend), metavar="BACKEND",
                        default=["numpy", "numba"],
                        help="backends, numpy and/or numba (ratios: last / first)")
    parser.add_argument("--batch-sizes", nargs="+", type=integer(1), default=list(BATCH_SIZES),
                        help="batch sizes B on the preset")
    parser.add_argument("--sizes", nargs="+", type=integer(2), default=list(SIZES),
                        help="cluster sizes N (K = N/2, load per node of CoRE-v0)")
    parser.add_argument("--no-first-call", action="store_true",
                        help="skip the fresh-process timings")
    parser.add_argument("--seed", type=integer(0), default=0, help="seed")
    add_out(parser, None, "write the result as JSON here")


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench speed``: every value (backends included) checked by argparse."""
    res = _measure(args.presets[0], args.runs, args.seconds, tuple(args.backends),
                   tuple(args.batch_sizes), tuple(args.sizes), SCALE_BATCH, args.seed,
                   first=not args.no_first_call, progress=True)
    print(format_table(res))
    write_json(args.out, res)
    return 0


COMMAND = Command("speed", "compiled kernels vs the numpy reference: env throughput",
                  add_arguments, run_command)
