"""MARA checkpoints (format ``"mara-mat/1"``): what they hold, how they are checked, and
the MAT they build.

A checkpoint holds ``mat_config`` (the MAT's sizes), ``layout`` (node and slot counts and
every feature name it was trained on), ``train_config`` (the
:class:`~mara_agents.train.config.PPOConfig` as a dict), ``value_norm`` and ``state_dict``;
a training run's checkpoints also hold its optimiser and generator state and its learning
curve. Files are written and read through :mod:`mara_agents.safe_io` (atomic, with an
integrity record); :func:`load_checkpoint` checks the format on top, and
:func:`model_from_checkpoint` builds the MAT for an environment's layout::

    blob = load_checkpoint(shipped())
    model = model_from_checkpoint(blob, wrapped_layout(env.layout))

The shipped default lives in ``mara_agents/weights`` (:func:`shipped`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from core_env.forecast.wrapper import FORECAST_FEATURES
from core_env.layout import Layout
from mara_agents.mat.model import MAT, MATConfig
from mara_agents.safe_io import load, save

CHECKPOINT_FORMAT = "mara-mat/1"
"""Format tag of MARA checkpoints."""

WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"
"""Where the shipped MARA checkpoint lives."""

DEFAULT_CHECKPOINT = "mara_default.pt"
"""File name of the shipped checkpoint in :data:`WEIGHTS_DIR`."""

CHECKPOINT_SCHEMA = {"mat_config": dict, "layout": dict, "train_config": dict,
                     "value_norm": dict, "state_dict": dict}
"""Entries every MARA checkpoint has, with their types."""


def shipped(name: str = DEFAULT_CHECKPOINT) -> Path:
    """Path of a checkpoint shipped in the package."""
    return WEIGHTS_DIR / name


def wrapped_layout(layout: Layout) -> Layout:
    """The observation layout with the forecast columns (what MARA reads)."""
    return layout.with_task_features(FORECAST_FEATURES)


def layout_record(layout: Layout) -> dict[str, Any]:
    """What a checkpoint must match: node and slot counts and every feature name."""
    return {"n_nodes": layout.n_nodes, "n_slots": layout.n_slots,
            "global": [f.name for f in layout.global_features],
            "node": [f.name for f in layout.node_features],
            "task": [f.name for f in layout.task_features]}


def save_checkpoint(path: str | Path, model: MAT, layout: Layout, train_config: dict[str, Any],
                    value_norm: dict[str, float], extra: dict[str, Any] | None = None) -> None:
    """Write a MARA checkpoint with :func:`save` (atomic, with an integrity record)."""
    save(path, {"format": CHECKPOINT_FORMAT, "mat_config": model.config.to_dict(),
                "layout": layout_record(layout), "train_config": dict(train_config),
                "value_norm": dict(value_norm), "state_dict": model.state_dict(),
                **(extra or {})})


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a MARA checkpoint after checking it: everything :func:`load` checks, then its
    format tag, its entries and their types.

    Raises:
        ValueError: ``"<path>: ..."``, naming what is wrong.
    """
    blob = load(path, "MARA checkpoint")
    if blob.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a MARA checkpoint (expected format "
                         f"{CHECKPOINT_FORMAT!r}, got {blob.get('format')!r})")
    for key, kind in CHECKPOINT_SCHEMA.items():
        if not isinstance(blob.get(key), kind):
            raise ValueError(f"{path}: entry {key!r}: expected a {kind.__name__}, got "
                             f"{type(blob.get(key)).__name__}")
    bad = [k for k, v in blob["state_dict"].items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"{path}: state_dict entries that are not tensors: {bad[:5]}")
    cfg = blob["train_config"]
    if not isinstance(cfg.get("forecaster"), str):
        raise ValueError(f"{path}: train_config has no forecaster name")
    for key in ("fm_steps", "fm_samples"):
        if not (isinstance(cfg.get(key), int) and cfg[key] >= 1):
            raise ValueError(f"{path}: train_config.{key}: expected an integer >= 1, got "
                             f"{cfg.get(key)!r}")
    return blob


SIZES = {"n_nodes": (8, 64), "n_slots": (16, 64)}
"""The cluster sizes (inclusive ranges) a MARA checkpoint runs on besides its own. The MAT
has one token per node and per visible slot, and the features are normalised by the cluster
(node counts by N, slot counts by K), so its weights fit any size; these are the sizes whose
results are reported (docs/baselines.md, "Other cluster sizes"), and the loader refuses the
others."""


BLOCKS = ("global", "node", "task")
"""The feature blocks of a layout record, in the order of :class:`InputColumns`."""


class InputColumns(NamedTuple):
    """Where a checkpoint's features sit in an environment's layout: int64 column indices of
    the global block, the node block and the task rows, in the checkpoint's order."""

    globals: np.ndarray  # int64[G'], into the env's global features
    nodes: np.ndarray  # int64[NF'], into its node features
    tasks: np.ndarray  # int64[F'], into its task features


def input_columns(blob: dict[str, Any], layout: Layout) -> InputColumns | None:
    """The env columns a checkpoint reads, or None when its features are the env's own.

    A checkpoint trained before the environment gained features (e.g. the switching-cost
    features of SPEC §9) runs on it unchanged: it reads the features it knows, by name, and
    ignores the others. Raises ``ValueError`` if it needs a feature the env lacks."""
    want, have = layout_record(layout), blob["layout"]
    if all(want[k] == have.get(k) for k in BLOCKS):
        return None
    cols = []
    for k in BLOCKS:
        names = have.get(k)
        missing = [f for f in names or () if f not in want[k]]
        if not isinstance(names, list) or missing:
            raise ValueError(f"checkpoint: its {k} features {names!r} are not all in the "
                             f"environment's {want[k]!r} (missing {missing})")
        cols.append(np.array([want[k].index(f) for f in names], dtype=np.int64))
    return InputColumns(*cols)


def _read_layout(blob: dict[str, Any], layout: Layout) -> Layout:
    """The layout the checkpoint reads: ``layout`` with only the checkpoint's features, in
    the checkpoint's order (``layout`` itself when they are the same)."""
    cols = input_columns(blob, layout)
    if cols is None:
        return layout
    return dataclasses.replace(
        layout, global_features=tuple(layout.global_features[i] for i in cols.globals),
        node_features=tuple(layout.node_features[i] for i in cols.nodes),
        task_features=tuple(layout.task_features[i] for i in cols.tasks))


def model_from_checkpoint(blob: dict[str, Any], layout: Layout, source: str = "checkpoint"
                          ) -> MAT:
    """Build the MAT of a checkpoint for an environment layout (in eval mode), at the
    checkpoint's own cluster size or one within :data:`SIZES`, on the checkpoint's features
    (all of them in the env; :func:`input_columns` says which env columns feed it).

    Raises:
        ValueError: the checkpoint needs a feature the env lacks, or the cluster size is
            neither its own nor within :data:`SIZES` (the message lists the differences), its
            MAT configuration is not valid, or its weights do not fit it.
    """
    try:
        layout = _read_layout(blob, layout)
    except ValueError as e:
        raise ValueError(f"{source}: trained for a different observation layout ({e})") from e
    want = layout_record(layout)
    have = blob["layout"]
    diff = [k for k in want if want[k] != have.get(k)
            and not (k in SIZES and SIZES[k][0] <= want[k] <= SIZES[k][1])]
    if diff:
        details = "; ".join(f"{k}: checkpoint {have.get(k)!r}, env {want[k]!r}" for k in diff)
        sizes = ", ".join(f"{k} {lo}-{hi}" for k, (lo, hi) in SIZES.items())
        raise ValueError(f"{source}: trained for a different observation layout ({details}; "
                         f"it runs at its own size or at {sizes} with the same features)")
    try:
        model = MAT(MATConfig(**blob["mat_config"]), layout)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{source}: mat_config {blob['mat_config']!r} is not a valid MAT "
                         f"configuration ({e})") from e
    try:
        model.load_state_dict(blob["state_dict"])
    except RuntimeError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        raise ValueError(f"{source}: the weights do not fit mat_config "
                         f"({'; '.join(lines[1:4]) or lines[0]})") from e
    model.eval()
    return model


def widened_model(blob: dict[str, Any], layout: Layout, source: str = "checkpoint") -> MAT:
    """The checkpoint's MAT built for ``layout``, reading every feature of it: the
    features the checkpoint was trained on keep their input weights, the others (features
    the environment gained since, e.g. the tenant columns of SPEC §10) start with zero
    input weights, so the widened model computes exactly what the checkpoint computes until
    it is trained further (``mara-train --init``).

    Raises:
        ValueError: as :func:`model_from_checkpoint`."""
    narrow = model_from_checkpoint(blob, layout, source)
    cols = input_columns(blob, layout)
    if cols is None:
        return narrow
    model = MAT(narrow.config, layout)
    state = narrow.state_dict()
    for name, block in (("task_in.0.weight", cols.tasks), ("node_in.0.weight", cols.nodes)):
        old = state[name]  # [d, F' + G'] over the checkpoint's columns
        width = layout.task_size if name.startswith("task") else layout.node_size
        new = torch.zeros(old.shape[0], width + layout.global_size, dtype=old.dtype)
        new[:, torch.from_numpy(block)] = old[:, :block.size]
        new[:, torch.from_numpy(width + cols.globals)] = old[:, block.size:]
        state[name] = new
    model.load_state_dict(state)
    model.eval()
    return model
