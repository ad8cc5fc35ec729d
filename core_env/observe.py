"""Observations, masks and the global state, computed from a :class:`BatchState`.

The task table ``[B, K, F]`` is built once per step for the whole batch and broadcast into
every node's observation; only the node block differs between nodes. Outputs are written
into buffers allocated once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import WORK_MAX
from core_env.dynamics import queue_window
from core_env.layout import Layout, observation_layout, state_layout
from core_env.state import EXPIRED, NEVER, SUCCEEDED, BatchState

_LOG_WORK_NORM = 1.0 / float(pmath.log1p(WORK_MAX))
_KERNEL_TASK = ("present", "time_to_deadline", "age", "critical", "loss_gap", "progress",
                "log_work", "slope", "nodes_last", "cap", "alpha", "reachable_work")
_KERNEL_GLOBAL = ("time", "arrivals_open", "queue_len", "active", "busy_last", "queue_urgency")
_KERNEL_NODE = ("speed", "node_index", "idle_last", "last_slot")


class ObsBlocks(NamedTuple):
    """The blocks every node's observation is made of, for a batch (``observations="blocks"``
    of :class:`core_env.BatchedCoreEnv`): node i's flat observation in environment b is
    ``[globals[b] | nodes[b, i] | tasks[b].ravel()]`` (:func:`assemble`)."""

    globals: np.ndarray  # float32[B, G], the global features
    nodes: np.ndarray  # float32[B, N, NF], each node's own features
    tasks: np.ndarray  # float32[B, K, F], the task table, the same for every node


def assemble(blocks: ObsBlocks) -> np.ndarray:
    """Every node's flat observation float32[B, N, D] from its :class:`ObsBlocks` (the
    ``observations="full"`` array)."""
    g, nodes, tasks = blocks
    b, n, _ = nodes.shape
    return np.concatenate([np.broadcast_to(g[:, None, :], (b, n, g.shape[1])), nodes,
                           np.broadcast_to(tasks.reshape(b, 1, -1), (b, n, tasks[0].size))],
                          axis=2)


def full_rate(s: BatchState) -> np.ndarray:
    """float64[B, K] work per slot of each visible task at full parallelism and mean node
    speed, ``min(p_j, N)**alpha_j * mean_speed`` (portable math; 0 for empty slots)."""
    return np.where(s.slot_task >= 0, s.slot_rate, 0.0)


class Observer:
    """Writes observations ``[B, N, D]``, masks ``[B, N, K+1]`` and states for a batch.

    Args:
        cfg: the environment configuration.
        batch_size: B.
        backend: ``"numpy"`` (this module's code, the reference) or ``"numba"`` (the
            compiled kernel of :mod:`core_env._observe_numba`; the same bits).
    """

    def __init__(self, cfg: CoreConfig, batch_size: int, backend: str = "numpy") -> None:
        self.backend = backend
        c = cfg.cluster
        self.n, self.k = c.n_nodes, c.max_visible_tasks
        self.obs_layout: Layout = observation_layout(self.n, self.k)
        self.state_layout: Layout = state_layout(self.n, self.k)
        self.max_window = np.float32(cfg.workload.window[1])
        self.max_steps = np.float32(cfg.max_steps)
        self.arrival_slots = cfg.workload.arrival_slots
        self.max_speed = np.float32(c.max_speed)
        self.n_tenants = cfg.workload.n_tenants
        self.shares = np.asarray(cfg.workload.tenant_shares, dtype=np.float32)
        b, lay = batch_size, self.obs_layout
        self.obs = np.zeros((b, self.n, lay.size), dtype=np.float32)
        self.mask = np.zeros((b, self.n, self.k + 1), dtype=np.int8)
        self.table = np.zeros((b, self.k, lay.task_size), dtype=np.float32)
        self.globals = np.zeros((b, lay.global_size), dtype=np.float32)
        self.nodes = np.zeros((b, self.n, lay.node_size), dtype=np.float32)
        self.node_index = np.float32(np.arange(self.n) / max(self.n - 1, 1))
        self._col = {f.name: i for i, f in enumerate(lay.task_features)}
        self._gcol = {f.name: i for i, f in enumerate(lay.global_features)}
        self._tenant_cols = np.array([self._col[c] for c in ("tenant", "tenant_share",
                                                              "tenant_lag")], dtype=np.int64)
        self._ncol = {f.name: i for i, f in enumerate(lay.node_features)}
        # the compiled kernel's column of each feature, in its own (fixed) order
        self._kcols = tuple(np.array([names.index(f) for f in order], dtype=np.int64)
                            for names, order in (
                                ([f.name for f in lay.task_features], _KERNEL_TASK),
                                ([f.name for f in lay.global_features], _KERNEL_GLOBAL),
                                ([f.name for f in lay.node_features], _KERNEL_NODE)))

    def _compute_tables(self, s: BatchState) -> None:
        """Fill the global, node and shared task-table buffers, feature by feature name."""
        f32 = np.float32
        n, k, w = self.n, self.k, self.max_window
        tab, col = self.table, self._col
        present = s.slot_task >= 0
        pf = present.astype(f32)
        t = s.t[:, None]
        deadline, arrival = s.slot_deadline, s.slot_arrival
        left = deadline - t
        cap = np.minimum(s.slot_cap, n).astype(f32)
        gap = (s.slot_log_loss - s.slot_log_target) * f32(0.25)
        task = {
            "present": pf,
            "time_to_deadline": np.minimum(left * (1.0 / w), 1.0),
            "age": np.minimum((t - arrival) * (1.0 / w), 1.0),
            "critical": left * 4 <= deadline - arrival,
            "loss_gap": np.minimum(np.maximum(gap, -1.0), 1.0) * (s.slot_n_obs > 0),
            "progress": s.slot_psi,
            "log_work": np.minimum(s.slot_log1p_work * _LOG_WORK_NORM, 1.0),
            "slope": np.minimum(np.maximum(s.slot_slope * f32(1.0 / 3.0), -1.0), 1.0),
            "nodes_last": s.slot_nodes_last * f32(1.0 / n),
            "cap": cap * f32(1.0 / n),
            "alpha": s.slot_alpha,
            "reachable_work": np.minimum(
                pmath.log1p(full_rate(s) * np.maximum(left, 0)) * _LOG_WORK_NORM, 1.0),
        }
        tab.fill(0.0)  # empty slots: +0.0 whatever stale values their arrays hold
        for name, j in col.items():
            if name in task:  # the switching-cost columns: _switch_features
                np.copyto(tab[:, :, j], task[name], casting="same_kind", where=present)

        urgency = np.ones(s.batch_size, dtype=f32)
        rows = np.flatnonzero(s.queued > 0)
        if rows.size:
            idx, queued = queue_window(s, rows)
            dl = np.where(queued, s.w_deadline[rows[:, None], idx], NEVER).min(axis=1)
            urgency[rows] = np.minimum(np.maximum((dl - s.t[rows]) / w, 0.0), 1.0)
        glob = {
            "time": np.minimum(s.t / self.max_steps, 1.0),
            "arrivals_open": s.t < self.arrival_slots,
            "queue_len": np.minimum(s.queued * (0.25 / k), 1.0),
            "active": pf.sum(axis=1) * f32(1.0 / k),
            "busy_last": (s.last_task >= 0).sum(axis=1) * f32(1.0 / n),
            "queue_urgency": urgency,
        }
        for j, f in enumerate(self.obs_layout.global_features):
            if f.name in glob:
                self.globals[:, j] = glob[f.name]
        node = {
            "speed": s.speed / self.max_speed,
            "node_index": self.node_index,
            "idle_last": s.last_task < 0,
            "last_slot": (s.last_slot + 1) * f32(1.0 / k),
        }
        for j, f in enumerate(self.obs_layout.node_features):
            if f.name in node:
                self.nodes[:, :, j] = node[f.name]

    def observe(self, s: BatchState, out: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """Observations float32[B, N, D] and masks int8[B, N, K+1], written into ``out``
        (C-contiguous arrays of those shapes and dtypes) or else into internal buffers that
        the next call overwrites."""
        obs, mask = (self.obs, self.mask) if out is None else out
        self.compute(s)
        lay, b = self.obs_layout, s.batch_size
        obs[:, :, : lay.global_size] = self.globals[:, None, :]
        obs[:, :, lay.node_block] = self.nodes
        obs[:, :, lay.task_block] = self.table.reshape(b, 1, -1)
        self.write_mask(s, mask)
        return obs, mask

    def compute(self, s: BatchState) -> None:
        """Fill the blocks every observation is made of: :attr:`globals` [B, G],
        :attr:`nodes` [B, N, NF] and the shared task table :attr:`table` [B, K, F]."""
        if self.backend == "numba":
            from core_env import _observe_numba
            tcol, gcol, ncol = self._kcols
            w = self.max_window
            _observe_numba.observe(
                s.t, s.queued, s.last_task, s.last_slot, s.speed, s.status, s.w_deadline,
                s.queue_head, s.next_task, s.slot_task, s.slot_arrival, s.slot_deadline,
                s.slot_cap, s.slot_alpha, s.slot_rate, s.slot_log1p_work, s.slot_log_loss,
                s.slot_log_target, s.slot_psi, s.slot_slope, s.slot_n_obs, s.slot_nodes_last,
                tcol, gcol, ncol, 1.0 / w, w, np.float32(1.0 / self.n),
                np.float32(1.0 / self.k), self.max_steps, self.arrival_slots, self.max_speed,
                _LOG_WORK_NORM, self.node_index, self.table, self.globals, self.nodes)
            f32, g = np.float32, self.n_tenants
            _observe_numba.switch_tenant_features(
                s.slot_task, s.held_task, s.held_slot, s.w_switch_cost, s.switch_cost,
                s.w_tenant, s.status, self.shares, g, self._gcol["episode_switch_cost"],
                self._ncol["held_slot"], self._col["switch_cost"], self._col["holders"],
                self._tenant_cols, f32(1.0 / self.k), f32(1.0 / self.n), f32(1.0 / max(g, 1)),
                self.globals, self.nodes, self.table)
        else:
            self._compute_tables(s)
            self._switch_features(s)
            self._tenant_features(s)

    def _switch_features(self, s: BatchState) -> None:
        """The switching-cost features (SPEC §9): the episode's cost, each node's held slot,
        each task's cost and its holders (the numba backend:
        :func:`core_env._observe_numba.switch_tenant_features`)."""
        f32 = np.float32
        rows = np.arange(s.batch_size)[:, None]
        hs = s.held_slot
        held = (hs >= 0) & (s.slot_task[rows, np.maximum(hs, 0)] == s.held_task)
        present = s.slot_task >= 0
        self.globals[:, self._gcol["episode_switch_cost"]] = s.switch_cost
        self.nodes[:, :, self._ncol["held_slot"]] = np.where(held, hs + 1, 0) * f32(1.0 / self.k)
        keys = (rows * self.k + hs)[held]
        holders = np.bincount(keys, minlength=s.batch_size * self.k).reshape(-1, self.k)
        cost = s.w_switch_cost[rows, np.maximum(s.slot_task, 0)]
        self.table[:, :, self._col["switch_cost"]] = np.where(present, cost, f32(0.0))
        self.table[:, :, self._col["holders"]] = holders * f32(1.0 / self.n)

    def _tenant_features(self, s: BatchState) -> None:
        """The tenant columns (SPEC §10): each task's tenant, its share and how far its
        tenant's completion rate so far lags the episode's (the numba backend:
        :func:`core_env._observe_numba.switch_tenant_features`)."""
        cols = list(self._tenant_cols)
        if not self.n_tenants:
            self.table[:, :, cols] = 0.0
            return
        f32, g = np.float32, self.n_tenants
        b = s.batch_size
        rows = np.arange(b)[:, None]
        present = s.slot_task >= 0
        tenant = s.w_tenant[rows, np.maximum(s.slot_task, 0)]
        key = rows * g + s.w_tenant
        won = s.status == SUCCEEDED
        done = won | (s.status == EXPIRED)
        finished = np.bincount(key[done], minlength=b * g).reshape(b, g)
        succeeded = np.bincount(key[won], minlength=b * g).reshape(b, g)
        overall = succeeded.sum(axis=1) / np.maximum(finished.sum(axis=1), 1)
        lag = np.where(finished > 0, overall[:, None] - succeeded / np.maximum(finished, 1),
                       0.0)
        self.table[:, :, cols[0]] = np.where(present, (tenant + 1) * f32(1.0 / g), f32(0.0))
        self.table[:, :, cols[1]] = np.where(present, self.shares[tenant], f32(0.0))
        self.table[:, :, cols[2]] = np.where(present, np.clip(lag[rows, tenant], -1.0, 1.0),
                                             0.0).astype(f32)

    def write_mask(self, s: BatchState, mask: np.ndarray) -> np.ndarray:
        """The masks int8[B, N, K+1] into ``mask``: idle and every occupied slot."""
        if self.backend == "numba" and mask.flags.c_contiguous:
            from core_env import _observe_numba

            _observe_numba.write_mask(s.slot_task, mask)
            return mask
        mask[:, :, 0] = 1
        mask[:, :, 1:] = (s.slot_task >= 0)[:, None, :]
        return mask

    def state(self, row: int) -> np.ndarray:
        """Global state float32[S] of environment ``row`` (call :meth:`observe` first)."""
        return np.concatenate([self.globals[row], self.nodes[row].ravel(),
                               self.table[row].ravel()])
