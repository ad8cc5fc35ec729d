"""What the curve generators (``rl_curves``, ``vision_curves``) share: training a spec list,
their raw curve files and their command line; :mod:`tools.data.prepare` turns the raw
curves into the shipped banks::

    python -m tools.data.rl_curves --out /tmp/banks_raw/sb3-rl.npz --limit 2
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> str:
    """Write a compressed npz atomically; returns its sha256."""
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def save_raw(path: Path, curves: list[dict[str, Any]]) -> None:
    """Write generated curves (dicts with group, label, work, loss) as a ragged npz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_npz(path, {"work": np.concatenate([np.asarray(c["work"], float) for c in curves]),
                     "loss": np.concatenate([np.asarray(c["loss"], float) for c in curves]),
                     "offsets": np.r_[0, np.cumsum([len(c["work"]) for c in curves])],
                     "groups": np.array([str(c["group"]) for c in curves]),
                     "labels": np.array([str(c["label"]) for c in curves])})


def load_raw(path: Path) -> list[dict[str, Any]]:
    """The curves :func:`save_raw` wrote."""
    with np.load(path, allow_pickle=False) as z:
        off = z["offsets"]
        return [{"group": str(g), "label": str(lab), "work": z["work"][off[i]:off[i + 1]],
                 "loss": z["loss"][off[i]:off[i + 1]]}
                for i, (g, lab) in enumerate(zip(z["groups"], z["labels"], strict=False))]


def train_all(specs: Iterable[Any], train_curve: Callable[[Any], dict[str, Any]],
              progress: bool = True) -> list[dict[str, Any]]:
    """``train_curve`` of every spec, in order (dicts with group, label, work, loss); with
    ``progress``, one line per run on stderr (index, seconds, points, losses, label)."""
    specs = tuple(specs)
    curves = []
    for i, spec in enumerate(specs):
        start = time.perf_counter()
        curves.append(train_curve(spec))
        if progress:
            loss = np.asarray(curves[-1]["loss"])
            print(f"[{i + 1}/{len(specs)}] {time.perf_counter() - start:6.1f}s n={loss.size} "
                  f"loss {loss[0]:.3f} -> {loss[-1]:.3f} (min {loss.min():.3f}) "
                  f"{curves[-1]['label']}", file=sys.stderr, flush=True)
    return curves


def generator_main(description: str, specs: Sequence[Any],
                   generate: Callable[..., list[dict[str, Any]]],
                   argv: Sequence[str] | None = None) -> None:
    """The command line of a curve generator module (``rl_curves``, ``vision_curves``):
    generate its runs (or the first ``--limit``) and write them with :func:`save_raw`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True, help=".npz file to write")
    parser.add_argument("--limit", type=int, default=None, help="only the first N specs")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    curves = generate(tuple(specs)[:args.limit], progress=not args.quiet)
    save_raw(args.out, curves)
    print(f"{len(curves)} curves in {time.perf_counter() - start:.1f} s -> {args.out}",
          file=sys.stderr)


