"""Training throughput of the MARL adapters (project issue 62): env steps per second of
MaskablePPO, MAPPO and IPPO trained on the single env (``num_envs=0``: ``gymnasium.make`` /
``PettingZooWrapper``, the reference path) and on the batched simulator (``num_envs=B``:
:mod:`mara_agents.marl.vector`), one torch thread, the default settings (network sizes,
2048 env steps per update, 4 epochs of 256-step minibatches) but ``num_envs``.

    OMP_NUM_THREADS=1 python experiments/scripts/marl_throughput.py \\
        [--algorithms maskable_ppo mappo ippo] [--preset CoRE-v0] [--num-envs 64] \\
        [--old-steps 2048] [--new-steps 16384] [--repeats 3] [--json out.json]

Each run is a whole ``train(...)`` call (setup and the model file included); env steps per
second is the env steps taken over its wall time, the median of ``--repeats`` runs (old and
new runs alternate, so a load change on the machine hits both). Its time is split by timers
wrapped around the libraries' methods: ``env`` (the env's own step and reset, behind the
adapter: ``step_wait`` of SB3's vector env, ``_step``/``_reset`` of the TorchRL env),
``collect`` (the rest of collecting: the policy's forward passes, the action masks and the
library's data handling), ``update`` (advantages and the minibatch epochs) and ``other``
(setup and saving).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

ALGORITHMS = ("maskable_ppo", "mappo", "ippo")


@contextlib.contextmanager
def patched(owner: type, name: str, wrapper: Callable[[Callable], Callable]) -> Iterator[None]:
    """``owner.name`` replaced by ``wrapper(owner.name)`` inside the block."""
    own = owner.__dict__.get(name)  # None: inherited
    setattr(owner, name, wrapper(getattr(owner, name)))
    try:
        yield
    finally:
        if own is None:
            delattr(owner, name)
        else:
            setattr(owner, name, own)


class Phases:
    """Seconds spent in timed methods, by phase; and the ends of the collection calls, to
    time the updates between them."""

    def __init__(self) -> None:
        self.seconds = {"env": 0.0, "collect": 0.0, "update": 0.0}
        self.collect_end: float | None = None

    def timed(self, phase: str) -> Callable[[Callable], Callable]:
        def wrapper(fn: Callable) -> Callable:
            def run(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    self.seconds[phase] += time.perf_counter() - start
            return run
        return wrapper

    def collection(self, fn: Callable) -> Callable:
        """A collection method: its time is ``collect``; the time since the previous
        collection ended is ``update``."""
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            if self.collect_end is not None:
                self.seconds["update"] += start - self.collect_end
            try:
                return fn(*args, **kwargs)
            finally:
                self.collect_end = time.perf_counter()
                self.seconds["collect"] += self.collect_end - start
        return run

    def last_update(self, fn: Callable) -> Callable:
        """The call after the last update (the collector's shutdown)."""
        def run(*args: Any, **kwargs: Any) -> Any:
            if self.collect_end is not None:
                self.seconds["update"] += time.perf_counter() - self.collect_end
                self.collect_end = None
            return fn(*args, **kwargs)
        return run


def run_once(algorithm: str, preset: str, num_envs: int, env_steps: int,
             out: Path) -> dict[str, Any]:
    """One timed training run: steps, wall seconds, env steps/s and the phases' shares."""
    from mara_agents.marl.common import load_model

    phases = Phases()
    with contextlib.ExitStack() as stack:
        if algorithm == "maskable_ppo":
            from sb3_contrib import MaskablePPO
            from stable_baselines3.common.vec_env import DummyVecEnv

            from mara_agents.marl import sb3
            from mara_agents.marl.vector import CoreVecEnv

            stack.enter_context(patched(MaskablePPO, "collect_rollouts",
                                        phases.timed("collect")))
            stack.enter_context(patched(MaskablePPO, "train", phases.timed("update")))
            vec = CoreVecEnv if num_envs else DummyVecEnv
            stack.enter_context(patched(vec, "step_wait", phases.timed("env")))
            # the reference path as it was: one env, sb3-contrib's per-node distributions,
            # the per-tensor Adam
            config = sb3.MaskablePPOConfig(num_envs=num_envs, node_distribution=bool(num_envs),
                                           fused_adam=bool(num_envs))
            path = sb3.train(preset, env_steps, 0, out, config)
        else:
            from torchrl.collectors import Collector
            from torchrl.envs.libs.pettingzoo import PettingZooWrapper

            from mara_agents.marl import torchrl_ppo
            from mara_agents.marl.vector import CoreTorchEnv

            stack.enter_context(patched(Collector, "rollout", phases.collection))
            stack.enter_context(patched(Collector, "shutdown", phases.last_update))
            env_cls = CoreTorchEnv if num_envs else PettingZooWrapper
            for name in ("_step", "_reset"):
                stack.enter_context(patched(env_cls, name, phases.timed("env")))
            # the reference path as it was: one env, plain mlps, the per-tensor Adam
            config = torchrl_ppo.TorchRLPPOConfig(num_envs=num_envs,
                                                  shared_table=bool(num_envs),
                                                  fused_adam=bool(num_envs))
            path = torchrl_ppo.train(algorithm, preset, env_steps, 0, out, config)
    blob = load_model(path)
    wall, steps = blob["wall_seconds"], blob["curve"]["steps"]
    sec = dict(phases.seconds)
    sec["collect"] -= sec["env"]  # the env steps run inside the collection
    sec["other"] = max(wall - sum(sec.values()), 0.0)
    return {"steps": steps, "wall": wall, "steps_per_s": steps / wall,
            "shares": {k: v / wall for k, v in sec.items()}}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median throughput, with every run's throughput."""
    ordered = sorted(runs, key=lambda r: r["steps_per_s"])
    return {**ordered[len(ordered) // 2], "all_steps_per_s": [r["steps_per_s"] for r in runs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS))
    parser.add_argument("--preset", default="CoRE-v0")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[64],
                        help="batched runs' num_envs (one row each)")
    parser.add_argument("--old-steps", type=int, default=2048,
                        help="env steps of a reference-path run")
    parser.add_argument("--new-steps", type=int, default=16384,
                        help="env steps of a batched run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for algorithm in args.algorithms:
            out = Path(tmp) / f"{algorithm}.pt"
            run_once(algorithm, args.preset, 64, 2048, out)  # warm-up: imports, compilation
            runs: dict[int, list[dict[str, Any]]] = {0: [], **{b: [] for b in args.num_envs}}
            for _ in range(args.repeats):
                for num_envs in runs:
                    steps = args.new_steps if num_envs else args.old_steps
                    runs[num_envs].append(run_once(algorithm, args.preset, num_envs, steps, out))
            old = median_run(runs[0])
            for num_envs, batch in runs.items():
                med = median_run(batch)
                rows.append({"algorithm": algorithm, "num_envs": num_envs, **med,
                             "ratio": med["steps_per_s"] / old["steps_per_s"]})
    print(f"{args.preset}, one thread, median of {args.repeats} "
          f"(reference runs {args.old_steps} env steps, batched {args.new_steps})\n")
    print("| algorithm | num_envs | env steps/s | ratio | env | collect | update | other |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        sh = r["shares"]
        print(f"| {r['algorithm']} | {r['num_envs'] or 'single'} | {r['steps_per_s']:,.0f} "
              f"| {r['ratio']:.1f}x | {sh['env']:.0%} | {sh['collect']:.0%} "
              f"| {sh['update']:.0%} | {sh['other']:.0%} |")
    if args.json:
        args.json.write_text(json.dumps({"preset": args.preset, "args": {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
