"""LaiRA (Wang, Liu and Zhou, AAAI-26): CoRE-Learning with look-ahead and immediate resource
allocation, on discrete nodes with caps.

LaiRA is LARA's successor in the CoRE-Learning line. Its abstract names the three parts kept
here: "an efficient Dynamic Kalman Filtering (DKF) for look-ahead feasibility check with
limited data and a weight-based online estimator for immediate performance evaluation";
"an Upper Confidence Bound (UCB) to enable adaptive exploration" in place of LARA's fixed
exploration phase; and "an adaptive time-slicing method to reduce task switching costs".
The paper's equations were not available to this project (only the abstract is on record),
so each part below is the standard construction of what the abstract names, written out in
full; ``docs/baselines.md`` says so next to the results.

Every slot (:class:`LaiRAPolicy`; y = ln(observed loss / target), u = ln(work), A_j the
work the task can still receive by its deadline at full cap, d_j the slots left):

1. **Look-ahead feasibility (DKF).** Each task has a Kalman filter on y as a function of u
   with second-order (constant-curvature) dynamics, state ``s = (y, y', y'')``, transition
   over a step h = u_i - u_{i-1} ``F(h) = [[1, h, h**2/2], [0, 1, h], [0, 0, 1]]``, process
   noise of a white-noise third derivative ``Q(h) = q * [[h**5/20, h**4/8, h**3/6], [h**4/8,
   h**3/3, h**2/2], [h**3/6, h**2/2, h]]``, observation ``y_i = s_0 + noise`` of variance
   ``r**2``, and the prior ``y' ~ N(prior_slope, prior_slope_sd**2)``, ``y'' ~ N(0,
   prior_curvature_sd**2)`` at the first observation (so a task is checked from its first
   point: "with limited data"). The look-ahead predicts y at ``u_f = ln(work + A_j)``, the
   most work the task can still get; past the minimum of the predicted parabola the loss
   is taken as flat (a loss does not climb back). The task is *feasible* while
   ``mean - z * sd <= 0`` at u_f (``z`` is the look-ahead's confidence); a task never
   trained is feasible.
2. **Priority (weighted estimator + UCB).** The weighted estimator is the exponentially
   discounted WLS power-law fit of the forecast columns (``make_policy`` wraps the env
   with :class:`~core_env.forecast.WLSForecaster`); its median remaining work R_j gives the
   index ``-ln(R_j / A_j) + beta * sqrt(ln(1 + n) / n_j)``, larger first, where n_j is the
   task's observations and n all observations so far (UCB1's bonus); a task with fewer than
   two observations (no fit yet) has an infinite bonus. Ties: earliest deadline.
3. **Immediate allocation.** Feasible tasks in index order each get, while nodes last,
   ``share="needed"``: the fewest whole nodes x (up to the cap) with ``x**alpha * v *
   (d_j - deadline_margin) >= R_j`` (the cap while it has no fit), or ``share="cap"``: the
   cap. The nodes left go to the same tasks up to their caps, then to the infeasible
   tasks by index, so no node idles while a task could use it.
4. **Time slicing.** The slot is this environment's fixed time slice, so LaiRA's adaptive
   slice length has no counterpart; nodes stay on the task they trained last slot
   (:func:`~mara_agents.baselines.common.assign_nodes`), which is what limits switches.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core_env import pmath
from core_env.utils.checks import check_int
from mara_agents.baselines.common import CentralPolicy, ClusterView, SlotTracker

__all__ = ["KalmanCurve", "LaiRAPolicy"]

Matrix = list[list[float]]


def _mul(a: Matrix, b: Matrix) -> Matrix:
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


def _transpose(a: Matrix) -> Matrix:
    return [[a[j][i] for j in range(3)] for i in range(3)]


def _transition(h: float) -> Matrix:
    return [[1.0, h, 0.5 * h * h], [0.0, 1.0, h], [0.0, 0.0, 1.0]]


def _process_noise(h: float, q: float) -> Matrix:
    h2, h3 = h * h, h * h * h
    h4, h5 = h2 * h2, h2 * h3
    return [[q * h5 / 20.0, q * h4 / 8.0, q * h3 / 6.0],
            [q * h4 / 8.0, q * h3 / 3.0, q * h2 / 2.0],
            [q * h3 / 6.0, q * h2 / 2.0, q * h]]


class KalmanCurve:
    """A Kalman filter on y = ln(loss / target) against u = ln(work), state (y, y', y'').

    Args:
        q: process noise intensity (white-noise third derivative; >= 0).
        r: observation noise standard deviation (> 0).
        prior_slope, prior_slope_sd: prior mean and sd of y' at the first observation.
        prior_curvature_sd: prior sd of y'' (mean 0).
    """

    def __init__(self, q: float, r: float, prior_slope: float, prior_slope_sd: float,
                 prior_curvature_sd: float) -> None:
        self.q, self.r = q, r
        self.prior = (prior_slope, prior_slope_sd, prior_curvature_sd)
        self.mean: list[float] | None = None
        self.cov: Matrix | None = None
        self.u = 0.0

    def update(self, u: float, y: float) -> None:
        """Add the observation y at u (u must not decrease)."""
        r2 = self.r * self.r
        if self.mean is None:
            slope, slope_sd, curv_sd = self.prior
            self.mean = [y, slope, 0.0]
            self.cov = [[r2, 0.0, 0.0], [0.0, slope_sd * slope_sd, 0.0],
                        [0.0, 0.0, curv_sd * curv_sd]]
            self.u = u
            return
        mean, cov = self.predict(u - self.u)
        s = cov[0][0] + r2
        gain = [cov[i][0] / s for i in range(3)]
        resid = y - mean[0]
        self.mean = [mean[i] + gain[i] * resid for i in range(3)]
        self.cov = [[cov[i][j] - gain[i] * cov[0][j] for j in range(3)] for i in range(3)]
        self.u = u

    def predict(self, h: float) -> tuple[list[float], Matrix]:
        """State mean and covariance h ahead in u (h >= 0)."""
        assert self.mean is not None and self.cov is not None, "no observation yet"
        f = _transition(h)
        mean = [sum(f[i][k] * self.mean[k] for k in range(3)) for i in range(3)]
        cov = _mul(_mul(f, self.cov), _transpose(f))
        qn = _process_noise(h, self.q)
        return mean, [[cov[i][j] + qn[i][j] for j in range(3)] for i in range(3)]

    def look_ahead(self, h: float) -> tuple[float, float]:
        """(mean, sd) of y h ahead, the predicted parabola held flat past its minimum."""
        assert self.mean is not None, "no observation yet"
        y, v, a = self.mean
        if a > 0 and -v / a < h:
            h = max(-v / a, 0.0)  # the loss stops falling at the parabola's minimum
        mean, cov = self.predict(h)
        return mean[0], math.sqrt(max(cov[0][0] + self.r * self.r, 0.0))


class LaiRAPolicy(CentralPolicy):
    """LaiRA (see the module docstring).

    Args:
        env: the WLS-forecast-wrapped environment (``make_policy("laira", env)`` wraps it).
        z: look-ahead confidence: feasible while ``mean - z * sd <= 0`` (>= 0).
        beta: UCB coefficient (>= 0).
        share: ``"needed"`` or ``"cap"`` (step 3).
        deadline_margin: plan to finish this many slots early (>= 0).
        q: the filter's process noise (:class:`KalmanCurve`).
        r: its observation noise (sd of ln loss).
        prior_slope: prior mean of d ln loss / d ln work at the first observation.
        prior_slope_sd: its prior sd.
        prior_curvature_sd: prior sd of the second derivative.
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).

    Attributes:
        feasible: bool[K] the look-ahead's verdict after the latest slot.
    """

    name = "laira"
    needs_forecast = True

    def __init__(self, env: Any, z: float = 1.0, beta: float = 2.0, share: str = "needed",
                 deadline_margin: int = 1, q: float = 0.01, r: float = 0.05,
                 prior_slope: float = -0.5, prior_slope_sd: float = 0.5,
                 prior_curvature_sd: float = 0.2, stickiness: float = 0.0) -> None:
        super().__init__(env, stickiness)
        for name, v in (("z", z), ("beta", beta), ("q", q), ("prior_slope_sd", prior_slope_sd),
                        ("prior_curvature_sd", prior_curvature_sd)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name}: expected a finite number >= 0, got {v!r}")
        if not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0):
            raise ValueError(f"r: expected a finite number > 0, got {r!r}")
        if not (isinstance(prior_slope, (int, float)) and math.isfinite(prior_slope)):
            raise ValueError(f"prior_slope: expected a finite number, got {prior_slope!r}")
        if share not in ("needed", "cap"):
            raise ValueError(f"share: expected 'needed' or 'cap', got {share!r}")
        check_int("deadline_margin", deadline_margin, 0, exact=True)
        self.z, self.beta, self.share, self.deadline_margin = z, beta, share, deadline_margin
        self.filter_args = (q, r, prior_slope, prior_slope_sd, prior_curvature_sd)
        self.tracker = SlotTracker(self.decoder.layout.n_slots, history=True)

    def reset_state(self) -> None:
        k = self.decoder.layout.n_slots
        self.tracker.reset()
        self._filters: list[KalmanCurve | None] = [None] * k
        self._seen = np.zeros(k, dtype=np.int64)  # observations fed to each filter
        self._total = 0  # observations of every task so far
        self.feasible = np.zeros(k, dtype=bool)

    def look_ahead(self, view: ClusterView) -> np.ndarray:
        """bool[K] the DKF feasibility test of every visible task (updates the filters)."""
        tr = self.tracker
        tr.update(view)
        ok = view.present.copy()
        u_end = pmath.log(np.maximum(view.work + view.achievable, 1e-12))
        for j in np.flatnonzero(view.present):
            if not tr.same_task[j]:
                self._filters[j], self._seen[j] = None, 0
            if tr.count[j] > self._seen[j]:
                kf = self._filters[j]
                if kf is None:
                    kf = self._filters[j] = KalmanCurve(*self.filter_args)
                work, gap = tr.history(int(j))
                for w, y in zip(pmath.log(work[self._seen[j]:]), gap[self._seen[j]:], strict=False):
                    kf.update(float(w), float(y))
                self._total += int(tr.count[j] - self._seen[j])
                self._seen[j] = tr.count[j]
            f = self._filters[j]
            if f is not None:
                mean, sd = f.look_ahead(max(float(u_end[j]) - f.u, 0.0))
                ok[j] = mean - self.z * sd <= 0.0 or view.log_gap[j] <= 0.0
        self.feasible = ok
        return ok

    def index(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray]:
        """(index, fitted): float64[K] the UCB priority (larger first) and bool[K] whether the
        task has a WLS fit (two observations or more)."""
        count = self.tracker.count
        remaining, censored = self.decoder.remaining(view, "fc_q50")
        fitted = view.present & (count >= 2)
        ach = np.maximum(view.achievable, 1e-12)
        rel = np.where(censored, 2.0, np.maximum(remaining, 1e-12) / ach)
        bonus = self.beta * np.sqrt(float(pmath.log(1.0 + self._total)) / np.maximum(count, 1))
        return np.where(fitted, -pmath.log(rel) + bonus, np.inf), fitted

    def decide(self, view: ClusterView) -> np.ndarray:
        feasible = self.look_ahead(view)
        index, fitted = self.index(view)
        k = view.n_slots
        slots = np.flatnonzero(view.present)
        order = slots[np.lexsort((slots, view.time_left[slots], -index[slots]))]
        first = order[feasible[order]]
        cap = view.cap
        counts = np.zeros(k, dtype=np.int64)
        left = view.n_nodes
        if self.share == "needed":
            remaining, _ = self.decoder.remaining(view, "fc_q50")
            slots_left = np.maximum(view.time_left - self.deadline_margin, 1).astype(np.float64)
            need = remaining / (max(view.mean_speed, 1e-12) * slots_left)
            # fewest whole x with x**alpha >= need
            want = np.ceil(pmath.pow(np.maximum(need, 1e-12), 1.0 / view.alpha) - 1e-9)
            want = np.where(fitted, np.clip(want, 1, cap), cap).astype(np.int64)
        else:
            want = cap
        for j in first:
            give = min(int(want[j]), left)
            counts[j] = give
            left -= give
        for j in np.concatenate([first, order[~feasible[order]]]):
            if left <= 0:
                break
            give = min(int(cap[j] - counts[j]), left)
            counts[j] += give
            left -= give
        return self.place(view, counts)
