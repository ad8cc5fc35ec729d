"""Asynchronous successive halving (ASHA), made a deadline scheduler on discrete nodes.

Successive halving (Jamieson and Talwalkar, AISTATS 2016) gives every configuration a small
budget, keeps the best 1/eta and multiplies their budget by eta, rung after rung. ASHA (Li et
al., MLSys 2020, Algorithm 2) makes it asynchronous: rung k has budget ``r_k = r_min *
eta**k``; whenever a worker is free, ``get_job`` looks from the top rung down for a
configuration in ``top_k(rung k, |rung k| / eta)`` that has not been promoted yet and
promotes it to rung k + 1, and only if there is none starts a new configuration at rung 0.
It is the rule of Ray Tune's ``AsyncHyperBandScheduler`` and Optuna's
``SuccessiveHalvingPruner``.

Here a configuration is a task, the resource is work (node-slots of speed 1, what
``log_work`` counts) and "its score" is how close the task is to its own target when it
reaches the rung. Every slot (:class:`SuccessiveHalvingPolicy`):

1. **Rungs.** A task may train until its work reaches the budget of its rung, ``r_min *
   eta**rung`` (rung 0 on arrival). On reaching it, the task is recorded in that rung with
   its score and pauses. The top rung (budget >= ``WORK_MAX``) never pauses.
2. **Promotion.** A paused task in rung k is promoted to k + 1 when its score ranks among
   the best ``floor(n_k / eta)`` of the n_k tasks ever recorded in rung k this episode
   (tasks that have left still count, as in ASHA's rung lists). Scores: ``metric="gap"``,
   ln(observed loss / target) (smaller is better); ``metric="forecast"``, the forecast
   median remaining work over the achievable work (smaller is better).
3. **Allocation.** The tasks that may train are served to their caps, highest rung first
   (ASHA prefers promotions to new configurations), then best score at their last rung,
   then first come. With ``work_conserving`` the nodes left over go to the paused tasks,
   best score first, instead of idling (ASHA always has a new configuration to start;
   this cluster may not).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core_env.curves import WORK_MAX
from mara_agents.baselines.common import CentralPolicy, ClusterView, SlotTracker, fill_by_priority

__all__ = ["SuccessiveHalvingPolicy", "rung_budgets"]


def rung_budgets(r_min: float, eta: float) -> np.ndarray:
    """float64[R] rung budgets ``r_min * eta**k`` for k = 0, 1, ... up to the first one at or
    above :data:`core_env.curves.WORK_MAX` (the top rung, which never pauses)."""
    out = [float(r_min)]
    while out[-1] < WORK_MAX:
        out.append(out[-1] * eta)
    return np.array(out)


class SuccessiveHalvingPolicy(CentralPolicy):
    """ASHA on tasks (see the module docstring).

    Args:
        env: the environment (wrapped in a ``LossForecastWrapper`` for
            ``metric="forecast"``).
        r_min: budget of rung 0, node-slots of work (> 0).
        eta: reduction factor (> 1): the best 1/eta of a rung are promoted and the next
            rung's budget is eta times larger.
        metric: ``"gap"`` or ``"forecast"`` (see the module docstring).
        work_conserving: give nodes left over to paused tasks.
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).

    Attributes:
        rung: int64[K] each visible task's rung; ``paused``: bool[K] tasks that reached their
            rung's budget and wait for promotion (after the latest slot).
    """

    name = "successive_halving"

    def __init__(self, env: Any, r_min: float = 4.0, eta: float = 2.0, metric: str = "gap",
                 work_conserving: bool = True, stickiness: float = 0.0) -> None:
        super().__init__(env, stickiness)
        if not (isinstance(r_min, (int, float)) and math.isfinite(r_min) and r_min > 0):
            raise ValueError(f"r_min: expected a finite number > 0, got {r_min!r}")
        if not (isinstance(eta, (int, float)) and math.isfinite(eta) and eta > 1):
            raise ValueError(f"eta: expected a finite number > 1, got {eta!r}")
        if metric not in ("gap", "forecast"):
            raise ValueError(f"metric: expected 'gap' or 'forecast', got {metric!r}")
        if metric == "forecast" and not self.decoder.has_forecast:
            raise ValueError("metric='forecast' reads forecast columns: wrap the env in "
                             "core_env.forecast.LossForecastWrapper first")
        self.r_min, self.eta, self.metric = float(r_min), float(eta), metric
        self.work_conserving = bool(work_conserving)
        self.budgets = rung_budgets(self.r_min, self.eta)
        self.tracker = SlotTracker(self.decoder.layout.n_slots)

    def reset_state(self) -> None:
        k = self.decoder.layout.n_slots
        self.tracker.reset()
        self.rung = np.zeros(k, dtype=np.int64)
        self.paused = np.zeros(k, dtype=bool)
        self.score = np.full(k, np.inf)  # score recorded at the task's latest rung
        self._uid = np.full(k, -1, dtype=np.int64)
        self._next_uid = 0
        # rung -> [(score, order recorded, uid)], every task ever recorded there
        self._records: list[list[tuple[float, int, int]]] = [[] for _ in self.budgets]
        self._promoted: set[tuple[int, int]] = set()  # (rung, uid) already promoted
        self._order = 0

    def scores(self, view: ClusterView) -> np.ndarray:
        """float64[K] each task's current score (smaller is better)."""
        if self.metric == "gap":
            return view.log_gap
        remaining, censored = self.decoder.remaining(view, "fc_q50")
        rel = remaining / np.maximum(view.achievable, 1e-9)
        return np.where(censored, np.inf, rel)

    def _record(self, view: ClusterView) -> None:
        """Record tasks that reached their rung's budget; pause them."""
        top = len(self.budgets) - 1
        score = self.scores(view)
        for j in np.flatnonzero(view.present):
            if not self.tracker.same_task[j]:
                self._uid[j] = self._next_uid
                self._next_uid += 1
                self.rung[j], self.paused[j], self.score[j] = 0, False, np.inf
            while (not self.paused[j] and self.rung[j] < top
                   and view.work[j] >= self.budgets[self.rung[j]] - 1e-9):
                self._records[self.rung[j]].append((float(score[j]), self._order,
                                                    int(self._uid[j])))
                self._order += 1
                self.score[j] = score[j]
                self.paused[j] = True
                self._promote(j)

    def _promote(self, j: int | np.integer) -> None:
        """Promote paused task ``j`` if it ranks in the top 1/eta of its rung."""
        r, uid = int(self.rung[j]), int(self._uid[j])
        recs = self._records[r]
        best = sorted(recs)[: int(math.floor(len(recs) / self.eta))]
        if any(u == uid for _, _, u in best) and (r, uid) not in self._promoted:
            self._promoted.add((r, uid))
            self.rung[j] += 1
            self.paused[j] = False

    def decide(self, view: ClusterView) -> np.ndarray:
        self.tracker.update(view)
        self._record(view)
        for j in np.flatnonzero(view.present & self.paused):  # rungs may have grown
            self._promote(j)
        slots = np.flatnonzero(view.present)
        run = slots[~self.paused[slots]]
        order = run[np.lexsort((run, view.arrival[run], self.score[run], -self.rung[run]))]
        if self.work_conserving:
            waiting = slots[self.paused[slots]]
            order = np.concatenate([order, waiting[np.lexsort(
                (waiting, view.arrival[waiting], -self.rung[waiting], self.score[waiting]))]])
        counts = fill_by_priority(order, view.cap, view.n_nodes)
        return self.place(view, counts)
