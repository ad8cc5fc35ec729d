"""``mara-train``: one MARA training run, or the recipe: several runs in parallel, then one
distillation of their ensemble (``mara-train --members K``; docs/mara.md).

    mara-train --members 3 --out runs/recipe                  # a local process pool
    mara-train --members 3 --backend ray --out runs/recipe    # Ray tasks (a local Ray)

Stages, each skipped when its output is complete, so rerunning the command resumes:

1. **members**: run i is ``mara-train`` with this config and ``seed + i`` into
   ``out/member-<i>`` (the same checkpoint as that command run alone), ``workers`` at a
   time, each with ``threads`` torch threads. A member whose ``last.pt`` has all its updates
   is skipped; one with fewer resumes from it (see the trainer's note on resumed runs).
   With ``backend="ray"`` each member is a Ray task reserving ``threads`` CPUs; it returns
   its checkpoint and learning curve, which the driver writes (so ``out`` need not be on a
   shared file system; a member interrupted on another machine restarts).
2. **distillation**: ``mara-distill`` with the members as the teacher and member 0 as the
   student (settings ``distill``, seed ``seed``) into ``out/distill``; done when its
   ``history.json`` exists (an interrupted distillation starts again: its buffer of states
   is not saved).
3. ``out/last.pt``: the distilled checkpoint; ``out/recipe.json``: the wall seconds of each
   stage and the settings.

With ``members=1`` there is nothing to distil: ``out/last.pt`` is the one run's checkpoint
(``mara-train`` without the recipe; with ``backend="ray"`` it runs as one Ray task).
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import shutil
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from core_env.utils.dataclass_cli import parse_config
from core_env.utils.system import cpu_count
from mara_agents.mat.checkpoint import load_checkpoint
from mara_agents.train.config import PPOConfig
from mara_agents.train.trainer import Trainer


def member_config(cfg: PPOConfig, i: int) -> PPOConfig:
    """The config of member ``i``: one run with seed ``seed + i`` into ``out/member-<i>``."""
    out = Path(cfg.out) / f"member-{i}" if cfg.members > 1 else Path(cfg.out)
    return replace(cfg, members=1, seed=cfg.seed + i, out=str(out), resume="",
                   progress=cfg.progress and cfg.members == 1)


def member_state(cfg: PPOConfig) -> str:
    """``"done"`` (``out/last.pt`` has every update), ``"partial"`` (resume from it) or
    ``"new"``.

    Raises:
        ValueError: ``out/last.pt`` was trained with another config."""
    path = Path(cfg.out) / "last.pt"
    if not path.is_file():
        return "new"
    blob = load_checkpoint(path)
    diff = cfg.differences(blob["train_config"])
    if diff:
        raise ValueError(f"{path} was trained with another config (fields {diff}): use "
                         f"another --out or remove it")
    total = math.ceil(cfg.env_steps / (cfg.rollout_len * cfg.num_envs))
    return "done" if int(blob["update"]) >= total else "partial"


def train_member(cfg: PPOConfig, send_files: bool = False) -> dict[str, Any]:
    """Train (or resume, or skip) one member; returns its summary, with (``send_files``:
    what a Ray task sends back) the bytes of its ``last.pt`` and ``curve.json``."""
    state = member_state(cfg)
    out = Path(cfg.out)
    t0 = time.perf_counter()
    if state != "done":
        resume = str(out / "last.pt") if state == "partial" else ""
        Trainer(replace(cfg, resume=resume)).run()
    files = {name: (out / name).read_bytes() for name in ("last.pt", "curve.json")
             if send_files and (out / name).is_file()}
    return {"seed": cfg.seed, "out": str(out), "was": state,
            "seconds": round(time.perf_counter() - t0, 1), "files": files}


def _write_member(result: dict[str, Any]) -> None:
    out = Path(result["out"])
    out.mkdir(parents=True, exist_ok=True)
    for name, data in result["files"].items():
        path = out / name
        if not path.is_file() or path.read_bytes() != data:
            tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)


def worker_count(cfg: PPOConfig) -> int:
    """Members trained at once on the local pool: ``workers`` (0: the CPUs), at most
    ``members``."""
    return min(cfg.workers or cpu_count(), cfg.members)


def train_members(cfg: PPOConfig) -> list[dict[str, Any]]:
    """Stage 1 on ``cfg.backend``: every member, ``workers`` at a time."""
    configs = [member_config(cfg, i) for i in range(cfg.members)]
    workers = worker_count(cfg)
    if cfg.backend == "ray":
        import ray  # the ray extra

        started = not ray.is_initialized()
        if started:
            ray.init(address=cfg.ray_address or None, include_dashboard=False,
                     log_to_driver=False)
        try:
            task = ray.remote(num_cpus=max(cfg.threads, 1))(train_member)
            results = ray.get([task.remote(c, True) for c in configs])
            for r in results:  # the driver writes what the tasks trained
                _write_member(r)
        finally:
            if started:
                ray.shutdown()
    elif workers == 1:
        results = [train_member(c) for c in configs]
    else:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            results = list(pool.map(train_member, configs))
    return [{k: v for k, v in r.items() if k != "files"} for r in results]


def run_recipe(cfg: PPOConfig) -> dict[str, Any]:
    """All stages (see the module docstring); returns the summary written to
    ``out/recipe.json``."""
    from mara_agents.train.distill import DistillConfig, Distiller

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    members = train_members(cfg)
    t1 = time.perf_counter()
    summary: dict[str, Any] = {"config": json.loads(json.dumps(asdict(cfg))),
                               "members": members,
                               "workers": worker_count(cfg),
                               "member_seconds": round(t1 - t0, 1)}
    if cfg.members > 1:
        files = [Path(m["out"]) / "last.pt" for m in members]
        dcfg = DistillConfig(**asdict(cfg.distill), teacher=",".join(map(str, files)),
                             student=str(files[0]), preset=cfg.preset, seed=cfg.seed,
                             threads=cfg.threads, out=str(out / "distill"),
                             progress=cfg.progress)
        if not (out / "distill" / "history.json").is_file():
            Distiller(dcfg).run()
        shutil.copyfile(out / "distill" / "last.pt", out / ".last.pt.tmp")
        os.replace(out / ".last.pt.tmp", out / "last.pt")
        summary["distill_seconds"] = round(time.perf_counter() - t1, 1)
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    summary["checkpoint"] = str(out / "last.pt")
    (out / "recipe.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def parse_args(argv: Sequence[str] | None = None) -> PPOConfig:
    """A :class:`PPOConfig` from command-line arguments (one flag per field)."""
    return parse_config(PPOConfig, argv, prog="mara-train",
                        description="Train MARA (MAT + PPO) on the batched simulator "
                                    "(see docs/mara.md).")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mara-train``: one run (:class:`~mara_agents.train.trainer.Trainer`),
    or the recipe with ``--members K`` or ``--backend ray``."""
    cfg = parse_args(argv)
    if cfg.members > 1 or cfg.backend != "local":
        summary = run_recipe(cfg)
        print(f"trained {cfg.members} members in {summary['member_seconds']:.0f} s "
              f"({summary['workers']} at a time), "
              f"{'distilled, ' if cfg.members > 1 else ''}{summary['seconds']:.0f} s in all "
              f"-> {summary['checkpoint']}")
        return 0
    summary = Trainer(cfg).run()
    print(f"trained {summary['updates']} updates, {summary['env_steps']} env steps in "
          f"{summary['seconds']:.0f} s -> {summary['checkpoint']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
