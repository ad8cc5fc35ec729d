"""Heuristic schedulers (SPEC §5): random (naive, and capacity-aware), round-robin, FIFO, EDF,
least laxity, shortest predicted remaining work.

All of them decide centrally from every node's observation (see
:class:`~mara_agents.baselines.common.CentralPolicy`), so all but the naive ``random``
respect the parallelism caps exactly and never pick an empty slot. The priority rules (FIFO, EDF, least laxity, shortest
predicted) serve tasks in their order, each up to its cap, until the nodes run out
(:func:`~mara_agents.baselines.common.fill_by_priority`); node counts are then mapped to
nodes keeping nodes on the task they trained last slot
(:func:`~mara_agents.baselines.common.assign_nodes`). Ties are broken by slot index.

Least laxity and shortest predicted read the forecast columns added by
:class:`core_env.forecast.LossForecastWrapper` (WLS by default, see
:func:`mara_agents.policy.make_policy`). A task with fewer than two observations has no
usable forecast yet (WLS needs two points); both rules treat it optimistically as needing no
more work, so it gets probed instead of starving behind tasks that have forecasts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mara_agents.baselines.common import (
    CentralPolicy,
    ClusterView,
    SlotTracker,
    check_forecast_column,
    fill_by_priority,
)

MIN_FORECAST_OBS = 2
"""Observations a task needs before its WLS forecast means anything (two points)."""


class RandomPolicy(CentralPolicy):
    """Each node uniform over its own action mask, independently of the others: what a loop
    that samples every node's ``action_mask`` does (the README's), and the zero of the
    normalised scores. Nodes may pile onto a task beyond its cap; the env idles the extra
    ones (``capacity_conflicts``). :class:`RandomSequentialPolicy` is the capacity-aware
    one."""

    name = "random"
    places_counts = False

    def decide(self, view: ClusterView) -> np.ndarray:
        assert self.rng is not None, "call reset() first"  # act() does
        return np.array([self.rng.choice(np.flatnonzero(view.masks[i]))
                         for i in range(view.n_nodes)], dtype=np.int64)


class RandomSequentialPolicy(CentralPolicy):
    """Uniform over each node's sequential mask, nodes decoded in index order (called
    ``random`` before the naive :class:`RandomPolicy` took that name).

    Node i draws uniformly among idle and the visible tasks whose cap the nodes before it
    have not used up (:func:`core_env.sequential_mask`), so there is never a capacity
    conflict.
    """

    name = "random_sequential"
    places_counts = False

    def decide(self, view: ClusterView) -> np.ndarray:
        assert self.rng is not None, "call reset() first"  # act() does
        n = view.n_nodes
        actions = np.zeros(n, dtype=np.int64)
        used = np.zeros(np.asarray(view.cap).shape, dtype=np.int64)  # picks so far per slot
        room = np.ones(view.masks.shape[1], dtype=np.int8)
        for i in range(n):  # = sequential_mask(view.masks[i], view.cap, actions[:i])
            room[1:] = used < view.cap
            actions[i] = a = self.rng.choice(np.flatnonzero(view.masks[i] & room))
            if a > 0:
                used[a - 1] += 1
        return actions


class RoundRobinPolicy(CentralPolicy):
    """Equal share: spread the nodes over the visible tasks as evenly as the caps allow.

    Water-filling: every task gets ``min(cap, L)`` nodes for the largest whole level L
    that fits; the r nodes left (fewer than the tasks that can still take one) go one each
    to tasks in cyclic slot order starting after the last slot that got an extra node in
    the previous slot, so the extra nodes rotate. With more tasks than nodes this is plain
    round-robin time sharing.
    """

    name = "round_robin"

    def reset_state(self) -> None:
        self._next = 0  # slot where the rotation resumes

    def decide(self, view: ClusterView) -> np.ndarray:
        k, n = view.n_slots, view.n_nodes
        cap = view.cap
        level = 0
        while level < int(cap.max(initial=0)) and np.minimum(cap, level + 1).sum() <= n:
            level += 1
        counts = np.minimum(cap, level)
        extra = n - int(counts.sum())
        room = np.flatnonzero(counts < cap)  # present tasks that can take one more node
        if extra > 0 and room.size:
            start = self._next % k
            ring = np.concatenate([room[room >= start], room[room < start]])
            chosen = ring[:extra]
            counts[chosen] += 1
            self._next = int(chosen[-1]) + 1
        return self.place(view, counts)


class _PriorityPolicy(CentralPolicy):
    """Serve tasks in the order given by :meth:`priority` (smaller key first), up to caps."""

    def priority(self, view: ClusterView) -> tuple[np.ndarray, ...]:  # pragma: no cover
        """Sort keys, float64[K] each, primary first (smaller is served first; then slot
        index). Empty slots are ignored."""
        raise NotImplementedError

    def order(self, view: ClusterView) -> np.ndarray:
        """int64[M] the visible slots, highest priority first."""
        slots = np.flatnonzero(view.present)
        keys = [np.asarray(key)[slots] for key in self.priority(view)]
        return slots[np.lexsort([slots] + keys[::-1])]

    def decide(self, view: ClusterView) -> np.ndarray:
        order = self.order(view)
        counts = fill_by_priority(order, view.cap, view.n_nodes)
        return self.place(view, counts)


class FIFOPolicy(_PriorityPolicy):
    """First in, first out: the oldest task (largest ``age``, i.e. earliest arrival a_j)
    first, filled to its cap, then the next."""

    name = "fifo"

    def priority(self, view: ClusterView) -> tuple[np.ndarray, ...]:
        return (view.arrival,)


class EDFPolicy(_PriorityPolicy):
    """Earliest deadline first (Liu & Layland 1973): the task with the least time to its
    deadline first, filled to its cap, then the next."""

    name = "edf"

    def priority(self, view: ClusterView) -> tuple[np.ndarray, ...]:
        return (view.time_left,)


class _ForecastPolicy(_PriorityPolicy):
    """A priority rule that reads a forecast column and tracks observation counts.

    Args:
        env: the forecast-wrapped environment.
        column: which forecast column to read (default the median, ``fc_q50``).
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).
    """

    needs_forecast = True

    def __init__(self, env: Any, column: str = "fc_q50", stickiness: float = 0.0) -> None:
        super().__init__(env, stickiness)
        self.column = check_forecast_column(column)
        self.tracker = SlotTracker(self.decoder.layout.n_slots)

    def reset_state(self) -> None:
        self.tracker.reset()

    def predicted(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray]:
        """(remaining work, known): float64[K] forecast remaining work, 0 where the task has
        fewer than two observations (no forecast yet); bool[K] whether it is a forecast."""
        count = self.tracker.update(view)
        remaining, _ = self.decoder.remaining(view, self.column)
        known = view.present & (count >= MIN_FORECAST_OBS)
        return np.where(known, remaining, 0.0), known


class LeastLaxityPolicy(_ForecastPolicy):
    """Least laxity first: laxity = time left - predicted remaining work / the task's
    largest rate (``cap**alpha * mean speed``), in slots; smallest first.

    Tasks with negative laxity (predicted not to finish even at full cap) go after all the
    others (most hopeful first): classic least-laxity would otherwise spend the cluster on
    tasks it already believes are lost.
    """

    name = "least_laxity"

    def priority(self, view: ClusterView) -> tuple[np.ndarray, ...]:
        remaining, _ = self.predicted(view)
        rate = np.maximum(view.rate(view.cap), 1e-12)
        laxity = view.time_left - remaining / rate
        big = float(view.time_left.max(initial=0)) + 1.0
        return (np.where(laxity >= 0, laxity, big - laxity),)


class ShortestPredictedPolicy(_ForecastPolicy):
    """Shortest predicted remaining work first (node-slots, from the forecast median);
    ties (e.g. tasks without a forecast yet) by earliest deadline."""

    name = "shortest_predicted"

    def priority(self, view: ClusterView) -> tuple[np.ndarray, ...]:
        remaining, _ = self.predicted(view)
        return (remaining, view.time_left)
