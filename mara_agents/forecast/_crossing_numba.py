"""The first crossing of each sampled trajectory (:func:`~mara_agents.forecast.crossing.
crossing_offsets`), compiled (used when numba, the ``fast`` extra, is installed).

The numpy version makes about twenty passes over float[m, S, H] arrays (comparisons,
``argmax``, gathers, ``where``) for every forecast, although most trajectories cross within
a few grid points: for the few tasks one environment forecasts per slot its cost is the
calls, not the arithmetic. This kernel walks each trajectory once and stops at its crossing.
It computes every value with the same float64 operations, in the same order, as the numpy
version (``+ - * /``, comparisons, ``min``/``max``: correctly rounded, and numba without
fast-math fuses no multiply-add), so the two give the same bits;
``tests/mara_agents/forecast/test_forecaster.py`` checks it. Compiled on first use and
cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, error_model="numpy", boundscheck=False)
def crossing_offsets_compiled(x, level, offsets, tail_points,
                              min_tail_slope):  # pragma: no cover - compiled
    """float64[m, S] offsets d* of float64[m, S, H] trajectories ``x`` (see
    :func:`~mara_agents.forecast.crossing.crossing_offsets`; arguments already checked)."""
    m, s, h = x.shape
    out = np.empty((m, s))
    span = offsets[h - 1] - offsets[h - 1 - tail_points]
    for a in range(m):
        lev = level[a]
        for b in range(s):
            j = -1
            for k in range(h):
                if x[a, b, k] <= lev:
                    j = k
                    break
            if j >= 0:  # inside the horizon: interpolate between grid points j - 1 and j
                if j > 0:
                    x_prev = x[a, b, j - 1]
                    d_prev = offsets[j - 1]
                else:
                    x_prev = 0.0
                    d_prev = 0.0
                diff = x_prev - x[a, b, j]
                frac = (x_prev - lev) / (diff if diff > 0 else 1.0)
                frac = min(max(frac, 0.0), 1.0)
                out[a, b] = d_prev + frac * (offsets[j] - d_prev)
            else:  # censored: extrapolate along a decreasing tail, else never
                slope = (x[a, b, h - 1] - x[a, b, h - 1 - tail_points]) / span
                if slope < -min_tail_slope:
                    out[a, b] = offsets[h - 1] + (lev - x[a, b, h - 1]) / slope
                else:
                    out[a, b] = np.inf
    return out
