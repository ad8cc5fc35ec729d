"""Calibration and validation metrics of the FM forecaster (used by its training).

:func:`fit_spread` fits the sampler's temperature on cases the network was not trained on
(the validation cases: the synthetic mix and, with a real weight, the banks' calibration
split), pooled or for the worst (family, prefix-third) group.
"""

from __future__ import annotations

import math

import numpy as np

from core_env.forecast.cases import ForecastCases
from mara_agents.forecast.forecaster import FlowMatchingForecaster, widen

SPREAD_GRID = np.exp(np.linspace(math.log(0.5), math.log(4.0), 64))
"""Candidate calibration temperatures."""


def evaluate(fm: FlowMatchingForecaster, cases: ForecastCases) -> dict[str, float]:
    """Median |log ratio|, median relative error and coverage of ``fm`` on the cases with a
    finite positive truth."""
    rw = fm.predict_batch(cases.batch, cases.log_targets, np.full(cases.batch.size, 1e9))
    return metrics(rw.q10, rw.q50, rw.q90, cases.remaining)


def metrics(q10: np.ndarray, q50: np.ndarray, q90: np.ndarray, truth: np.ndarray
            ) -> dict[str, float]:
    """The benchmark's metrics over cases with a finite positive truth."""
    ok = np.isfinite(truth) & (truth > 0)
    t = truth[ok]
    return {"median_abs_log_ratio": float(np.median(np.abs(np.log(np.maximum(q50[ok], 1e-9)
                                                                    / t)))),
            "median_rel_err": float(np.median(np.abs(q50[ok] - t) / t)),
            "coverage": float(np.mean((q10[ok] <= t) & (t <= q90[ok])))}


def case_groups(cases: ForecastCases) -> np.ndarray:
    """int64[n] group of each case for calibration: family * 3 + the third of the observed
    prefix (work done / work to target below 0.15, below 0.3, or above)."""
    x_now, _ = cases.batch.last()
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.exp(x_now) / cases.required
    return cases.family.astype(np.int64) * 3 + np.searchsorted([0.15, 0.3], frac, side="right")


def fit_spread(fm: FlowMatchingForecaster, cases: ForecastCases, target: float = 0.8,
               by_group: bool = False, min_group: int = 50) -> tuple[float, float]:
    """The temperature of :data:`SPREAD_GRID` whose [q10, q90] coverage on the cases (finite
    positive truth, not yet reached) is closest to ``target``: pooled, or (``by_group``)
    the one whose worst :func:`case_groups` group (of at least ``min_group`` cases) is
    closest.

    Returns:
        ``(spread, coverage)``: the coverage is the pooled one.
    """
    _, y_now = cases.batch.last()
    ok = (np.isfinite(cases.remaining) & (cases.remaining > 0) & (cases.batch.length > 0)
          & (y_now > cases.log_targets))
    rows = np.flatnonzero(ok)
    raw = fm.sample_remaining(cases.batch, cases.log_targets, rows)
    truth = cases.remaining[rows]
    groups = case_groups(cases)[rows] if by_group else np.zeros(rows.size, dtype=np.int64)
    ids, counts = np.unique(groups, return_counts=True)
    ids = ids[counts >= min(min_group, int(counts.max()))]
    best = (1.0, -1.0, np.inf)
    for s in SPREAD_GRID:
        q10, q90 = np.quantile(widen(raw, float(s)), (0.1, 0.9), axis=1)
        inside = (q10 <= truth) & (truth <= q90)
        worst = max(abs(float(np.mean(inside[groups == g])) - target) for g in ids)
        if worst < best[2]:
            best = (float(s), float(np.mean(inside)), worst)
    return best[0], best[1]
