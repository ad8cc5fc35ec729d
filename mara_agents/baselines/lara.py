"""LARA (Wang, Yu, Zhao and Zhou, ICML 2024), made discrete (SPEC §5).

LARA schedules time-constrained learning tasks on a divisible resource: it predicts each
task's remaining work with an exponentially weighted least-squares power-law fit (WLS, here
read from the forecast columns of :class:`core_env.forecast.LossForecastWrapper`), explores
young tasks with uniform shares, and every slot chooses the largest set of tasks that can all
meet their deadlines and gives them shares. Our cluster has whole nodes and parallelism
caps, so the shares are rounded to nodes. Every slot (v = mean node speed, d_j = slots
left, N nodes):

1. **Exploration.** A task with fewer than ``explore_obs`` observations (slots trained;
   counted by :class:`~mara_agents.baselines.common.SlotTracker`) is *young*. The young
   tasks share ``explore_budget * N`` nodes equally (each capped at its parallelism;
   ``explore_split="visible"`` gives each the cluster's uniform share N / visible tasks
   instead), earliest deadline first when the budget binds.
2. **Admission (Moore-Hodgson).** Each mature task's remaining work R_j is the forecast
   column ``column`` times ``safety``. Tasks the forecast says cannot finish even at full
   cap (R_j > cap**alpha * v * d_j, or a censored forecast) are rejected. The rest get a
   steady share x_j (:func:`steady_share`: the fewest fractional nodes that deliver R_j by
   ``d_j - deadline_margin`` at a constant rate, capped) and, in EDF order, are admitted by
   :func:`moore_hodgson` with processing time p_j and deadline d_j:

   * ``capacity_model="cluster"`` (default): p_j = (node-slots at the steady share) /
     N_plan, the cluster seen as one machine of N_plan = N - exploration nodes node-slots
     per slot;
   * ``capacity_model="sequential"``: p_j = R_j / (v * min(N_plan, cap_j)**alpha_j), the
     task alone on the cluster: the literal single-machine reading, which ignores that
     capped tasks run side by side.
3. **Shares.** In EDF order each admitted task gets x_j while nodes last; leftover nodes go
   to the admitted tasks with the earliest deadlines up to their caps, then
   (``work_conserving``) to the other visible tasks, earliest deadline first, so nodes never
   idle while a task could use them.
4. **Rounding.** :func:`largest_remainder` turns the fractional shares into whole nodes
   (Hamilton's method, subject to the caps; sum N, or fewer if the caps bind). With
   ``carry_remainders`` each task's rounding error is carried to its next slot's quota, so
   over time the whole nodes track the fractional shares.
5. **Placement.** :meth:`~mara_agents.baselines.common.CentralPolicy.place`: the
   ``stickiness`` hysteresis (off by default), then
   :func:`~mara_agents.baselines.common.assign_nodes` keeps nodes on the task they trained
   last slot (the ``last_slot`` node feature) to avoid switches.

The pure pieces (:func:`moore_hodgson`, :func:`largest_remainder`, :func:`steady_share`,
:func:`assign_nodes`) are unit-tested on their own. The parameter choices and what they are
worth are measured in ``docs/baselines.md``.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from core_env import pmath
from core_env.utils.checks import check_ints
from mara_agents.baselines.common import (
    CentralPolicy,
    ClusterView,
    SlotTracker,
    assign_nodes,
    check_forecast_column,
)

__all__ = ["LARAParams", "LARAPolicy", "assign_nodes", "largest_remainder", "moore_hodgson",
           "steady_share"]


def moore_hodgson(processing: np.ndarray, deadlines: np.ndarray,
                  drop_weight: np.ndarray | None = None) -> np.ndarray:
    """The largest set of jobs that can all meet their deadlines on one machine.

    Moore (1968), "An n job, one machine sequencing algorithm for minimizing the number of
    late jobs" (Hodgson's simplification): take the jobs in earliest-deadline order; when
    the total processing time of the accepted jobs exceeds the current job's deadline,
    drop the accepted job with the longest processing time. The result is a maximum-size
    on-time set, which EDF then schedules without lateness. With ``drop_weight`` the job
    dropped is the one with the largest ``processing * drop_weight`` (a weight below 1
    protects a job; the set is then on time but may be smaller).

    Args:
        processing: float[n] processing times (>= 0).
        deadlines: float[n] deadlines, measured from now.
        drop_weight: float[n] positive weights of the drop rule (None: all 1).

    Returns:
        int64[m] indices of the accepted jobs in EDF order (ties by index).

    Raises:
        ValueError: shapes differ, or a value is negative or not finite.
    """
    p = np.asarray(processing, dtype=np.float64)
    d = np.asarray(deadlines, dtype=np.float64)
    if p.ndim != 1 or p.shape != d.shape:
        raise ValueError(f"processing and deadlines: expected 1-D arrays of equal length, got "
                         f"shapes {p.shape} and {d.shape}")
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(d))):
        raise ValueError("processing and deadlines: expected finite values")
    if np.any(p < 0):
        raise ValueError(f"processing: expected times >= 0, got {p.tolist()}")
    key = p if drop_weight is None else p * np.asarray(drop_weight, dtype=np.float64)
    if key.shape != p.shape or not np.all(np.isfinite(key)):
        raise ValueError(f"drop_weight: expected finite weights of shape {p.shape}")
    order = np.lexsort((np.arange(d.size), d))
    heap: list[tuple[float, int]] = []  # (-key, -index): pop the largest key, latest index
    total = 0.0
    for j in order:
        heapq.heappush(heap, (-key[j], -int(j)))
        total += p[j]
        if total > d[j] * (1 + 1e-12) + 1e-12:
            _, neg_i = heapq.heappop(heap)
            total -= p[-neg_i]
    accepted = np.array(sorted(-i for _, i in heap), dtype=np.int64)
    return accepted[np.lexsort((accepted, d[accepted]))]


def largest_remainder(shares: np.ndarray, caps: np.ndarray, total: int,
                      priority: np.ndarray | None = None) -> np.ndarray:
    """Round fractional node shares to whole nodes (Hamilton's largest-remainder method),
    subject to caps.

    Quotas are the shares clipped to the caps, scaled down to ``total`` if they exceed it
    (scaling down never breaks a cap). Each task gets the floor of its quota; the nodes left
    go one each to the largest remainders (ties: smaller ``priority``, then lower index).

    Args:
        shares: float[n] fractional nodes wanted (>= 0).
        caps: int[n] the most nodes each task can take (>= 0).
        total: whole nodes available (>= 0).
        priority: float[n] tie-break key for equal remainders (default: index order).

    Returns:
        int64[n] whole nodes, each in [0, cap], zero where the share is zero, summing to
        ``min(total, round(sum of clipped shares))`` (= ``total``, or fewer if the caps
        bind, when the shares add up to at least ``total``).

    Raises:
        ValueError: shapes differ, or a value is negative or not finite.
    """
    s = np.asarray(shares, dtype=np.float64)
    c = np.asarray(caps)
    if s.ndim != 1 or s.shape != c.shape:
        raise ValueError(f"shares and caps: expected 1-D arrays of equal length, got shapes "
                         f"{s.shape} and {c.shape}")
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"shares: expected finite values >= 0, got {s.tolist()}")
    if np.any(c < 0) or not np.all(np.asarray(c) == np.rint(c)):
        raise ValueError(f"caps: expected whole numbers >= 0, got {c.tolist()}")
    if int(total) != total or total < 0:
        raise ValueError(f"total: expected a whole number >= 0, got {total!r}")
    if priority is not None and np.shape(priority) != s.shape:
        raise ValueError(f"priority: expected shape {s.shape}, got {np.shape(priority)}")
    c = c.astype(np.int64)
    q = np.minimum(s, c)
    qsum = float(q.sum())
    if qsum > total:
        q = q * (total / qsum)
    target = min(int(total), int(math.floor(float(q.sum()) + 0.5)))
    out = np.minimum(np.floor(q + 1e-9), c).astype(np.int64)
    deficit = target - int(out.sum())
    if deficit > 0:
        rem = np.where((out < c) & (q > 0), q - out, -np.inf)
        prio = np.zeros_like(q) if priority is None else np.asarray(priority, dtype=np.float64)
        order = np.lexsort((np.arange(q.size), prio, -rem))
        order = order[np.isfinite(rem[order])][:deficit]
        out[order] += 1
    return out


@dataclass(frozen=True)
class LARAParams:
    """LARA's own parameters. The defaults are the measured choices of
    ``docs/baselines.md`` (tuned on CoRE-v0 seeds 100-129, never on the reported seeds)."""

    explore_obs: int = 3
    """Observations (slots trained) before a task leaves the exploration phase (>= 0)."""
    explore_budget: float = 0.5
    """Largest fraction of the nodes given to young tasks, in [0, 1]."""
    explore_split: str = "young"
    """How young tasks share the exploration budget: ``"young"`` splits ``explore_budget *
    N`` equally among the young tasks; ``"visible"`` gives each young task the cluster's
    uniform share N / (visible tasks), within the budget."""
    column: str = "fc_q50"
    """Forecast column read as the remaining work (``fc_mean`` or ``fc_q10/50/90``)."""
    safety: float = 1.0
    """Multiplier on the predicted remaining work (> 0; > 1 is conservative)."""
    deadline_margin: int = 1
    """Plan to finish this many slots before the deadline (>= 0). With 0, a task whose
    remaining work fits in its last slot gets a fractional share that rounds to 0 nodes."""
    capacity_model: str = "cluster"
    """How Moore-Hodgson measures processing time: ``"cluster"`` (node-slots / plan nodes)
    or ``"sequential"`` (the task alone on the cluster, capped by its parallelism)."""
    carry_remainders: bool = True
    """Round cumulatively: each task's rounding error of earlier slots (clipped to one
    node) is added to its share before rounding, so whole nodes track the fractional
    shares over time instead of rounding a small share to 0 slot after slot."""
    work_conserving: bool = True
    """Give the nodes the plan leaves free to the other tasks (earliest deadline first)
    instead of idling them."""

    def __post_init__(self) -> None:
        check_ints(self, ("explore_obs", "deadline_margin"), 0)
        if not (isinstance(self.explore_budget, (int, float))
                and 0.0 <= self.explore_budget <= 1.0):
            raise ValueError(f"explore_budget: expected a number in [0, 1], got "
                             f"{self.explore_budget!r}")
        if self.explore_split not in ("young", "visible"):
            raise ValueError(f"explore_split: expected 'young' or 'visible', got "
                             f"{self.explore_split!r}")
        check_forecast_column(self.column)
        if not (isinstance(self.safety, (int, float)) and math.isfinite(self.safety)
                and self.safety > 0):
            raise ValueError(f"safety: expected a finite number > 0, got {self.safety!r}")
        if self.capacity_model not in ("cluster", "sequential"):
            raise ValueError(f"capacity_model: expected 'cluster' or 'sequential', got "
                             f"{self.capacity_model!r}")


def steady_share(remaining: np.ndarray, slots: np.ndarray, alpha: np.ndarray,
                 speed: float) -> np.ndarray:
    """Fewest (fractional) nodes that deliver ``remaining`` work in ``slots`` slots at a
    constant rate.

    The rate needed is ``r = remaining / (speed * slots)`` node-equivalents per slot. At
    least one whole node (r >= 1), x nodes deliver ``x**alpha * speed``, so x = r**(1/alpha);
    below one node a fractional share is time-sharing of one node, which delivers
    ``speed`` per slot it runs, so x = r.

    Args:
        remaining: float[n] work still needed (node-slots of speed 1).
        slots: float[n] slots to deliver it in (> 0).
        alpha: float[n] scaling exponents in (0, 1].
        speed: mean node speed (> 0).

    Returns:
        float64[n] fractional nodes (uncapped).
    """
    r = np.asarray(remaining, dtype=np.float64) / (speed * np.asarray(slots, dtype=np.float64))
    return np.where(r >= 1.0, pmath.pow(np.maximum(r, 1.0), 1.0 / np.asarray(alpha)), r)


class LARAPolicy(CentralPolicy):
    """LARA made discrete (see the module docstring for the rule).

    Args:
        env: the forecast-wrapped environment (``make_policy("lara", env)`` wraps it with
            the WLS forecaster).
        params: a :class:`LARAParams`; keyword arguments override its fields
            (``LARAPolicy(env, explore_obs=4)``).
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).

    Attributes:
        last_plan: the latest slot's decision, for analysis: ``young`` and ``accepted``
            (bool[K]), ``remaining`` (float64[K] forecast work) and ``share``
            (float64[K] fractional nodes before rounding).
    """

    name = "lara"
    needs_forecast = True

    def __init__(self, env: Any, params: LARAParams | None = None, stickiness: float = 0.0,
                 **overrides: Any) -> None:
        super().__init__(env, stickiness)
        base = params if params is not None else LARAParams()
        self.params = dataclasses.replace(base, **overrides) if overrides else base
        k = self.decoder.layout.n_slots
        self.tracker = SlotTracker(k)
        self.last_plan: dict[str, np.ndarray] = {}
        self._owed = np.zeros(k)  # rounding error carried per slot (nodes)

    def reset_state(self) -> None:
        self.tracker.reset()
        self.last_plan = {}
        self._owed = np.zeros(self.decoder.layout.n_slots)

    def shares(self, view: ClusterView) -> np.ndarray:
        """float64[K] fractional node shares of this slot (steps 1-3 of the module
        docstring); updates the observation counts."""
        p = self.params
        n, k = view.n_nodes, view.n_slots
        v = max(view.mean_speed, 1e-12)
        count = self.tracker.update(view)
        present, cap = view.present, view.cap.astype(np.float64)
        left = view.time_left.astype(np.float64)
        young = present & (count < p.explore_obs)
        mature = present & ~young
        edf = np.lexsort((np.arange(k), left))  # earliest deadline first, ties by slot
        edf = edf[present[edf]]
        share = np.zeros(k)

        # 1. exploration: a uniform share for young tasks, within the budget
        if young.any():
            budget = p.explore_budget * n
            if p.explore_split == "young":
                uniform = budget / int(young.sum())
            else:
                uniform = n / int(present.sum())
            for j in edf[young[edf]]:
                give = min(cap[j], uniform, budget)
                share[j] = give
                budget -= give
        plan_nodes = max(n - float(share.sum()), 0.0)

        # 2. admission: Moore-Hodgson over the mature tasks that can finish at full cap
        remaining, censored = self.decoder.remaining(view, p.column)
        remaining = remaining * p.safety
        cand = np.flatnonzero(mature & ~censored & (remaining <= view.achievable))
        accepted = np.zeros(0, dtype=np.int64)
        x = np.zeros(k)
        if cand.size and plan_nodes > 0:
            alpha, r, d = view.alpha[cand], remaining[cand], left[cand]
            x[cand] = np.minimum(steady_share(r, np.maximum(d - p.deadline_margin, 1.0),
                                              alpha, v), cap[cand])
            if p.capacity_model == "cluster":
                # node-slots at the steady allocation (a whole node at least)
                proc = pmath.pow(np.maximum(x[cand], 1.0), 1.0 - alpha) * r / v / plan_nodes
            else:
                proc = r / (v * pmath.pow(np.minimum(plan_nodes, cap[cand]), alpha))
            weight = self.drop_weight(view)
            accepted = cand[moore_hodgson(proc, d, None if weight is None else weight[cand])]

        # 3. shares: steady shares in EDF order, leftovers to the earliest deadlines
        free = plan_nodes
        for j in accepted:
            give = min(x[j], free)
            share[j] += give
            free -= give
        rest = list(accepted) + ([j for j in self.leftover_order(view, edf)
                                  if j not in set(accepted.tolist())]
                                 if p.work_conserving else [])
        for j in rest:
            if free <= 1e-12:
                break
            give = min(cap[j] - share[j], free)
            share[j] += give
            free -= give
        acc = np.zeros(k, dtype=bool)
        acc[accepted] = True
        self.last_plan = {"young": young, "accepted": acc, "remaining": remaining,
                          "share": share.copy()}
        return share

    def drop_weight(self, view: ClusterView) -> np.ndarray | None:
        """float64[K] weights of Moore-Hodgson's drop rule (None: LARA's, the longest
        processing time goes; a subclass protects some tasks)."""
        return None

    def leftover_order(self, view: ClusterView, edf: np.ndarray) -> np.ndarray:
        """The order in which the tasks outside the plan get the nodes it leaves free
        (LARA: earliest deadline first)."""
        return edf

    def decide(self, view: ClusterView) -> np.ndarray:
        share = self.shares(view)
        if self.params.carry_remainders:
            keep = self.tracker.same_task & (share > 0)
            quota = np.where(view.present, np.maximum(share + np.where(keep, self._owed, 0.0),
                                                      0.0), 0.0)
        else:
            quota = share
        counts = largest_remainder(quota, view.cap, view.n_nodes,
                                   priority=view.time_left.astype(np.float64))
        self._owed = np.clip(quota - counts, -1.0, 1.0) * view.present
        return self.place(view, counts)
