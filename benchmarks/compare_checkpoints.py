"""The ``checkpoints`` suite: MARA checkpoints compared on the same seeds
(``python -m benchmarks checkpoints``; the checkpoint format is
:mod:`mara_agents.mat.checkpoint`).

    python -m benchmarks checkpoints runs/a/last.pt runs/b/last.pt --seed-offset 100 --seeds 48

Each checkpoint runs greedily (``make_policy("mara", env, checkpoint=...)``) on the same
seeds of one preset, and LARA with them; the table gives every checkpoint's completion rate
and its paired differences from the first checkpoint and from LARA (95% t intervals over
the seeds). This is how training runs or checkpoints of one run are compared or chosen:
choose on seeds that are not the reporting seeds 0-49 (``docs/experiments.md`` uses 100-147 to
choose and 200-247 to check along a run).

An entry of comma-separated files is an ensemble of them (``make_policy("mara", env,
checkpoint=[...])``), compared like any checkpoint::

    python -m benchmarks checkpoints runs/a/last.pt runs/a/last.pt,runs/b/last.pt
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.flags import Command, add_out, add_presets, add_seeds, add_workers, write_json
from benchmarks.report import audit_cells, audit_row, markdown_table
from benchmarks.runner import map_pinned
from benchmarks.stats import mean_ci
from core_env.utils.checks import check_int

REFERENCE = "lara"


@dataclasses.dataclass(frozen=True)
class CheckpointEpisode:
    """One episode: a checkpoint (``None``: the reference, LARA) on a preset with a seed."""

    preset: str
    checkpoint: str | None
    seed: int


def _run(spec: CheckpointEpisode) -> dict[str, Any]:
    import core_env
    from mara_agents.policy import make_policy, run_episode

    base = core_env.parallel_env(preset=spec.preset)
    if spec.checkpoint is None:
        env, policy = make_policy(REFERENCE, base)
    else:
        # "a.pt,b.pt" is an ensemble; one file is a list of one, decoded as that file alone
        env, policy = make_policy("mara", base, checkpoint=spec.checkpoint.split(","))
    stats = run_episode(env, policy, spec.seed)
    return {"completion_rate": float(stats["completion_rate"]), "groups": stats["groups"]}


def run(checkpoints: Sequence[str | Path], preset: str = "CoRE-v0", seeds: int = 48,
        seed_offset: int = 100, workers: int = 2, progress: bool = False) -> dict[str, Any]:
    """Completion rates of each checkpoint and of LARA on seeds
    ``seed_offset .. seed_offset + seeds - 1`` (see the module docstring).

    Raises:
        ValueError: no checkpoints, a checkpoint that does not load, seeds < 1 or
            workers < 1.
    """
    check_int("seeds", seeds, 1)
    check_int("workers", workers, 1)
    return _compare(check_checkpoints(checkpoints), preset, seeds, seed_offset, workers,
                    progress)


def check_checkpoints(checkpoints: Sequence[str | Path]) -> list[str]:
    """The checkpoint entries as strings, every file of each loaded once (a clear error here,
    not in a worker).

    Raises:
        ValueError: no checkpoints, or one that does not load.
    """
    from mara_agents.mat.checkpoint import load_checkpoint

    if not checkpoints:
        raise ValueError("checkpoints: expected at least one checkpoint file")
    names = [str(c) for c in checkpoints]
    for name in names:
        for member in name.split(","):
            load_checkpoint(member)
    return names


def _compare(names: list[str], preset: str, seeds: int, seed_offset: int, workers: int,
             progress: bool) -> dict[str, Any]:
    """:func:`run` on checked arguments."""
    cols: list[str | None] = [*names, None]
    specs = [CheckpointEpisode(preset, c, s) for c in cols
             for s in range(seed_offset, seed_offset + seeds)]
    episodes = map_pinned(_run, specs, workers, progress="checkpoints" if progress else None)
    table = np.asarray([e["completion_rate"] for e in episodes]).reshape(len(cols), seeds) * 100
    rows = []
    for i, (name, r) in enumerate(zip(names, table, strict=False)):
        rows.append({"checkpoint": name, "completion": mean_ci(r),
                     "vs_first": mean_ci(r - table[0]), "vs_lara": mean_ci(r - table[-1]),
                     **audit_row(episodes[i * seeds:(i + 1) * seeds])})
    return {"preset": preset, "seeds": [seed_offset, seed_offset + seeds - 1],
            "lara": mean_ci(table[-1]), "lara_audit": audit_row(episodes[-seeds:]),
            "rows": rows,
            "per_seed": {c or REFERENCE: t.tolist() for c, t in zip(cols, table, strict=False)}}


def _fmt(ci: tuple[float, float, float], sign: bool = True) -> str:
    m, lo, hi = ci
    f = "{:+.2f}" if sign else "{:.2f}"
    return f"{f.format(m)} ({f.format(lo)}, {f.format(hi)})"


def format_table(res: dict[str, Any]) -> str:
    lo, hi = res["seeds"]
    return markdown_table(
        ["checkpoint", "completion %", "- first, paired", "- LARA, paired", "worst group",
         "largest gap"],
        [[row["checkpoint"], _fmt(row["completion"], sign=False), _fmt(row["vs_first"]),
          _fmt(row["vs_lara"]), *audit_cells(row)] for row in res["rows"]]
        + [["LARA", _fmt(res["lara"], sign=False), "-", "-",
            *audit_cells(res.get("lara_audit", {}))]],
        title=(f"Greedy MARA checkpoints on {res['preset']}, seeds {lo}-{hi} (LARA "
               f"{_fmt(res['lara'], sign=False)}%)"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoints", nargs="+", help="MARA checkpoint files (a.pt,b.pt: an "
                        "ensemble); the first is the reference of the paired differences")
    add_presets(parser, ["CoRE-v0"], one=True)
    add_seeds(parser, seeds=48, seed_offset=100)
    add_workers(parser, help="local processes")
    add_out(parser, None, "write the result as JSON here")


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench checkpoints``: argparse checked the numbers; the files are loaded here,
    once, before anything runs."""
    res = _compare(check_checkpoints(args.checkpoints), args.presets[0], args.seeds,
                   args.seed_offset, args.workers, progress=True)
    print(format_table(res))
    write_json(args.out, res)
    return 0


COMMAND = Command("checkpoints", "MARA checkpoints (and LARA) on the same seeds",
                  add_arguments, run_command)
