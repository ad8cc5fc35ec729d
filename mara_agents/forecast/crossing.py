"""Where each sampled trajectory first reaches its task's target (step 3 of
:mod:`mara_agents.forecast.forecaster`), and how censored samples are extrapolated (step 4).

:func:`crossing_offsets` runs the compiled kernel of :mod:`._crossing_numba` when numba is
installed (the same bits) and :func:`crossing_offsets_numpy`, the reference, otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

MIN_TAIL_SLOPE = 1e-3
"""A censored sample is extrapolated only if its tail slope (ln loss per ln work) is below
minus this."""

_compiled: Callable[..., Any] | None
try:
    from mara_agents.forecast._crossing_numba import crossing_offsets_compiled as _compiled
except ImportError:  # numba not installed: the numpy version
    _compiled = None

CROSSING = "numba" if _compiled is not None else "numpy"
"""The :func:`crossing_offsets` in use: ``"numba"`` (compiled, when numba is installed; the
same bits) or ``"numpy"`` (:func:`crossing_offsets_numpy`, the reference)."""


def crossing_offsets(x: np.ndarray, level: np.ndarray, offsets: np.ndarray,
                     tail_points: int) -> np.ndarray:
    """Log-work offset at which each sampled trajectory first reaches its level.

    Args:
        x: float[m, S, H] trajectories ln l(s_now e^{d_j}) - ln y_now (not normalised).
        level: float[m] ln eps - ln y_now (< 0: the target is not reached yet).
        offsets: float[H] increasing offsets d_1..d_H (> 0); d_0 = 0 with x_0 = 0.
        tail_points: grid intervals used for the tail slope of censored samples (< H).

    Returns:
        float64[m, S] offsets d* > 0: interpolated first crossing inside the horizon,
        extrapolated along a decreasing tail slope beyond it, ``inf`` when the sample's
        tail is not decreasing (never within sight).
    """
    x = np.asarray(x, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.float64)
    h = x.shape[2]
    if not 1 <= tail_points < h:
        raise ValueError(f"tail_points: expected an integer in [1, {h - 1}], got {tail_points}")
    if _compiled is None:
        return crossing_offsets_numpy(x, level, offsets, tail_points)
    return _compiled(np.ascontiguousarray(x), np.ascontiguousarray(level, dtype=np.float64),
                     np.ascontiguousarray(offsets), int(tail_points), MIN_TAIL_SLOPE)


def crossing_offsets_numpy(x: np.ndarray, level: np.ndarray, offsets: np.ndarray,
                           tail_points: int) -> np.ndarray:
    """:func:`crossing_offsets` in numpy (the reference of the compiled kernel, and what
    runs without numba)."""
    x = np.asarray(x, dtype=np.float64)
    lev = np.asarray(level, dtype=np.float64)[:, None]  # [m, 1]
    below = x <= lev[..., None]
    found = below.any(axis=2)
    j = below.argmax(axis=2)  # first grid index at or below the level
    x_j = np.take_along_axis(x, j[..., None], axis=2)[..., 0]
    x_prev = np.where(j > 0, np.take_along_axis(x, np.maximum(j - 1, 0)[..., None],
                                                axis=2)[..., 0], 0.0)
    d_j = offsets[j]
    d_prev = np.where(j > 0, offsets[np.maximum(j - 1, 0)], 0.0)
    denom = np.where(x_prev - x_j > 0, x_prev - x_j, 1.0)
    frac = np.clip((x_prev - lev) / denom, 0.0, 1.0)
    inside = d_prev + frac * (d_j - d_prev)
    slope = (x[..., -1] - x[..., -1 - tail_points]) / (offsets[-1] - offsets[-1 - tail_points])
    decreasing = slope < -MIN_TAIL_SLOPE
    beyond = offsets[-1] + (lev - x[..., -1]) / np.where(decreasing, slope, -1.0)
    return np.where(found, inside, np.where(decreasing, beyond, np.inf))
