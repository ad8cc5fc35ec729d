"""Optimus (Peng, Bao, Chen, Wu and Guo, EuroSys 2018), on discrete nodes with caps and
targets.

Optimus minimises average job completion time in a deep-learning cluster with two models
learned online: the **convergence model**, a fit of the training loss against steps ``k``,
``l(k) = 1 / (b0 k + b1) + b2`` with ``b0, b1, b2 >= 0`` by non-negative least squares,
which predicts the remaining steps; and the **resource-speed model**, which
predicts the training speed with a given allocation. Allocation starts every job with
one worker (and one parameter server), then adds workers one at a time to the job with the
largest *marginal gain*, the drop in its estimated completion time per unit of resource,
``(T_j(x) - T_j(x + 1))``, with ``T_j(x) = remaining_j / speed_j(x)``, until the gains are
no longer positive or the resources run out. It is the ancestor of LARA's line of
deadline-aware schedulers, but it has no deadlines.

Here (:class:`OptimusPolicy`), every slot:

1. **Convergence model.** For each task with at least ``min_points`` observations, fit the
   curve to (work, loss / target) with :func:`~mara_agents.baselines.curvefit.fit_inverse_curve`
   (refitted only when the task has a new observation); the remaining work is the work at
   which the curve reaches the target, minus the work done (Optimus stops at convergence;
   these tasks stop at their target). A task with fewer points, or whose curve never reaches
   the target (the floor b2 at or above it), is assumed to need ``default_remaining`` more
   node-slots (Optimus assumes a default number of epochs until it has a fit).
2. **Speed model.** ``x`` nodes deliver ``x**alpha * mean speed`` per slot (the env's own
   scaling law, read from ``alpha``, in place of Optimus's fitted parameter-server model).
3. **Allocation.** Every task first gets one node, first come first served (tasks that
   arrived earlier first); then the remaining nodes go one at a time to the task with the
   largest marginal gain ``R_j / v * (x**-alpha - (x + 1)**-alpha)``, up to its cap.
   ``deadline_aware`` (the tuned default; Optimus itself has no deadlines) first drops
   tasks whose predicted remaining work cannot be done before their deadline at full cap,
   serving them only with nodes left over.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core_env import pmath
from core_env.utils.checks import check_int
from mara_agents.baselines.common import CentralPolicy, ClusterView, SlotTracker
from mara_agents.baselines.curvefit import InverseCurve, fit_inverse_curve

__all__ = ["OptimusPolicy", "greedy_marginal_gain"]


def greedy_marginal_gain(remaining: np.ndarray, alpha: np.ndarray, caps: np.ndarray,
                         total: int, order: np.ndarray, speed: float = 1.0) -> np.ndarray:
    """Optimus's allocation: one node each in ``order`` (while nodes last), then one node at a
    time to the largest drop in completion time ``R / v * (x**-alpha - (x + 1)**-alpha)``.

    Args:
        remaining: float[K] remaining work (>= 0). alpha: float[K] scaling exponents.
        caps: int[K] caps (0 for tasks that get nothing). total: nodes to give.
        order: int[M] the tasks, first come first; only these get nodes.
        speed: mean node speed.

    Returns:
        int64[K] node counts (ties: earlier in ``order``).
    """
    caps = np.asarray(caps, dtype=np.int64)
    counts = np.zeros(caps.shape[0], dtype=np.int64)
    order = np.asarray([int(j) for j in order if caps[j] > 0], dtype=np.int64)
    first = order[: max(int(total), 0)]
    counts[first] = 1
    left = int(total) - first.size
    if left <= 0 or order.size == 0:
        return counts
    rem = np.asarray(remaining, dtype=np.float64)[order] / speed
    a = np.asarray(alpha, dtype=np.float64)[order]
    x = counts[order].astype(np.float64)
    room = x < caps[order]

    def gains(x: np.ndarray, rem: np.ndarray, a: np.ndarray) -> np.ndarray:
        return rem * (pmath.pow(np.maximum(x, 1.0), -a) - pmath.pow(x + 1.0, -a))

    g = np.where(room, gains(x, rem, a), -np.inf)
    while left > 0:
        i = int(np.argmax(g))  # the first of equal gains: earliest in order
        if not g[i] > 0:
            break
        x[i] += 1.0
        left -= 1
        g[i] = (gains(x[i: i + 1], rem[i: i + 1], a[i: i + 1])[0] if x[i] < caps[order[i]]
                else -np.inf)
    counts[order] = x.astype(np.int64)
    return counts


class OptimusPolicy(CentralPolicy):
    """Optimus (see the module docstring).

    Args:
        env: the environment (it reads the observed loss gap and work, no forecast columns).
        min_points: observations before a task's curve is fitted (>= 2).
        default_remaining: remaining work assumed without a usable fit (node-slots, > 0).
        deadline_aware: serve tasks predicted to miss their deadline only with nodes left
            over.
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).

    Attributes:
        remaining: float64[K] each visible task's predicted remaining work (latest slot).
    """

    name = "optimus"

    def __init__(self, env: Any, min_points: int = 3, default_remaining: float = 10.0,
                 deadline_aware: bool = True, stickiness: float = 0.0) -> None:
        super().__init__(env, stickiness)
        check_int("min_points", min_points, 2, exact=True)
        if not (isinstance(default_remaining, (int, float)) and math.isfinite(default_remaining)
                and default_remaining > 0):
            raise ValueError(f"default_remaining: expected a finite number > 0, got "
                             f"{default_remaining!r}")
        self.min_points, self.default_remaining = min_points, float(default_remaining)
        self.deadline_aware = bool(deadline_aware)
        self.tracker = SlotTracker(self.decoder.layout.n_slots, history=True)

    def reset_state(self) -> None:
        k = self.decoder.layout.n_slots
        self.tracker.reset()
        self.remaining = np.zeros(k)
        self._curves: list[InverseCurve | None] = [None] * k
        self._fitted_at = np.zeros(k, dtype=np.int64)  # observation count of each fit

    def predict(self, view: ClusterView) -> np.ndarray:
        """float64[K] remaining work of each task (the convergence model)."""
        tr = self.tracker
        tr.update(view)
        out = np.zeros(view.n_slots)
        for j in np.flatnonzero(view.present):
            if not tr.same_task[j]:
                self._curves[j], self._fitted_at[j] = None, 0
            if tr.count[j] >= self.min_points and tr.count[j] != self._fitted_at[j]:
                work, gap = tr.history(int(j))
                self._curves[j] = fit_inverse_curve(work, pmath.exp(gap), degree=1)
                self._fitted_at[j] = tr.count[j]
            curve = self._curves[j]
            need = curve.work_to(1.0) if curve is not None and curve.ok else float("inf")
            out[j] = (max(need - float(view.work[j]), 0.0) if math.isfinite(need)
                      else self.default_remaining)
            if view.log_gap[j] <= 0 and tr.count[j] > 0:
                out[j] = 0.0
        self.remaining = out
        return out

    def decide(self, view: ClusterView) -> np.ndarray:
        remaining = self.predict(view)
        slots = np.flatnonzero(view.present)
        fifo = slots[np.lexsort((slots, view.arrival[slots]))]
        caps = view.cap.copy()
        v = max(view.mean_speed, 1e-12)
        if self.deadline_aware:
            late = view.present & (remaining > view.achievable)
            first = greedy_marginal_gain(remaining, view.alpha, np.where(late, 0, caps),
                                         view.n_nodes, fifo, v)
            rest = greedy_marginal_gain(remaining, view.alpha, np.where(late, caps, 0),
                                        view.n_nodes - int(first.sum()), fifo, v)
            counts = first + rest
        else:
            counts = greedy_marginal_gain(remaining, view.alpha, caps, view.n_nodes, fifo, v)
        return self.place(view, counts)
