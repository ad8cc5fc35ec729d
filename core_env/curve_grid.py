"""The log-work grid every loss curve is tabulated on, and reading curves off it.

Every curve is a row of :data:`GRID_SIZE` log-losses at the points of :data:`LOG_WORK_GRID`
(ln cumulative work from :data:`WORK_MIN` to :data:`WORK_MAX`, evenly spaced), read by linear
interpolation in (log work, log loss) and flat outside the grid (:func:`grid_position`,
:func:`interp_log_loss`); :func:`first_crossing` finds where a tabulated curve first reaches a
level. :mod:`core_env.curves` draws the curves (and re-exports these names)::

    i0, frac = grid_position(np.log([1.0, 30.0]))
"""

from __future__ import annotations

import numpy as np

from core_env import pmath

WORK_MIN = 0.25
"""First grid point (node-slots); the curve is flat below it."""

WORK_MAX = 4096.0
"""Last grid point (node-slots); the curve is flat above it."""

GRID_SIZE = 64
"""Number of grid points."""

LOG_WORK_GRID = np.linspace(pmath.log(WORK_MIN), pmath.log(WORK_MAX), GRID_SIZE)
"""float64[G]: the log-work grid."""

GRID_STEP = float(LOG_WORK_GRID[1] - LOG_WORK_GRID[0])
"""Spacing of the log-work grid."""


def grid_position(log_work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left grid index (int64, in [0, G-2]) and interpolation weight in [0, 1] of each log work."""
    x = (np.asarray(log_work) - LOG_WORK_GRID[0]) * (1.0 / GRID_STEP)
    x = np.clip(x, 0.0, GRID_SIZE - 1.0)
    i0 = np.minimum(x.astype(np.int64), GRID_SIZE - 2)
    return i0, x - i0


def interp_log_loss(table: np.ndarray, log_work: np.ndarray) -> np.ndarray:
    """Evaluate tabulated curves ``table[..., G]`` at ``log_work[...]`` (same leading shape)."""
    i0, frac = grid_position(log_work)
    lo = np.take_along_axis(table, i0[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(table, i0[..., None] + 1, axis=-1)[..., 0]
    return lo + (hi - lo) * frac


def first_crossing(table: np.ndarray, log_level: np.ndarray,
                   log_from: np.ndarray | None = None) -> np.ndarray:
    """Least work at which a tabulated curve is at or below a level (inf if never).

    Args:
        table: float[n, G] log-loss tables.
        log_level: float[n] log-loss levels.
        log_from: float[n] ln work to search from (default: the start of the grid); the
            result is then the least work >= exp(log_from).

    Returns:
        float64[n] work (not log work), exact for the piecewise-linear curve: the start
        (``WORK_MIN`` or exp(log_from)) if already at or below the level there, else the
        linear interpolation inside the first grid interval that crosses.
    """
    table = np.asarray(table, dtype=np.float64)
    n = table.shape[0]
    rows = np.arange(n)
    level = np.asarray(log_level, dtype=np.float64)
    if log_from is None:
        start_x = np.full(n, LOG_WORK_GRID[0])
    else:
        start_x = np.clip(np.asarray(log_from, dtype=np.float64), LOG_WORK_GRID[0],
                          LOG_WORK_GRID[-1])
    i0, frac0 = grid_position(start_x)
    y0 = table[rows, i0] + (table[rows, i0 + 1] - table[rows, i0]) * frac0
    # first grid point strictly after the start that is at or below the level
    below = (table <= level[:, None]) & (LOG_WORK_GRID[None, :] > start_x[:, None])
    found = below.any(axis=1)
    i = np.argmax(below, axis=1)
    x_prev = np.maximum(LOG_WORK_GRID[np.maximum(i - 1, 0)], start_x)
    f_prev = np.where(LOG_WORK_GRID[np.maximum(i - 1, 0)] >= start_x,
                      table[rows, np.maximum(i - 1, 0)], y0)
    f1 = table[rows, i]
    denom = np.where(f_prev - f1 > 0, f_prev - f1, 1.0)
    frac = np.clip((f_prev - level) / denom, 0.0, 1.0)
    x = x_prev + frac * (LOG_WORK_GRID[i] - x_prev)
    out = np.where(found, pmath.exp(x), np.inf)
    already = y0 <= level
    if log_from is None:
        return np.where(already, WORK_MIN, out)
    return np.where(already, pmath.exp(np.asarray(log_from, dtype=np.float64)), out)
