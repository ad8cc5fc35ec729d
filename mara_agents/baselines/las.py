"""Tiresias's discretised two-dimensional least-attained-service scheduler (Gu et al., NSDI
2019), on discrete nodes with caps.

Tiresias schedules deep-learning jobs without any knowledge of their duration: a job's
*attained service* is the GPU time it has received in two dimensions (GPUs x time), and jobs
with less attained service go first (2D-LAS). To avoid the switching of continuous LAS it
is discretised into K priority queues Q_1..Q_K with thresholds: a job in Q_i whose attained
service exceeds the queue's threshold is demoted to Q_{i+1}; queues are served in priority
order and each queue first come, first served; a job that has waited longer than
``STARVELIMIT`` times its executed time is promoted back to Q_1 (the starvation knob). Its
paper argues against relying on loss-curve prediction, so this is the control for "is
prediction worth it?": it reads no forecasts and no losses.

Here attained service is node-slots (the sum over slots of the nodes a task trained on),
counted from the observations by :class:`~mara_agents.baselines.common.SlotTracker`. Every
slot (:class:`LASPolicy`):

1. **Queues.** Thresholds ``threshold * growth**i``, i = 0..queues-2, in node-slots; a task
   with attained service s is in the queue of the number of thresholds <= s (0 = highest).
2. **Starvation** (Tiresias's PROMOTEKNOB). A task that has waited, since it last
   trained, at least ``starve_limit`` times the slots it has trained is promoted to the
   highest queue, and both clocks restart (its attained service counts from 0 again, so it
   is not demoted right away); ``starve_limit=0`` (the default of Tiresias's own
   ``dlas-gpu`` runs) turns it off.
3. **Allocation.** Queues in priority order, first come first served inside a queue, each
   task up to its cap until the nodes run out. Tiresias gangs a job's GPUs (all or none);
   here a task runs on fewer nodes than its cap, so the last task served may get a part.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core_env import pmath
from core_env.utils.checks import check_int
from mara_agents.baselines.common import CentralPolicy, ClusterView, SlotTracker, fill_by_priority

__all__ = ["LASPolicy", "las_queue"]


def las_queue(attained: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """int64[...] the queue (0 = highest priority) of each attained service: the number of
    ``thresholds`` (increasing) at or below it."""
    return np.searchsorted(np.asarray(thresholds, dtype=np.float64),
                           np.asarray(attained, dtype=np.float64), side="right").astype(np.int64)


class LASPolicy(CentralPolicy):
    """Discretised 2D-LAS (see the module docstring).

    Args:
        env: the environment (it reads no forecast columns).
        queues: number of priority queues (>= 1; 1 is first come, first served).
        threshold: attained service (node-slots) that demotes a task from the first queue.
        growth: each further threshold is ``growth`` times the previous one (>= 1).
        starve_limit: promote a task to the first queue once it has waited this many times
            the slots it has trained (>= 0; 0: never).
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).

    Attributes:
        queue: int64[K] each visible task's queue after the latest slot.
    """

    name = "las"

    def __init__(self, env: Any, queues: int = 3, threshold: float = 16.0, growth: float = 4.0,
                 starve_limit: float = 0.0, stickiness: float = 0.0) -> None:
        super().__init__(env, stickiness)
        check_int("queues", queues, 1, exact=True)
        for name, v, lo in (("threshold", threshold, 0.0), ("growth", growth, 1.0),
                            ("starve_limit", starve_limit, 0.0)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= lo):
                raise ValueError(f"{name}: expected a finite number >= {lo}, got {v!r}")
        if threshold <= 0 and queues > 1:
            raise ValueError(f"threshold: expected a number > 0, got {threshold!r}")
        self.thresholds = float(threshold) * pmath.pow(float(growth), np.arange(queues - 1.0))
        self.starve_limit = float(starve_limit)
        self.tracker = SlotTracker(self.decoder.layout.n_slots)
        self.queue = np.zeros(self.decoder.layout.n_slots, dtype=np.int64)

    def reset_state(self) -> None:
        k = self.decoder.layout.n_slots
        self.tracker.reset()
        self.queue = np.zeros(k, dtype=np.int64)
        self._base_service = np.zeros(k)  # attained service at the last promotion
        self._base_runs = np.zeros(k, dtype=np.int64)  # slots run at the last promotion

    def decide(self, view: ClusterView) -> np.ndarray:
        tr = self.tracker
        tr.update(view)
        fresh = ~tr.same_task
        self._base_service[fresh] = 0.0
        self._base_runs[fresh] = 0
        service = tr.attained - self._base_service
        if self.starve_limit > 0:
            executed = tr.count - self._base_runs
            starved = view.present & (executed > 0) & (tr.waiting >= self.starve_limit
                                                        * executed)
            # Tiresias resets both clocks, so a promoted task is not demoted right away
            self._base_service = np.where(starved, tr.attained, self._base_service)
            self._base_runs = np.where(starved, tr.count, self._base_runs)
            service = np.where(starved, 0.0, service)
        queue = las_queue(service, self.thresholds)
        self.queue = np.where(view.present, queue, 0)
        slots = np.flatnonzero(view.present)
        order = slots[np.lexsort((slots, view.arrival[slots], queue[slots]))]
        counts = fill_by_priority(order, view.cap, view.n_nodes)
        return self.place(view, counts)
