"""The forecasting protocol (SPEC §4): histories in, remaining-work distributions out.

A forecaster answers, for a batch of tasks, "how much more work until this task's observed
loss reaches its target?" from each task's observed history. Everything is batched and
numpy-only, so ``core_env`` never needs torch:

* :class:`CurveHistory` is one task's history, ``(work, loss)`` arrays (cumulative work at
  each observation, observed loss), plus an optional ``key`` (the task's row in its episode's
  workload; only :class:`~core_env.forecast.OracleForecaster` looks at it).
* :class:`HistoryBatch` is many histories padded into arrays (what the simulator produces
  without building Python objects, and what forecasters compute on).
* :class:`RemainingWork` is the answer: mean and 10/50/90% quantiles of the remaining work, and
  the probability of reaching the target within a work budget.
* :class:`Forecaster` is the protocol; :class:`BaseForecaster` turns a ``predict_batch`` into
  the sequence-based ``predict``.

Remaining work is in node-slots of speed 1 and always finite: a target a forecaster cannot
see being reached is reported as :data:`REMAINING_CAP` with ``p_reach = 0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from core_env import pmath
from core_env.curves import WORK_MAX

REMAINING_CAP = WORK_MAX
"""Largest remaining work ever reported (node-slots): "not within sight"."""

QUANTILES = (0.1, 0.5, 0.9)
"""The quantile levels of :class:`RemainingWork`."""


class CurveHistory(NamedTuple):
    """One task's observed history.

    Attributes:
        work: float[n], cumulative work at each observation (node-slots, increasing).
        loss: float[n], observed loss at each observation (positive).
        key: the task's row in its episode's workload (-1 = unknown); only oracles use it.
    """

    work: np.ndarray
    loss: np.ndarray
    key: int = -1


class HistoryBatch(NamedTuple):
    """Histories of n tasks padded to a common length H (entries past ``length`` are 0).

    Attributes:
        log_work: float64[n, H], ln cumulative work.
        log_loss: float64[n, H], ln observed loss.
        length: int64[n], observations per task (0 = never trained).
        key: int64[n], task rows in the workload (-1 = unknown).
    """

    log_work: np.ndarray
    log_loss: np.ndarray
    length: np.ndarray
    key: np.ndarray

    @property
    def size(self) -> int:
        return int(self.length.shape[0])

    @classmethod
    def from_histories(cls, histories: Sequence[CurveHistory]) -> HistoryBatch:
        """Validate and pad a sequence of :class:`CurveHistory`.

        Raises:
            ValueError: naming the history index and what is wrong with it.
        """
        n = len(histories)
        lengths = np.zeros(n, dtype=np.int64)
        keys = np.full(n, -1, dtype=np.int64)
        rows = []
        for i, h in enumerate(histories):
            work = np.asarray(h[0], dtype=np.float64)
            loss = np.asarray(h[1], dtype=np.float64)
            if work.ndim != 1 or work.shape != loss.shape:
                raise ValueError(f"histories[{i}]: expected 1-D work and loss of equal length, "
                                 f"got shapes {work.shape} and {loss.shape}")
            if not (np.all(np.isfinite(work)) and np.all(np.isfinite(loss))):
                raise ValueError(f"histories[{i}]: expected finite work and loss")
            if np.any(work <= 0) or np.any(loss <= 0):
                raise ValueError(f"histories[{i}]: expected positive work and loss")
            if np.any(np.diff(work) < 0):
                raise ValueError(f"histories[{i}]: expected non-decreasing cumulative work")
            lengths[i] = work.shape[0]
            keys[i] = int(h[2]) if len(h) > 2 else -1
            rows.append((pmath.log(work), pmath.log(loss)))
        width = int(lengths.max()) if n else 0
        log_work = np.zeros((n, width))
        log_loss = np.zeros((n, width))
        for i, (lw, ll) in enumerate(rows):
            log_work[i, : lw.shape[0]] = lw
            log_loss[i, : ll.shape[0]] = ll
        return cls(log_work, log_loss, lengths, keys)

    def last(self) -> tuple[np.ndarray, np.ndarray]:
        """ln work and ln loss of each task's latest observation (0 where length is 0)."""
        if self.log_work.shape[1] == 0:
            return np.zeros(self.size), np.zeros(self.size)
        i = np.maximum(self.length - 1, 0)
        rows = np.arange(self.size)
        has = self.length > 0
        return (np.where(has, self.log_work[rows, i], 0.0),
                np.where(has, self.log_loss[rows, i], 0.0))


class RemainingWork(NamedTuple):
    """A batch of remaining-work forecasts; every field is float64[n], finite.

    Attributes:
        mean: expected remaining work to reach the target.
        q10: 10% quantile.
        q50: median.
        q90: 90% quantile.
        p_reach: probability of reaching the target within the budget given to ``predict``
            (within :data:`REMAINING_CAP` when no budget is given), in [0, 1].
    """

    mean: np.ndarray
    q10: np.ndarray
    q50: np.ndarray
    q90: np.ndarray
    p_reach: np.ndarray

    def check(self, n: int) -> RemainingWork:
        """Raise ``ValueError`` unless every field is a finite float array of shape (n,) with
        0 <= q10 <= q50 <= q90 <= REMAINING_CAP and p_reach in [0, 1]; return self."""
        for name, arr in zip(self._fields, self, strict=False):
            a = np.asarray(arr)
            if a.shape != (n,):
                raise ValueError(f"RemainingWork.{name}: expected shape ({n},), got {a.shape}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"RemainingWork.{name}: expected finite values")
        tol = 1e-9 * REMAINING_CAP
        if np.any(self.q10 < -tol) or np.any(self.q90 > REMAINING_CAP + tol):
            raise ValueError("RemainingWork: quantiles outside [0, REMAINING_CAP]")
        if np.any(self.q10 > self.q50 + tol) or np.any(self.q50 > self.q90 + tol):
            raise ValueError("RemainingWork: expected q10 <= q50 <= q90")
        if np.any(self.p_reach < 0) or np.any(self.p_reach > 1):
            raise ValueError("RemainingWork.p_reach: expected values in [0, 1]")
        return self


@runtime_checkable
class Forecaster(Protocol):
    """Predicts the remaining work of a batch of tasks from their observed histories."""

    def predict(self, histories: Sequence[CurveHistory], targets: np.ndarray,
                budgets: np.ndarray | None = None) -> RemainingWork:
        """Args:
            histories: one :class:`CurveHistory` per task.
            targets: float[n], target losses eps_j (> 0).
            budgets: float[n] work budgets for ``p_reach`` (``None``: REMAINING_CAP).
        """
        ...


class BaseForecaster:
    """Implements :meth:`predict` (validation, padding) on top of :meth:`predict_batch`.

    Subclasses implement ``predict_batch(batch, log_targets, budgets) -> RemainingWork`` on
    padded arrays, which is also what the simulator-side wrappers call directly.
    """

    def predict(self, histories: Sequence[CurveHistory], targets: np.ndarray,
                budgets: np.ndarray | None = None) -> RemainingWork:
        batch = HistoryBatch.from_histories(histories)
        log_targets, budgets = _check_targets(batch.size, targets, budgets)
        return self.predict_batch(batch, log_targets, budgets).check(batch.size)

    def predict_batch(self, batch: HistoryBatch, log_targets: np.ndarray,
                      budgets: np.ndarray) -> RemainingWork:
        """Forecast from padded histories; ``log_targets`` = ln eps, ``budgets`` finite > 0."""
        raise NotImplementedError


def _check_targets(n: int, targets: np.ndarray, budgets: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(targets, dtype=np.float64)
    if t.shape != (n,):
        raise ValueError(f"targets: expected shape ({n},), got {t.shape}")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("targets: expected finite positive losses")
    if budgets is None:
        b = np.full(n, REMAINING_CAP)
    else:
        b = np.asarray(budgets, dtype=np.float64)
        if b.shape != (n,):
            raise ValueError(f"budgets: expected shape ({n},), got {b.shape}")
        if not np.all(np.isfinite(b)) or np.any(b < 0):
            raise ValueError("budgets: expected finite non-negative work")
    return pmath.log(t), b


def point_forecast(remaining: np.ndarray, budgets: np.ndarray) -> RemainingWork:
    """A degenerate (certain) forecast: every quantile equals ``remaining``."""
    r = np.clip(np.nan_to_num(remaining, nan=REMAINING_CAP, posinf=REMAINING_CAP), 0.0,
                REMAINING_CAP)
    return RemainingWork(mean=r, q10=r, q50=r, q90=r,
                         p_reach=((r <= budgets) & (r < REMAINING_CAP)).astype(np.float64))


def forecast(forecaster: Forecaster, batch: HistoryBatch, log_targets: np.ndarray,
             budgets: np.ndarray) -> RemainingWork:
    """Call any forecaster on padded histories (directly if it is a :class:`BaseForecaster`,
    else through the sequence-based protocol) and check its answer."""
    if isinstance(forecaster, BaseForecaster):
        return forecaster.predict_batch(batch, log_targets, budgets).check(batch.size)
    histories = [CurveHistory(pmath.exp(batch.log_work[i, :n]), pmath.exp(batch.log_loss[i, :n]),
                              int(batch.key[i])) for i, n in enumerate(batch.length)]
    out = forecaster.predict(histories, pmath.exp(log_targets), budgets)
    return RemainingWork(*(np.asarray(a, dtype=np.float64) for a in out)).check(batch.size)
