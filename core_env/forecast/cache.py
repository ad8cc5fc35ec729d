"""Forecast columns that call the forecaster only for tasks whose history changed.

A task's history changes only in the slots where it trains (one new observation each), so
most visible tasks keep their forecast from one slot to the next. :class:`ForecastCache`
keeps, per (environment, slot), the last forecast's remaining-work mean and quantiles
together with the task and observation count it was made for, and re-forecasts (in one
batched call) only the tasks that are new or have a new observation. That makes forecast
columns affordable on the batched simulator (training MARA) and cheap in a single env.

Columns (:data:`~core_env.forecast.wrapper.FORECAST_FEATURES`): the cached mean and
quantiles are normalised by the *current* achievable work, exactly as
:func:`~core_env.forecast.wrapper.forecast_columns` does. ``fc_p_reach`` cannot be cached
(its budget, the achievable work, shrinks every slot), so it is recomputed every slot from
the cached quantiles by a log-normal fit: with ``m = ln q50`` and
``s = max((ln q90 - ln q10) / (2 z_0.9), 0.05)``, ``p_reach = Phi((ln achievable - m) / s)``
(``z_0.9 = 1.2816``). This differs from the forecaster's own ``p_reach`` (which, for FM,
counts samples), so a policy trained on cached columns must be run on cached columns:
``LossForecastWrapper(env, forecaster, cache=True)`` uses this class.
"""

from __future__ import annotations

import numpy as np

from core_env import pmath
from core_env.forecast.protocol import Forecaster, HistoryBatch, forecast
from core_env.forecast.wls import norm_cdf
from core_env.observe import full_rate
from core_env.state import BatchState

Z90 = 1.2815515655446004
"""Standard normal 90% quantile."""


def inputs_at(sim: BatchState, env: np.ndarray, slot: np.ndarray
              ) -> tuple[HistoryBatch, np.ndarray]:
    """Histories and ln targets of the tasks in ``(env[i], slot[i])``."""
    length = sim.slot_n_obs[env, slot]
    width = int(length.max()) if length.size else 0
    batch = HistoryBatch(
        log_work=sim.hist_log_work[env, slot, :width].astype(np.float64),
        log_loss=sim.hist_log_loss[env, slot, :width].astype(np.float64),
        length=length.astype(np.int64),
        key=sim.slot_task[env, slot].astype(np.int64))
    return batch, sim.slot_log_target[env, slot].astype(np.float64)


def achievable_work(sim: BatchState) -> np.ndarray:
    """float64[B, K] work each slot's task can still receive before its deadline at full
    parallelism and mean node speed (0 for empty slots)."""
    left = np.maximum(sim.slot_deadline - sim.t[:, None], 0)
    return full_rate(sim) * left


def lognormal_p_reach(q10: np.ndarray, q50: np.ndarray, q90: np.ndarray,
                      budget: np.ndarray) -> np.ndarray:
    """P(remaining <= budget) under the log-normal through the quantiles (see the module
    docstring); 1 where the median is already 0 and the budget is positive."""
    tiny = 1e-9
    m = pmath.log(np.maximum(q50, tiny))
    s = np.maximum((pmath.log(np.maximum(q90, tiny)) - pmath.log(np.maximum(q10, tiny)))
                   / (2.0 * Z90), 0.05)
    return np.clip(norm_cdf((pmath.log(np.maximum(budget, tiny)) - m) / s), 0.0, 1.0)


class ForecastCache:
    """Cached forecast columns of a batch of environments (see the module docstring).

    Args:
        forecaster: any :class:`~core_env.forecast.Forecaster`.
        num_envs: B.
        n_slots: K.

    Attributes:
        calls: forecaster calls so far; ``forecasts``: tasks forecast so far.
    """

    def __init__(self, forecaster: Forecaster, num_envs: int, n_slots: int) -> None:
        if not isinstance(forecaster, Forecaster):
            raise ValueError(f"forecaster: expected an object with a predict(histories, "
                             f"targets, budgets) method, got {type(forecaster).__name__}")
        self.forecaster = forecaster
        self.key_task = np.full((num_envs, n_slots), -1, dtype=np.int64)
        self.key_obs = np.full((num_envs, n_slots), -1, dtype=np.int64)
        self.raw = np.zeros((num_envs, n_slots, 4), dtype=np.float64)  # mean, q10, q50, q90
        self.calls = 0
        self.forecasts = 0

    def reset(self, rows: np.ndarray | None = None) -> None:
        """Forget the forecasts of environments ``rows`` (bool[B] or indices; all if None):
        call it when they start a new episode (task ids restart)."""
        sel = slice(None) if rows is None else rows
        self.key_task[sel] = -1
        self.key_obs[sel] = -1

    def update(self, sim: BatchState) -> np.ndarray:
        """Refresh stale forecasts and return float32[B, K, 5] columns (0 for empty slots)."""

        present = sim.slot_task >= 0
        stale = present & ((sim.slot_task != self.key_task) | (sim.slot_n_obs != self.key_obs))
        achievable = achievable_work(sim)
        env, slot = np.nonzero(stale)
        if env.size:
            batch, log_targets = inputs_at(sim, env, slot)
            fc = forecast(self.forecaster, batch, log_targets, achievable[env, slot])
            self.raw[env, slot] = np.stack([fc.mean, fc.q10, fc.q50, fc.q90], axis=1)
            self.key_task[env, slot] = sim.slot_task[env, slot]
            self.key_obs[env, slot] = sim.slot_n_obs[env, slot]
            self.calls += 1
            self.forecasts += int(env.size)
        scale = 1.0 / np.maximum(achievable, 1e-9)
        out = np.zeros(achievable.shape + (5,), dtype=np.float32)
        out[..., :4] = np.minimum(self.raw * scale[..., None], 2.0) * 0.5
        out[..., 4] = lognormal_p_reach(self.raw[..., 1], self.raw[..., 2], self.raw[..., 3],
                                        achievable)
        out[~present] = 0.0
        return out
