"""Observations, masks and the global state, computed from a :class:`BatchState`.

The task table ``[B, K, F]`` is built once per step for the whole batch and broadcast into
every node's observation; only the node block differs between nodes. Outputs are written
into buffers allocated once.
"""

from __future__ import annotations


import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import WORK_MAX
from core_env.layout import Layout, observation_layout, state_layout
from core_env.dynamics import queue_window
from core_env.state import NEVER, BatchState

_LOG_WORK_NORM = 1.0 / float(pmath.log1p(WORK_MAX))


def full_rate(s: BatchState) -> np.ndarray:
    """float64[B, K] work per slot of each visible task at full parallelism and mean node
    speed, ``min(p_j, N)**alpha_j * mean_speed`` (portable math; 0 for empty slots)."""
    return np.where(s.slot_task >= 0, s.slot_rate, 0.0)


class Observer:
    """Writes observations ``[B, N, D]``, masks ``[B, N, K+1]`` and states for a batch.

    Args:
        cfg: the environment configuration.
        batch_size: B.
    """

    def __init__(self, cfg: CoreConfig, batch_size: int) -> None:
        c = cfg.cluster
        self.n, self.k = c.n_nodes, c.max_visible_tasks
        self.obs_layout: Layout = observation_layout(self.n, self.k)
        self.state_layout: Layout = state_layout(self.n, self.k)
        self.max_window = np.float32(cfg.workload.window[1])
        self.max_steps = np.float32(cfg.max_steps)
        self.arrival_slots = cfg.workload.arrival_slots
        self.max_speed = np.float32(c.max_speed)
        b, lay = batch_size, self.obs_layout
        self.obs = np.zeros((b, self.n, lay.size), dtype=np.float32)
        self.mask = np.zeros((b, self.n, self.k + 1), dtype=np.int8)
        self.table = np.zeros((b, self.k, lay.task_size), dtype=np.float32)
        self.globals = np.zeros((b, lay.global_size), dtype=np.float32)
        self.nodes = np.zeros((b, self.n, lay.node_size), dtype=np.float32)
        self.node_index = np.float32(np.arange(self.n) / max(self.n - 1, 1))
        self._col = {f.name: i for i, f in enumerate(lay.task_features)}

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
            self.globals[:, j] = glob[f.name]
        node = {
            "speed": s.speed / self.max_speed,
            "node_index": self.node_index,
            "idle_last": s.last_task < 0,
            "last_slot": (s.last_slot + 1) * f32(1.0 / k),
        }
        for j, f in enumerate(self.obs_layout.node_features):
            self.nodes[:, :, j] = node[f.name]

    def observe(self, s: BatchState) -> tuple[np.ndarray, np.ndarray]:
        """Observations float32[B, N, D] and masks int8[B, N, K+1] (internal buffers)."""
        self._compute_tables(s)
        lay, b = self.obs_layout, s.batch_size
        obs = self.obs
        obs[:, :, : lay.global_size] = self.globals[:, None, :]
        obs[:, :, lay.node_block] = self.nodes
        obs[:, :, lay.task_block] = self.table.reshape(b, 1, -1)
        self.mask[:, :, 0] = 1
        self.mask[:, :, 1:] = (s.slot_task >= 0)[:, None, :]
        return obs, self.mask

    def state(self, row: int) -> np.ndarray:
        """Global state float32[S] of environment ``row`` (call :meth:`observe` first)."""
        return np.concatenate([self.globals[row], self.nodes[row].ravel(),
                               self.table[row].ravel()])
