"""The oracle forecaster: true remaining work from the hidden noise path (analysis only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from core_env import pmath
from core_env.curves import first_crossing
from core_env.forecast.protocol import BaseForecaster, HistoryBatch, RemainingWork, point_forecast


class OracleForecaster(BaseForecaster):
    """Knows every task's observed-loss path, so its forecast is the truth.

    The remaining work of a task is the least work at which its *observed* loss (the noise
    path that decides success) reaches the target, minus the work done so far: exactly what
    a scheduler would need to know. It reads each history's ``key`` (the task's row in the
    workload) to find the path. An upper bound for analysis, never a policy input in
    benchmarks of learned forecasters.

    Args:
        tables: float[M, G] observed log-loss tables indexed by history key, or a callable
            returning them (e.g. the current episode's, see :meth:`for_env`).
    """

    def __init__(self, tables: np.ndarray | Callable[[], np.ndarray]) -> None:
        self._tables = tables

    @classmethod
    def for_env(cls, env: Any) -> OracleForecaster:
        """An oracle that reads the current workload of a ``CoreSchedulerEnv`` (or wrapper)."""
        base = env.unwrapped
        return cls(lambda: base.workload.log_loss)

    def predict_batch(self, batch: HistoryBatch, log_targets: np.ndarray,
                      budgets: np.ndarray) -> RemainingWork:
        tables = self._tables() if callable(self._tables) else self._tables
        tables = np.asarray(tables)
        if batch.size and (np.any(batch.key < 0) or np.any(batch.key >= tables.shape[0])):
            bad = int(np.flatnonzero((batch.key < 0) | (batch.key >= tables.shape[0]))[0])
            raise ValueError(f"histories[{bad}]: the oracle needs a key in [0, "
                             f"{tables.shape[0]}), got {int(batch.key[bad])}")
        x_now, _ = batch.last()
        trained = batch.length > 0
        s_now = np.where(trained, pmath.exp(x_now), 0.0)
        required = first_crossing(tables[batch.key], log_targets,
                                  np.where(trained, x_now, -np.inf))
        return point_forecast(required - s_now, budgets)
