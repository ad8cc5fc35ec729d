"""Following the task in each visible slot across slots (:class:`SlotTracker`)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SlotTracker"]


class SlotTracker:
    """Follows the task in each visible slot: its observations, the service it received and
    its observed loss history.

    A slot's task is identified by its decoded (arrival, deadline, cap, alpha); when that
    changes, or the slot empties, or the cumulative work goes down, everything about the
    slot restarts. A task that trained last slot and is still visible has ``nodes_last > 0``
    (the env zeroes the column when it admits a new task into a slot): that is one
    observation, at (work, log gap) of the current view.

    Attributes:
        count: int64[K] observations of each slot's task (0 for empty slots).
        same_task: bool[K] whether the slot holds the same task as at the previous update.
        attained: float64[K] node-slots the task has received (the sum of ``nodes_last``
            over its observations: Tiresias's two-dimensional attained service).
        waiting: int64[K] slots since the task last trained (since it became visible if it
            never has).

    Args:
        n_slots: K.
        history: also keep every task's (work, log gap) observations (:meth:`history`; the
            policies that fit loss curves ask for it).
    """

    def __init__(self, n_slots: int, history: bool = False) -> None:
        self.n_slots = n_slots
        self.record = bool(history)
        self.reset()

    def reset(self) -> None:
        """Forget everything (call at the start of an episode)."""
        k = self.n_slots
        self.count = np.zeros(k, dtype=np.int64)
        self.same_task = np.zeros(k, dtype=bool)
        self.attained = np.zeros(k)
        self.waiting = np.zeros(k, dtype=np.int64)
        self._key = np.full((k, 4), np.nan)
        self._work = np.zeros(k)
        self._t = -1
        self._hist: list[list[tuple[float, float]]] = [[] for _ in range(k)]

    def update(self, view: Any) -> np.ndarray:
        """Update from a new view (a :class:`~mara_agents.baselines.common.ClusterView`);
        returns int64[K] observations per slot.

        Calling it twice on the same slot is harmless (the second call changes nothing).
        """
        if view.t == self._t:
            return self.count
        key = np.stack([view.arrival, view.deadline, view.cap, view.alpha], axis=1
                       ).astype(np.float64)
        same = view.present & np.all(key == self._key, axis=1) & (view.work >= self._work - 1e-6)
        self.same_task = same
        trained = view.present & (view.nodes_last > 0)
        self.count = np.where(same, self.count, 0) + trained.astype(np.int64)
        self.attained = np.where(same, self.attained, 0.0) + np.where(trained, view.nodes_last,
                                                                      0)
        self.waiting = np.where(trained | ~view.present, 0,
                                np.where(same, self.waiting, 0) + 1)
        if self.record:
            for j in np.flatnonzero(~same | trained):
                if not same[j]:
                    self._hist[j] = []
                if trained[j]:
                    self._hist[j].append((float(view.work[j]), float(view.log_gap[j])))
        self._key = np.where(view.present[:, None], key, np.nan)
        self._work = view.work.copy()
        self._t = view.t
        return self.count

    def history(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """(work, log gap) float64[n] of the n observations of the task in ``slot``: its
        cumulative work and ln(observed loss / target) after each slot it trained.

        Raises:
            ValueError: the tracker was made without ``history=True``.
        """
        if not self.record:
            raise ValueError("history: this SlotTracker keeps no history; make it with "
                             "SlotTracker(n_slots, history=True)")
        h = self._hist[slot]
        if not h:
            return np.zeros(0), np.zeros(0)
        arr = np.asarray(h, dtype=np.float64)
        return arr[:, 0].copy(), arr[:, 1].copy()
