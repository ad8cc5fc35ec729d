"""Oracle-informed greedy scheduler: a reference that knows every task's true remaining work
(SPEC §5). Not a fair baseline: it reads the forecast columns of an environment wrapped with
:class:`core_env.forecast.OracleForecaster` (``make_policy("oracle_greedy", env)``), i.e. the
least work at which the *observed* loss reaches the target.

Rule, every slot (v = mean node speed, d_j = slots left, R_j = true remaining work):

1. keep the tasks that can still finish in time at full cap:
   ``R_j <= cap_j**alpha_j * v * d_j``;
2. serve them in order of R_j / (cap_j**alpha_j * v) (their shortest possible processing
   time), giving each the fewest whole nodes k that finish it by its deadline,
   ``k**alpha_j * v * d_j >= R_j``, while that many nodes are free (else skip it);
3. spread the spare nodes one at a time over the served tasks in the same order, up to
   their caps (finishing sooner frees nodes for later arrivals), then over the remaining
   feasible tasks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core_env import pmath
from mara_agents.baselines.common import CentralPolicy, ClusterView, check_forecast_column


class OracleGreedyPolicy(CentralPolicy):
    """Feasible tasks, smallest true processing time first, fewest nodes that finish each
    in time, then spare nodes round-robin (see the module docstring).

    Args:
        env: the oracle-wrapped environment.
        column: the forecast column to read (all oracle quantiles are equal).
        stickiness: hysteresis on taking nodes from a task (>= 0; 0: off; see
            :meth:`~mara_agents.baselines.common.CentralPolicy.place`).
    """

    name = "oracle_greedy"
    needs_forecast = True

    def __init__(self, env: Any, column: str = "fc_q50", stickiness: float = 0.0) -> None:
        super().__init__(env, stickiness)
        self.column = check_forecast_column(column)

    def decide(self, view: ClusterView) -> np.ndarray:
        n = view.n_nodes
        v = max(view.mean_speed, 1e-12)
        remaining, censored = self.decoder.remaining(view, self.column)
        full_rate = view.rate(view.cap)
        feasible = view.present & ~censored & (
            remaining <= full_rate * view.time_left * (1 + 1e-6) + 1e-9)
        cand = np.flatnonzero(feasible)
        proc = remaining[cand] / np.maximum(full_rate[cand], 1e-12)
        order = cand[np.lexsort((cand, view.time_left[cand], proc))]
        counts = np.zeros(view.n_slots, dtype=np.int64)
        free = n
        served = []
        for j in order:
            need = _fewest_nodes(remaining[j], view.alpha[j], v, view.time_left[j],
                                 int(view.cap[j]))
            if need <= free:
                counts[j] = need
                free -= need
                served.append(j)
        others = [j for j in order if counts[j] == 0]
        for group in (served, others):
            while free > 0:
                room = [j for j in group if counts[j] < view.cap[j]]
                if not room:
                    break
                for j in room:
                    if free == 0:
                        break
                    counts[j] += 1
                    free -= 1
        return self.place(view, counts)


def _fewest_nodes(remaining: float, alpha: float, speed: float, slots: int, cap: int) -> int:
    """Smallest k in [1, cap] with ``k**alpha * speed * slots >= remaining`` (cap if none)."""
    k = np.arange(1, cap + 1, dtype=np.float64)
    enough = pmath.pow(k, alpha) * speed * slots >= remaining * (1 - 1e-6) - 1e-9
    return int(np.argmax(enough)) + 1 if enough.any() else cap
