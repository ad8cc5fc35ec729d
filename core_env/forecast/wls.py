"""LARA's remaining-work estimator: exponentially weighted ridge least squares (SPEC §4).

:class:`WLSForecaster` fits the power law ``ln l = c - b ln s`` to a task's observations with
weights ``gamma**(n - i)`` and a ridge penalty on the slope, and reads off the required work
``s* = exp((c - ln eps) / b)``; the residual scale gives a log-normal distribution of ``s*``
(quantiles, mean, ``p_reach``). :class:`OnlineWLS` updates the weighted sums in O(1) per
observation. Degenerate fits return documented fallbacks, never NaN or inf: 0 (``p_reach`` 1)
for a task already at its target; ``REMAINING_CAP`` (``p_reach`` 0) for fewer than two
observations, no spread in work or a non-decreasing fit. The formulas and defaults:
``docs/forecasting.md``, "WLS: LARA's estimator".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core_env import pmath
from core_env.forecast.protocol import REMAINING_CAP, BaseForecaster, HistoryBatch, RemainingWork

_Z90 = 1.2815515655446004  # standard normal 90% quantile


def norm_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz & Stegun 7.1.26 for erf; |error| < 1.5e-7)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * pmath.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * erf)


@dataclass(frozen=True)
class WLSForecaster(BaseForecaster):
    """Exponentially weighted ridge least-squares power-law forecaster (LARA's estimator)."""

    gamma: float = 0.9
    """Forgetting factor in (0, 1]: weight gamma**(n - i) on the i-th of n observations."""
    ridge: float = 1e-3
    """Ridge penalty lam >= 0 on the slope."""
    min_slope: float = 1e-3
    """Fits with b <= min_slope are degenerate (flat or increasing loss)."""
    min_sigma: float = 0.02
    """Floor on the residual scale (ln-loss units) used for the uncertainty."""
    window: int | None = None
    """Use only the latest ``window`` observations (None = all)."""

    def __post_init__(self) -> None:
        if self.window is not None and not (isinstance(self.window, int) and self.window >= 2):
            raise ValueError(f"window: expected None or an integer >= 2, got {self.window!r}")
        if not (isinstance(self.gamma, (int, float)) and 0.0 < self.gamma <= 1.0):
            raise ValueError(f"gamma: expected a number in (0, 1], got {self.gamma!r}")
        for name in ("ridge", "min_slope", "min_sigma"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name}: expected a finite number >= 0, got {v!r}")

    def fit(self, batch: HistoryBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Fit every task of the batch.

        Returns:
            ``(c, b, sigma, ok)``: float64[n] intercept, decay exponent and residual scale,
            and bool[n] whether the fit is usable (not degenerate).
        """
        n, h = batch.log_work.shape
        length = batch.length
        pos = np.arange(h)[None, :]
        age = length[:, None] - 1 - pos  # 0 for the latest observation
        valid = (pos < length[:, None])
        if self.window is not None:
            valid &= age < self.window
        decay = pmath.pow(self.gamma, np.arange(h, dtype=np.float64))  # gamma**age
        w = np.where(valid, decay[np.clip(age, 0, max(h - 1, 0))], 0.0)
        return _fit_from_sums(*_weighted_sums(w, batch.log_work, batch.log_loss), self)

    def predict_batch(self, batch: HistoryBatch, log_targets: np.ndarray,
                      budgets: np.ndarray) -> RemainingWork:
        c, b, sigma, ok = self.fit(batch)
        x_now, y_now = batch.last()
        return _lognormal_remaining(c, b, sigma, ok, x_now, y_now, batch.length, log_targets,
                                    budgets)


_Sums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""The six weighted sums of a fit: w, w x, w y, w x x, w x y, w y y."""


def _weighted_sums(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> _Sums:
    # running sums: one summation order whatever the padded width of the batch
    return (pmath.rowsum(w), pmath.rowsum(w * x), pmath.rowsum(w * y),
            pmath.rowsum(w * x * x), pmath.rowsum(w * x * y), pmath.rowsum(w * y * y))


def _fit_from_sums(s0, sx, sy, sxx, sxy, syy, p: WLSForecaster):
    safe = np.where(s0 > 0, s0, 1.0)
    xbar, ybar = sx / safe, sy / safe
    vxx = np.maximum(sxx - s0 * xbar * xbar, 0.0)  # sum w (x - xbar)^2
    vxy = sxy - s0 * xbar * ybar
    vyy = np.maximum(syy - s0 * ybar * ybar, 0.0)
    slope = vxy / (vxx + p.ridge + 1e-300)
    b = -slope
    c = ybar + b * xbar
    # weighted residual sum of squares of y - c + b x = (y - ybar) - slope (x - xbar)
    rss = np.maximum(vyy - 2 * slope * vxy + slope * slope * vxx, 0.0)
    sigma = np.maximum(np.sqrt(rss / safe), p.min_sigma)
    ok = (s0 > 0) & (vxx > 1e-12) & (b > p.min_slope)
    return c, b, sigma, ok


def _lognormal_remaining(c, b, sigma, ok, x_now, y_now, length, log_targets, budgets
                         ) -> RemainingWork:
    n = c.shape[0]
    cap = REMAINING_CAP
    s_now = np.where(length > 0, pmath.exp(x_now), 0.0)
    b_safe = np.where(ok, b, 1.0)
    mu = np.where(ok, (c - log_targets) / b_safe, 0.0)  # ln s*
    sd = np.where(ok, sigma / b_safe, 1.0)
    lim = float(pmath.log(2.0 * cap))  # beyond this s* is "not within sight" anyway

    def remaining(log_s: np.ndarray) -> np.ndarray:
        return np.clip(pmath.exp(np.minimum(log_s, lim)) - s_now, 0.0, cap)

    q10, q50, q90 = (remaining(mu + z * sd) for z in (-_Z90, 0.0, _Z90))
    mean = remaining(mu + 0.5 * np.minimum(sd, 3.0) ** 2)
    p = norm_cdf((pmath.log(s_now + budgets + 1e-12) - mu) / sd)
    p = np.where(mu > lim, 0.0, p)
    done = (length > 0) & (y_now <= log_targets)
    out = []
    for arr, when_done, when_bad in ((mean, 0.0, cap), (q10, 0.0, cap), (q50, 0.0, cap),
                                     (q90, 0.0, cap), (p, 1.0, 0.0)):
        out.append(np.where(done, when_done, np.where(ok, arr, when_bad)).astype(np.float64))
    del n
    return RemainingWork(*out)


def naive_slope_forecaster() -> WLSForecaster:
    """SPEC §4's naive anchor: extend the log-log slope of the last five observations
    (unweighted least squares, no ridge) to the target."""
    return WLSForecaster(gamma=1.0, ridge=0.0, window=5)


class OnlineWLS:
    """The same fit, updated one observation at a time (O(1) per observation).

    ``update(ln_work, ln_loss)`` decays the weighted sums by gamma and adds the new term;
    :meth:`fit` then equals :meth:`WLSForecaster.fit` on the full history (``window`` is not
    supported online). Vectorised over ``n`` tasks.
    """

    def __init__(self, params: WLSForecaster, n: int) -> None:
        if params.window is not None:
            raise ValueError("OnlineWLS: a windowed fit cannot be updated online")
        self.params = params
        self.sums = np.zeros((6, n))
        self.length = np.zeros(n, dtype=np.int64)

    def update(self, log_work: np.ndarray, log_loss: np.ndarray,
               mask: np.ndarray | None = None) -> None:
        """Add one observation to the tasks selected by ``mask`` (all if None)."""
        x, y = np.asarray(log_work, float), np.asarray(log_loss, float)
        m = np.ones_like(x, dtype=bool) if mask is None else np.asarray(mask, bool)
        g = np.where(m, self.params.gamma, 1.0)
        terms = np.stack([np.ones_like(x), x, y, x * x, x * y, y * y]) * m
        self.sums = self.sums * g + terms
        self.length += m

    def fit(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s0, sx, sy, sxx, sxy, syy = self.sums  # its rows
        return _fit_from_sums(s0, sx, sy, sxx, sxy, syy, self.params)
