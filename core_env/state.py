"""The simulator state of a batch of B environments, as arrays.

Shapes: B environments, N nodes, K visible slots, M task-table rows per environment
(``WorkloadConfig.max_tasks``), G curve-grid points, H history length (the longest task
window). One field per quantity; the dynamics (:mod:`core_env.dynamics`) mutate them in
place. A single environment is the case B = 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core_env.config import CoreConfig
from core_env.curves import GRID_SIZE
from core_env.workload import Workload

# Task status codes (``BatchState.status``).
FUTURE, QUEUED, ACTIVE, SUCCEEDED, EXPIRED = 0, 1, 2, 3, 4
NEVER = np.iinfo(np.int64).max // 4
"""Arrival slot of unused task-table rows."""
SLOPE_LAG = 4
"""The recent log-loss slope is taken over the last SLOPE_LAG + 1 observations."""


@dataclass
class BatchState:
    """Mutable arrays of a batch of environments (see the module docstring for shapes)."""

    # --- workload (fixed for an episode) ---
    w_arrival: np.ndarray  # int64[B, M], arrival slot (NEVER for unused rows)
    w_deadline: np.ndarray  # int64[B, M], first slot the task may not train in
    w_log_target: np.ndarray  # float32[B, M], ln eps_j
    w_cap: np.ndarray  # int64[B, M], parallelism cap p_j
    w_alpha: np.ndarray  # float32[B, M], scaling exponent alpha_j
    w_log_loss: np.ndarray  # float32[B, M, G], observed log-loss path
    w_switch_cost: np.ndarray  # float32[B, M], restore cost c_j (fraction of a node-slot)
    w_keep: np.ndarray  # float32[B, M], 1 - c_j: the share of a node-slot a restore keeps
    w_tenant: np.ndarray  # int64[B, M], tenant of each task (0 without tenants)
    switch_cost: np.ndarray  # float32[B], the episode's cost c
    n_tasks: np.ndarray  # int64[B], rows in use
    next_task: np.ndarray  # int64[B], first task row that has not arrived yet
    queue_head: np.ndarray  # int64[B], no queued task has a lower row (a lower bound)
    status: np.ndarray  # int8[B, M], FUTURE / QUEUED / ACTIVE / SUCCEEDED / EXPIRED
    # --- nodes ---
    speed: np.ndarray  # float32[B, N], work per slot of a lone node
    mean_speed: np.ndarray  # float32[B], mean node speed
    last_task: np.ndarray  # int64[B, N], task row trained last slot (-1 = idle)
    last_slot: np.ndarray  # int64[B, N], slot of that task if it is still visible, else -1
    held_task: np.ndarray  # int64[B, N], task row whose state the node holds (last trained)
    held_slot: np.ndarray  # int64[B, N], its slot when last trained (valid while it is there)
    # --- visible slots ---
    slot_task: np.ndarray  # int64[B, K], task row in the slot (-1 = empty)
    slot_arrival: np.ndarray  # int64[B, K], arrival slot a_j
    slot_deadline: np.ndarray  # int64[B, K], deadline d_j
    slot_admitted: np.ndarray  # int64[B, K], slot in which the task became visible
    slot_cap: np.ndarray  # int64[B, K], parallelism cap p_j
    slot_alpha: np.ndarray  # float32[B, K], scaling exponent
    slot_rate: np.ndarray  # float64[B, K], min(p_j, N)**alpha_j * mean speed (full-cap work/slot)
    slot_log_target: np.ndarray  # float32[B, K], ln eps_j
    slot_work: np.ndarray  # float32[B, K], cumulative work s (node-slots)
    slot_log1p_work: np.ndarray  # float64[B, K], ln(1 + s) (kept for the observation)
    slot_log_loss: np.ndarray  # float32[B, K], latest observed ln loss (0 if none)
    slot_first_log_loss: np.ndarray  # float32[B, K], first observed ln loss (0 if none)
    slot_psi: np.ndarray  # float32[B, K], log-progress psi_j in [0, 1]
    slot_slope: np.ndarray  # float32[B, K], d ln loss / d ln work over the last 5 observations
    slot_n_obs: np.ndarray  # int64[B, K], observations so far
    slot_nodes_last: np.ndarray  # int64[B, K], nodes that trained it last slot
    hist_log_work: np.ndarray  # float32[B, K, H], ln cumulative work at each observation
    hist_log_loss: np.ndarray  # float32[B, K, H], observed ln loss at each observation
    ring_log_work: np.ndarray  # float32[B, K, R], the last R = SLOPE_LAG + 1 of hist_log_work
    ring_log_loss: np.ndarray  # float32[B, K, R], observation i is at i % R (cache-friendly)
    # --- per-environment counters ---
    t: np.ndarray  # int64[B], current slot
    arrived: np.ndarray  # int64[B], tasks arrived so far
    queued: np.ndarray  # int64[B], tasks waiting in the queue
    completed: np.ndarray  # int64[B], tasks that succeeded
    expired: np.ndarray  # int64[B], tasks that missed their deadline
    illegal: np.ndarray  # int64[B], masked actions executed as idle
    conflicts: np.ndarray  # int64[B], actions dropped by the parallelism cap
    switches: np.ndarray  # int64[B], node-slots that trained a different task than last slot
    restores: np.ndarray  # int64[B], node-slots that loaded their task's state (paid c_j)
    busy: np.ndarray  # int64[B], node-slots spent training
    phi: np.ndarray  # float64[B], potential Phi(s_t)
    ep_return: np.ndarray  # float64[B], sum of rewards so far

    @property
    def batch_size(self) -> int:
        return int(self.t.shape[0])


def allocate(cfg: CoreConfig, batch_size: int, max_tasks: int | None = None) -> BatchState:
    """Zeroed state for ``batch_size`` environments (call :func:`load_workload` next), with
    ``max_tasks`` task-table rows (``None``: the configuration's ``workload.max_tasks``)."""
    b, n, k = batch_size, cfg.cluster.n_nodes, cfg.cluster.max_visible_tasks
    m, h = max_tasks or cfg.workload.max_tasks, cfg.workload.window[1]

    def z(shape, dtype, fill=0):
        return np.full(shape, fill, dtype=dtype)

    return BatchState(
        w_arrival=z((b, m), np.int64, NEVER), w_deadline=z((b, m), np.int64, NEVER),
        w_log_target=z((b, m), np.float32), w_cap=z((b, m), np.int64, 1),
        w_alpha=z((b, m), np.float32, 1), w_log_loss=z((b, m, GRID_SIZE), np.float32),
        w_switch_cost=z((b, m), np.float32), w_keep=z((b, m), np.float32, 1),
        w_tenant=z((b, m), np.int64),
        switch_cost=z(b, np.float32),
        n_tasks=z(b, np.int64), next_task=z(b, np.int64), queue_head=z(b, np.int64),
        status=z((b, m), np.int8),
        speed=z((b, n), np.float32, 1), mean_speed=z(b, np.float32, 1),
        last_task=z((b, n), np.int64, -1),
        last_slot=z((b, n), np.int64, -1), held_task=z((b, n), np.int64, -1),
        held_slot=z((b, n), np.int64, -1),
        slot_task=z((b, k), np.int64, -1), slot_arrival=z((b, k), np.int64),
        slot_deadline=z((b, k), np.int64), slot_admitted=z((b, k), np.int64),
        slot_cap=z((b, k), np.int64), slot_alpha=z((b, k), np.float32, 1),
        slot_rate=z((b, k), np.float64),
        slot_log_target=z((b, k), np.float32), slot_work=z((b, k), np.float32),
        slot_log1p_work=z((b, k), np.float64),
        slot_log_loss=z((b, k), np.float32), slot_first_log_loss=z((b, k), np.float32),
        slot_psi=z((b, k), np.float32), slot_slope=z((b, k), np.float32),
        slot_n_obs=z((b, k), np.int64),
        slot_nodes_last=z((b, k), np.int64),
        hist_log_work=z((b, k, h), np.float32), hist_log_loss=z((b, k, h), np.float32),
        ring_log_work=z((b, k, SLOPE_LAG + 1), np.float32),
        ring_log_loss=z((b, k, SLOPE_LAG + 1), np.float32),
        t=z(b, np.int64), arrived=z(b, np.int64), queued=z(b, np.int64),
        completed=z(b, np.int64), expired=z(b, np.int64), illegal=z(b, np.int64),
        conflicts=z(b, np.int64), switches=z(b, np.int64), restores=z(b, np.int64),
        busy=z(b, np.int64),
        phi=z(b, np.float64), ep_return=z(b, np.float64),
    )


def load_workload(s: BatchState, row: int, wl: Workload) -> None:
    """Put environment ``row`` at slot 0 of a new episode with workload ``wl``.

    Clears the row's dynamic state; the caller then runs :func:`core_env.dynamics.arrive`
    to queue the slot-0 arrivals and fill the visible slots.
    """
    m = wl.n_tasks
    s.w_arrival[row] = NEVER
    s.w_deadline[row] = NEVER
    s.w_arrival[row, :m] = wl.arrival
    s.w_deadline[row, :m] = wl.deadline
    s.w_log_target[row, :m] = wl.log_target
    s.w_cap[row, :m] = wl.cap
    s.w_alpha[row, :m] = wl.alpha
    s.w_log_loss[row, :m] = wl.log_loss
    costs = np.zeros(m) if wl.switch_cost is None else np.asarray(wl.switch_cost, np.float64)
    s.w_switch_cost[row] = 0
    s.w_switch_cost[row, :m] = costs
    s.w_keep[row] = 1
    s.w_keep[row, :m] = 1.0 - costs
    s.w_tenant[row] = 0
    if wl.tenant is not None:
        s.w_tenant[row, :m] = wl.tenant
    s.switch_cost[row] = wl.episode_switch_cost or 0.0
    s.n_tasks[row] = m
    s.next_task[row] = 0
    s.queue_head[row] = 0
    s.status[row] = FUTURE
    s.speed[row] = wl.speeds
    s.mean_speed[row] = s.speed[row].mean()
    s.last_task[row] = -1
    s.last_slot[row] = -1
    s.held_task[row] = -1
    s.held_slot[row] = -1
    s.slot_task[row] = -1
    for arr in (s.slot_work, s.slot_log_loss, s.slot_first_log_loss, s.slot_psi,
                s.slot_slope, s.slot_n_obs, s.slot_nodes_last, s.slot_rate, s.slot_log1p_work):
        arr[row] = 0
    for arr in (s.t, s.arrived, s.queued, s.completed, s.expired, s.illegal, s.conflicts,
                s.switches, s.restores, s.busy, s.phi, s.ep_return):
        arr[row] = 0
