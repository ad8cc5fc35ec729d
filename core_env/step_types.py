"""What a dynamics step is given and gives back: its parameters and backends, the loss hook's
types (live mode), the step's result and an episode's statistics. :mod:`core_env.dynamics`
runs the step (and re-exports these names)::

    p = StepParams.from_config(make_config("CoRE-Small-v0"))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.state import BatchState

BACKENDS = ("numba", "numpy")
"""Implementations of :func:`core_env.dynamics.step`, :func:`core_env.dynamics.arrive` and the
observations: ``"numba"``, the compiled kernels of :mod:`core_env._dynamics_numba` (the default
when numba is installed: the ``fast`` extra), and ``"numpy"``, the vectorised code of
:mod:`core_env.dynamics` (the reference). Both give the same bits;
``tests/core_env/test_dynamics_numba.py`` checks it."""


def default_backend() -> str:
    """``"numba"`` if the compiled math of :mod:`core_env.pmath` is in use (numba installed
    and ``CORE_ENV_PMATH`` not set to ``numpy``), else ``"numpy"``."""
    return "numba" if pmath.BACKEND == "numba" else "numpy"


def check_backend(backend: str | None) -> str:
    """``backend`` checked (``None`` = :func:`default_backend`)."""
    if backend is None:
        return default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS} or None, got {backend!r}")
    if backend == "numba" and pmath.BACKEND != "numba":
        raise ValueError("backend: 'numba' needs numba (pip install 'core-env[fast]') and "
                         "CORE_ENV_PMATH not set to 'numpy'")
    return backend


@dataclass(frozen=True)
class StepParams:
    """Constants of the dynamics, derived once from a :class:`CoreConfig`."""

    n_nodes: int
    n_slots: int
    beta: float
    arrival_slots: int
    max_steps: int
    backend: str = "numpy"

    @classmethod
    def from_config(cls, cfg: CoreConfig, backend: str | None = None) -> StepParams:
        return cls(n_nodes=cfg.cluster.n_nodes, n_slots=cfg.cluster.max_visible_tasks,
                   beta=cfg.reward.shaping_beta,
                   arrival_slots=cfg.workload.arrival_slots, max_steps=cfg.max_steps,
                   backend=check_backend(backend))


OBSERVED, LOST, FAILED = 0, 1, 2
"""Outcomes a ``loss_hook`` reports per trained task: the loss was observed; the slot's work
was lost (e.g. its worker died: no progress, no observation, the task stays); the task
failed (its job raised or diverged: it leaves its slot and counts as expired)."""


class TrainedSlots(NamedTuple):
    """The tasks that train this step, as a ``loss_hook`` of :func:`core_env.dynamics.step`
    receives them (one entry per trained task, in the order of the flat [B, K] slot index)."""

    rows: np.ndarray  # int64[T], environment of each task
    slots: np.ndarray  # int64[T], its visible slot
    tasks: np.ndarray  # int64[T], its task-table row
    nodes: np.ndarray  # int64[T], how many nodes train it
    work: np.ndarray  # float32[T], its cumulative work after this step (the model's)
    actions: np.ndarray  # int64[B, N], the joint action after steps 1-2 (0 = idle)


LossHook = Callable[[TrainedSlots],
                    "tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]"]
"""A ``loss_hook`` of :func:`core_env.dynamics.step`: ``(log_loss, outcome)`` or
``(log_loss, outcome, work)`` for the :class:`TrainedSlots`."""


class StepResult(NamedTuple):
    """What one step returns for each environment of the batch."""

    reward: np.ndarray  # float64[B], team reward r_t
    successes: np.ndarray  # int64[B], C_t
    terminated: np.ndarray  # bool[B]
    truncated: np.ndarray  # bool[B]


EPISODE_KEYS = ("arrived", "completed", "expired", "completion_rate", "utilization",
                "illegal_actions", "capacity_conflicts", "switches", "restores", "length",
                "return")
"""The keys of an episode's statistics (``info["episode"]``, docs/env.md), in order."""


def episode_stats(s: BatchState, row: int) -> dict[str, float | int]:
    """Statistics of environment ``row``'s episode so far (SPEC: ``info["episode"]``)."""
    arrived = int(s.arrived[row])
    steps = int(s.t[row])
    n = s.speed.shape[1]
    return {
        "arrived": arrived,
        "completed": int(s.completed[row]),
        "expired": int(s.expired[row]),
        "completion_rate": float(s.completed[row]) / max(arrived, 1),
        "utilization": float(s.busy[row]) / max(steps * n, 1),
        "illegal_actions": int(s.illegal[row]),
        "capacity_conflicts": int(s.conflicts[row]),
        "switches": int(s.switches[row]),
        "restores": int(s.restores[row]),
        "length": steps,
        "return": float(s.ep_return[row]),
    }
