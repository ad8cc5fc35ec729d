"""SLAQ (Zhang, Stafman, Or and Freedman, SoCC 2017): quality-driven scheduling, on discrete
nodes with caps.

SLAQ schedules concurrent training jobs to maximise the total improvement in model quality
rather than to meet deadlines. For each job it fits the loss history online (for
sublinearly converging algorithms ``l(k) = 1 / (a2 k**2 + a1 k + a0) + d``, weighting recent
iterations more), predicts how much the loss would drop in the next scheduling interval with
a given allocation, and normalises that drop by the largest drop the job has shown so far,
so jobs with losses on different scales compare. Allocation starts from the minimal
resources and repeatedly gives one more unit to the job with the largest predicted
*marginal* normalised loss reduction.

Here (:class:`SLAQPolicy`), every slot:

1. **Fit.** For each task with at least ``min_points`` observations, fit the curve to
   (work, loss / target) with weights ``decay**(n - i)`` on the i-th of n points
   (:func:`~mara_agents.baselines.curvefit.fit_inverse_curve`, degree 2; refitted only on a
   new observation).
2. **Predicted reduction.** With x nodes the task gains ``x**alpha * mean speed`` work in the
   slot, so its normalised reduction is ``(l(w) - l(w + x**alpha v)) / dl_max``, ``dl_max``
   its largest observed one-slot loss drop (the reduction's own scale if it has none yet).
   A task without a fit counts as 1 for its first node and 0 for more (new jobs get the
   minimal allocation until SLAQ can predict them).
3. **Allocation.** One node at a time to the largest marginal normalised reduction, up to
   the caps, first come first served on ties, until every node is placed or every task is
   at its cap (SLAQ allocates all its resources). Deadlines are not used: SLAQ is the
   quality-driven control.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core_env import pmath
from core_env.utils.checks import check_int
from mara_agents.baselines.common import CentralPolicy, ClusterView, SlotTracker
from mara_agents.baselines.curvefit import InverseCurve, fit_inverse_curve

__all__ = ["SLAQPolicy", "greedy_by_table"]


def greedy_by_table(value: np.ndarray, caps: np.ndarray, total: int, order: np.ndarray
                    ) -> np.ndarray:
    """One node at a time to the largest marginal value ``value[j, x + 1] - value[j, x]``.

    Args:
        value: float[K, C + 1] value of giving task j x nodes (``value[:, 0]`` = 0).
        caps: int[K] caps (<= C). total: nodes to place.
        order: int[M] tasks that may get nodes, first come first (the tie-break).

    Returns:
        int64[K] node counts: every node is placed unless every task is at its cap.
    """
    caps = np.asarray(caps, dtype=np.int64)
    counts = np.zeros(caps.shape[0], dtype=np.int64)
    order = np.asarray([int(j) for j in order if caps[j] > 0], dtype=np.int64)
    x = np.zeros(order.size, dtype=np.int64)
    c = caps[order]
    for _ in range(int(total)):
        room = x < c
        if not room.any():
            break
        nxt = np.minimum(x + 1, c)
        gain = np.where(room, value[order, nxt] - value[order, x], -np.inf)
        x[int(np.argmax(gain))] += 1
    counts[order] = x
    return counts


class SLAQPolicy(CentralPolicy):
    """SLAQ (see the module docstring).

    Args:
        env: the environment (it reads the observed loss gap and work).
        min_points: observations before a task's curve is fitted (>= 3).
        decay: weight ratio between consecutive points of the fit, in (0, 1] (1: equal).
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).
    """

    name = "slaq"

    def __init__(self, env: Any, min_points: int = 3, decay: float = 0.9,
                 stickiness: float = 0.0) -> None:
        super().__init__(env, stickiness)
        check_int("min_points", min_points, 3, exact=True)
        if not (isinstance(decay, (int, float)) and math.isfinite(decay) and 0 < decay <= 1):
            raise ValueError(f"decay: expected a number in (0, 1], got {decay!r}")
        self.min_points, self.decay = min_points, float(decay)
        self.tracker = SlotTracker(self.decoder.layout.n_slots, history=True)

    def reset_state(self) -> None:
        k = self.decoder.layout.n_slots
        self.tracker.reset()
        self._curves: list[InverseCurve | None] = [None] * k
        self._fitted_at = np.zeros(k, dtype=np.int64)
        self._drop = np.zeros(k)  # largest observed one-slot drop of loss / target

    def reductions(self, view: ClusterView) -> np.ndarray:
        """float64[K, C + 1] normalised predicted loss reduction of each task with x = 0..C
        nodes this slot (C = the largest cap)."""
        tr = self.tracker
        tr.update(view)
        top = int(view.cap.max(initial=0))
        out = np.zeros((view.n_slots, top + 1))
        nodes = np.arange(top + 1, dtype=np.float64)
        v = view.mean_speed
        for j in np.flatnonzero(view.present):
            if not tr.same_task[j]:
                self._curves[j], self._fitted_at[j], self._drop[j] = None, 0, 0.0
            if tr.count[j] >= self.min_points and tr.count[j] != self._fitted_at[j]:
                work, gap = tr.history(int(j))
                ratio = pmath.exp(gap)
                n = ratio.shape[0]
                weights = pmath.pow(self.decay, np.arange(n - 1, -1, -1.0))
                self._curves[j] = fit_inverse_curve(work, ratio, degree=2, weights=weights)
                self._fitted_at[j] = tr.count[j]
                self._drop[j] = max(float(np.max(ratio[:-1] - ratio[1:])), 0.0)
            curve = self._curves[j]
            if curve is None or not curve.ok:
                out[j, 1:] = 1.0  # no prediction yet: the first node is worth the most
                continue
            w = float(view.work[j])
            gained = pmath.pow(nodes, view.alpha[j]) * v
            drop = curve(w) - curve(w + gained)
            scale = self._drop[j] if self._drop[j] > 0 else max(float(drop[-1]), 1e-12)
            out[j] = np.maximum(drop, 0.0) / scale
        return out

    def decide(self, view: ClusterView) -> np.ndarray:
        value = self.reductions(view)
        slots = np.flatnonzero(view.present)
        fifo = slots[np.lexsort((slots, view.arrival[slots]))]
        counts = greedy_by_table(value, view.cap, view.n_nodes, fifo)
        return self.place(view, counts)
