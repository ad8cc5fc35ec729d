"""The named layout of the flat observation and of the global state.

An agent's observation is ``[global features | this node's features | K x F task table]``
(the task table is row-major: slot 0's F features, then slot 1's, ...). The global state
for centralised critics is ``[global features | N x node features | K x F task table]``:
the same blocks with every node's row. :class:`Layout` maps
feature names to index ranges so that policies and wrappers never use magic numbers::

    layout = env.layout
    obs[..., layout.index("queue_len")]        # a global feature (int index)
    obs[..., layout.task_columns("cap")]       # int64[K] indices of the cap column
    layout.task_table(obs)                     # view [..., K, F]

Every feature has declared bounds, each feature is computed so that it stays inside them
(clipped or bounded by construction; tested), and the Box spaces are built from them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Feature:
    """One named feature with its bounds and meaning."""

    name: str
    low: float
    high: float
    doc: str


GLOBAL_FEATURES = (
    Feature("time", 0.0, 1.0, "current slot t / max_steps"),
    Feature("arrivals_open", 0.0, 1.0, "1 while t < arrival_slots (more tasks may arrive)"),
    Feature("queue_len", 0.0, 1.0, "queued tasks / (4 K), clipped"),
    Feature("active", 0.0, 1.0, "visible tasks / K"),
    Feature("busy_last", 0.0, 1.0, "nodes that trained last slot / N"),
    Feature("queue_urgency", 0.0, 1.0,
            "min over queued tasks of (deadline - t) / max window; 1 if the queue is empty"),
    Feature("episode_switch_cost", 0.0, 1.0,
            "the episode's restore cost c (fraction of a node-slot; 0 = free switching)"),
)

NODE_FEATURES = (
    Feature("speed", 0.0, 1.0, "this node's speed / the largest possible speed"),
    Feature("node_index", 0.0, 1.0, "i / (N - 1) (0 when N = 1)"),
    Feature("idle_last", 0.0, 1.0, "1 if this node idled last slot"),
    Feature("last_slot", 0.0, 1.0,
            "(slot it trained last slot + 1) / K if that task is still visible, else 0"),
    Feature("held_slot", 0.0, 1.0,
            "(slot of the task whose state it holds, the last it trained + 1) / K if that task "
            "is still visible, else 0 (training it there restores nothing)"),
)

TASK_FEATURES = (
    Feature("present", 0.0, 1.0, "1 if the slot holds a task (all other columns are 0 if not)"),
    Feature("time_to_deadline", 0.0, 1.0, "(deadline - t) / max window, clipped"),
    Feature("age", 0.0, 1.0, "(t - arrival) / max window, clipped (includes time queued)"),
    Feature("critical", 0.0, 1.0,
            "1 if at most a quarter of its window is left (queued-time-critical)"),
    Feature("loss_gap", -1.0, 1.0,
            "ln(observed loss / target) / 4, clipped (0 before the first observation)"),
    Feature("progress", 0.0, 1.0, "log-progress psi towards the target (the shaping term)"),
    Feature("log_work", 0.0, 1.0,
            "ln(1 + cumulative work) / ln(1 + WORK_MAX) (0 = never trained)"),
    Feature("slope", -1.0, 1.0,
            "d ln loss / d ln work over the last 5 observations / 3, clipped (0 if < 2)"),
    Feature("nodes_last", 0.0, 1.0, "nodes that trained it last slot / N"),
    Feature("cap", 0.0, 1.0, "effective parallelism cap min(p, N) / N"),
    Feature("alpha", 0.0, 1.0, "scaling exponent alpha"),
    Feature("reachable_work", 0.0, 1.0,
            "ln(1 + work still deliverable before the deadline at full cap and mean node "
            "speed) / ln(1 + WORK_MAX), clipped (remaining capacity)"),
    Feature("switch_cost", 0.0, 1.0,
            "its restore cost c_j: the share of a node-slot lost by a node that does not hold "
            "its state, once it has trained"),
    Feature("holders", 0.0, 1.0, "nodes holding its state / N"),
    Feature("tenant", 0.0, 1.0, "(its tenant's index + 1) / G (0 without tenants)"),
    Feature("tenant_share", 0.0, 1.0, "its tenant's share (0 without tenants)"),
    Feature("tenant_lag", -1.0, 1.0,
            "the episode's completion rate so far minus its tenant's, over finished tasks "
            "(> 0: its tenant is behind; 0 until one of its tenant's tasks finished)"),
)
"""Task-table columns. The table is the same for every node; what is node-specific (its
speed, which slot it trained last) is in the node block."""


@dataclass(frozen=True)
class Layout:
    """Layout of a flat vector made of a global block, ``node_rows`` node rows and a K-row task
    table.

    Attributes:
        global_features: features of the global block.
        node_features: features of one node row.
        task_features: columns of the task table.
        node_rows: 1 in an agent observation (this node), N in the global state.
        n_slots: K, rows of the task table.
        n_nodes: N (to decode the ``cap`` column into whole nodes).
    """

    global_features: tuple[Feature, ...]
    node_features: tuple[Feature, ...]
    task_features: tuple[Feature, ...]
    node_rows: int
    n_slots: int
    n_nodes: int

    @property
    def global_size(self) -> int:
        return len(self.global_features)

    @property
    def node_size(self) -> int:
        """Features per node row."""
        return len(self.node_features)

    @property
    def task_size(self) -> int:
        """F, columns of the task table."""
        return len(self.task_features)

    @property
    def node_block(self) -> slice:
        start = self.global_size
        return slice(start, start + self.node_rows * self.node_size)

    @property
    def task_block(self) -> slice:
        start = self.node_block.stop
        return slice(start, start + self.n_slots * self.task_size)

    @property
    def size(self) -> int:
        """D, length of the flat vector."""
        return self.task_block.stop

    def _find(self, features: tuple[Feature, ...], name: str) -> int | None:
        for i, f in enumerate(features):
            if f.name == name:
                return i
        return None

    def index(self, name: str) -> int:
        """Flat index of a global feature, or of a node feature of the first node row."""
        i = self._find(self.global_features, name)
        if i is not None:
            return i
        i = self._find(self.node_features, name)
        if i is not None:
            return self.global_size + i
        raise KeyError(f"{name!r} is not a global or node feature; known: "
                       f"{[f.name for f in self.global_features + self.node_features]}")

    def node_columns(self, name: str) -> np.ndarray:
        """int64[node_rows] flat indices of a node feature in every node row."""
        i = self._find(self.node_features, name)
        if i is None:
            raise KeyError(f"{name!r} is not a node feature; known: "
                           f"{[f.name for f in self.node_features]}")
        return self.node_block.start + i + self.node_size * np.arange(self.node_rows)

    def task_column(self, name: str) -> int:
        """Column of a task feature inside the task table."""
        i = self._find(self.task_features, name)
        if i is None:
            raise KeyError(f"{name!r} is not a task feature; known: "
                           f"{[f.name for f in self.task_features]}")
        return i

    def task_columns(self, name: str) -> np.ndarray:
        """int64[K] flat indices of a task feature in every slot."""
        return self.task_block.start + self.task_column(name) + self.task_size * np.arange(
            self.n_slots)

    def task_table(self, x: np.ndarray) -> np.ndarray:
        """View ``x[..., task_block]`` as ``[..., K, F]``."""
        return x[..., self.task_block].reshape(*x.shape[:-1], self.n_slots, self.task_size)

    def capacity(self, x: np.ndarray) -> np.ndarray:
        """int64[..., K] effective parallelism caps decoded from the ``cap`` column."""
        return self.table_capacity(self.task_table(x))

    def table_capacity(self, table: np.ndarray) -> np.ndarray:
        """int64[..., K] the caps of a task table float32[..., K, F] (the one decoding of
        the ``cap`` column: cap x N, rounded)."""
        return np.rint(table[..., self.task_column("cap")] * self.n_nodes).astype(np.int64)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """float32[D] lower and upper bounds, for the Box space."""
        lo = [f.low for f in self.global_features]
        hi = [f.high for f in self.global_features]
        lo += [f.low for f in self.node_features] * self.node_rows
        hi += [f.high for f in self.node_features] * self.node_rows
        lo += [f.low for f in self.task_features] * self.n_slots
        hi += [f.high for f in self.task_features] * self.n_slots
        return np.asarray(lo, dtype=np.float32), np.asarray(hi, dtype=np.float32)

    def with_task_features(self, extra: tuple[Feature, ...]) -> Layout:
        """The layout with ``extra`` columns appended to every task row (for wrappers)."""
        names = {f.name for f in self.task_features}
        clash = [f.name for f in extra if f.name in names]
        if clash:
            raise ValueError(f"task features {clash} already exist in the layout")
        return Layout(self.global_features, self.node_features, self.task_features + extra,
                      self.node_rows, self.n_slots, self.n_nodes)

    def describe(self) -> list[tuple[str, str, str, float, float, str]]:
        """Rows (block, name, indices, low, high, meaning) for documentation tables."""
        rows = []
        for i, f in enumerate(self.global_features):
            rows.append(("global", f.name, str(i), f.low, f.high, f.doc))
        for f in self.node_features:
            idx = self.node_columns(f.name)
            where = str(idx[0]) if self.node_rows == 1 else f"{idx[0]} + {self.node_size}*i"
            rows.append(("node", f.name, where, f.low, f.high, f.doc))
        for j, f in enumerate(self.task_features):
            start = self.task_block.start + j
            rows.append(("task", f.name, f"{start} + {self.task_size}*k", f.low, f.high, f.doc))
        return rows


def observation_layout(n_nodes: int, n_slots: int) -> Layout:
    """Layout of one agent's observation."""
    return Layout(GLOBAL_FEATURES, NODE_FEATURES, TASK_FEATURES, 1, n_slots, n_nodes)


def state_layout(n_nodes: int, n_slots: int) -> Layout:
    """Layout of the global state (global block, all node rows, task table)."""
    return Layout(GLOBAL_FEATURES, NODE_FEATURES, TASK_FEATURES, n_nodes, n_slots, n_nodes)
