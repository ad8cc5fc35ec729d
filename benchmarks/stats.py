"""Statistics for benchmark tables: means with Student-t confidence intervals (SciPy).

Completion rates, shares of the clairvoyant bound and paired differences of rates live in
bounded ranges ([0, 1], [0, 1] and [-1, 1]); their t-intervals are clipped to the range
(``bounds=``), so a table never shows a rate interval beyond 0% or 100%. With few seeds a
clipped interval is still a t-interval inside the range, not an exact one: report enough
seeds (the suites use 10 to 50)::

    mean, low, high = mean_ci(completion_rates, bounds=RATE)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

RATE = (0.0, 1.0)
"""The range of a rate (completion rate, share of the bound)."""
DIFFERENCE = (-1.0, 1.0)
"""The range of a difference of two rates."""


def t_quantile(p: float, df: int) -> float:
    """Quantile ``p`` of Student's t distribution with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"df: expected >= 1, got {df}")
    return float(stats.t.ppf(p, df))


def mean_ci(values: Sequence[float] | np.ndarray, level: float = 0.95,
            bounds: tuple[float, float] | None = None) -> tuple[float, float, float]:
    """Mean and the lower/upper bounds of its ``level`` Student-t confidence interval,
    clipped to ``bounds`` if given.

    With one value the interval is the point itself; an empty sequence raises ValueError.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci: no values")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, mean, mean
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(0.5 + level / 2, n - 1) * math.sqrt(var / n)
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return mean, lo, hi
