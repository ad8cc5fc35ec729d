"""MARA's model inputs (:class:`~mara_agents.mat.model.Inputs`) from observations: the
PettingZoo env's observation dicts stacked into arrays, or the batched simulator's arrays
with the forecast cache's columns appended; and stacking and indexing batches of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from core_env.layout import Layout
from mara_agents.mat.model import Inputs


def split_observations(obs: np.ndarray, mask: np.ndarray, layout: Layout) -> Inputs:
    """Tensors of :class:`Inputs` from flat observations.

    Args:
        obs: float32[B, N, D] every node's observation (``layout.size == D``).
        mask: int8/bool[B, N, K+1] action masks.
        layout: the observation layout (with forecast columns for MARA).
    """
    obs = np.asarray(obs, dtype=np.float32)
    if obs.ndim != 3 or obs.shape[-1] != layout.size:
        raise ValueError(f"obs: expected shape [B, N, {layout.size}] for this layout, got "
                         f"{obs.shape}")
    if layout.node_rows != 1:
        raise ValueError(f"layout: expected a per-agent observation layout (one node row), "
                         f"got {layout.node_rows} node rows")
    # the wrapped layout's task table already holds the forecast columns
    return inputs_from_batched(obs, mask, layout, None)


def inputs_from_batched(obs: np.ndarray, mask: np.ndarray, layout: Layout,
                        extra: np.ndarray | None) -> Inputs:
    """:class:`Inputs` straight from the batched simulator's observations.

    Args:
        obs: float32[B, N, D] observations of ``core_env.make_batched`` (``layout``: its
            plain layout, without forecast columns).
        mask: int8[B, N, K+1].
        layout: the plain observation layout.
        extra: float32[B, K, E] columns to append to every task row (the forecast columns of
            :class:`~core_env.forecast.cache.ForecastCache`), or None.

    Gives exactly what :func:`split_observations` gives on the same observations wrapped by
    ``LossForecastWrapper`` (tested).
    """
    first = obs[:, 0]
    tasks = layout.task_table(first)
    if extra is not None:
        tasks = np.concatenate([tasks, extra.astype(np.float32)], axis=-1)
    nodes = obs[:, :, layout.node_block]
    cap = np.rint(first[:, layout.task_columns("cap")] * layout.n_nodes)
    speed = nodes[:, :, [f.name for f in layout.node_features].index("speed")]
    return Inputs(torch.from_numpy(np.ascontiguousarray(first[:, : layout.global_size])),
                  torch.from_numpy(np.ascontiguousarray(nodes)),
                  torch.from_numpy(np.ascontiguousarray(tasks)),
                  torch.from_numpy(np.asarray(mask) > 0),
                  torch.from_numpy(cap.astype(np.float32)),
                  torch.from_numpy(np.ascontiguousarray(speed)))


def select_inputs(x: Inputs, columns: Any) -> Inputs:
    """``x`` with only the feature columns a checkpoint reads (an
    :class:`~mara_agents.mat.checkpoint.InputColumns`; None: ``x`` itself)."""
    if columns is None:
        return x
    g, n, t = (torch.from_numpy(c) for c in columns)
    return x._replace(glob=x.glob[..., g], nodes=x.nodes[..., n], tasks=x.tasks[..., t])


def stack_inputs(items: Sequence[Inputs]) -> Inputs:
    """Concatenate per-step inputs along the batch axis ([T * B, ...] tensors)."""
    return Inputs(*(torch.cat([getattr(x, f) for x in items], dim=0) for f in Inputs._fields))


def index_inputs(x: Inputs, idx: torch.Tensor) -> Inputs:
    """The rows ``idx`` of every tensor of ``x``."""
    return Inputs(*(t[idx] for t in x))
