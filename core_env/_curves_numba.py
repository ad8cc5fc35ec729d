"""Compiled tabulation of the synthetic curve families (used when numba is installed).

:func:`core_env.curves.evaluate_curves` holds the numpy implementation, the reference: the
kernel here computes, task by task and grid point by grid point, the same IEEE-754 float64
operations in the same order (fdlibm's ``exp``/``log``/``log1p``/``sigmoid``/``softplus`` of
:mod:`core_env._pmath_numba`, the float32 parameters widened to float64, the tables rounded
once to float32 when stored), so it gives the same bits. numba compiles without fast-math,
so LLVM neither reorders the operations nor fuses a multiply and an add into an FMA.
``tests/core_env/test_curves_kernel.py`` compares the two bit for bit.

The kernel is compiled on first use and cached on disk (``cache=True``: numba's
``__pycache__`` next to this file, or ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core_env._jit_options import JitOptions
from core_env._pmath_numba import (
    exp_scalar,
    log1p_scalar,
    log_scalar,
    sigmoid_scalar,
    softplus_scalar,
)

_JIT: JitOptions = {"cache": True, "error_model": "numpy", "boundscheck": False}

# --- the tabulation ---------------------------------------------------------------------

SUPERVISED, RL, VISION = 0, 1, 2
"""Kind codes of the synthetic families (any other code: a task the kernel leaves alone)."""

_INV_DROP_WIDTH = 1.0 / 0.03
"""The vision drops' sigmoid slope, the same double as the reference's ``(1.0 / 0.03)``."""


@njit(**_JIT)
def tabulate(entry, kind, n_stages, noise_sigma, white_scale, log_scale, k, shape, l0,
             floor, stage_at, stage_width, stage_weight, knots, white, bump, grid,
             knot_left, knot_frac, true_ll, obs_ll):
    """Fill rows of ``true_ll`` and ``obs_ll`` (float32[n, G]) of the tasks of synthetic
    families.

    Per mix entry e: ``kind[e]`` (:data:`SUPERVISED`, :data:`RL`, :data:`VISION`, else
    skipped), ``n_stages[e]`` (the entry's largest number of rl stages / vision drops),
    ``noise_sigma[e]`` and ``white_scale[e]`` (``white_sigma * sqrt(12)``). Per task: the
    fields of :class:`core_env.curves.CurveParams` (float32 as drawn). ``grid``,
    ``knot_left`` and ``knot_frac``: the log-work grid and each grid point's left noise knot
    and fraction of the way to the next one.

    Each loop over the grid points is branch-free in its family and shape (so LLVM can
    vectorise it; lane by lane, the same IEEE operations), and the stages are applied one
    after the other over the whole row, as the reference does.
    """
    n = entry.shape[0]
    n_grid = grid.shape[0]
    n_entries = kind.shape[0]
    lu = np.empty(n_grid)
    g = np.empty(n_grid)
    for i in range(n):
        e = entry[i]
        if e < 0 or e >= n_entries:
            continue
        fam = kind[e]
        if fam != SUPERVISED and fam != RL and fam != VISION:
            continue
        ls = np.float64(log_scale[i])
        for j in range(n_grid):
            lu[j] = grid[j] - ls
        kk = np.float64(k[i])
        neg_k = -kk
        if fam == SUPERVISED:
            sh = shape[i]
            if sh == 0:  # pow3: (1 + u)^-k
                for j in range(n_grid):
                    g[j] = exp_scalar(neg_k * softplus_scalar(lu[j]))
            elif sh == 1:  # weibull: exp(-u^k)
                for j in range(n_grid):
                    g[j] = exp_scalar(-exp_scalar(kk * lu[j]))
            elif sh == 2:  # mmf: 1 / (1 + u^k)
                for j in range(n_grid):
                    g[j] = sigmoid_scalar(neg_k * lu[j])
            else:  # ilog: (1 + ln(1 + u))^-k
                for j in range(n_grid):
                    g[j] = exp_scalar(neg_k * log1p_scalar(softplus_scalar(lu[j])))
        elif fam == RL:  # 1 - sum_s w_s sigmoid((log u - c_s) / width_s), at least 0
            for j in range(n_grid):
                g[j] = 1.0
            for s in range(n_stages[e]):
                w_s = np.float64(stage_weight[i, s])
                at_s = np.float64(stage_at[i, s])
                width_s = np.float64(stage_width[i, s])
                for j in range(n_grid):
                    g[j] -= w_s * sigmoid_scalar((lu[j] - at_s) / width_s)
            for j in range(n_grid):
                if g[j] < 0.0:  # np.maximum(g, 0.0) (nan stays nan)
                    g[j] = 0.0
        else:  # vision: (1 + u)^-k times a drop factor after each learning-rate step
            for j in range(n_grid):
                g[j] = exp_scalar(neg_k * softplus_scalar(lu[j]))
            for s in range(n_stages[e]):
                at_s = np.float64(stage_at[i, s])
                keep_s = 1.0 - np.float64(stage_weight[i, s])
                for j in range(n_grid):
                    step = sigmoid_scalar((lu[j] - at_s) * _INV_DROP_WIDTH)
                    g[j] *= 1.0 - keep_s * step
        lo0 = np.float64(l0[i])
        fl = np.float64(floor[i])
        span = lo0 - fl
        sigma = noise_sigma[e]
        wscale = white_scale[e]
        bumpy = fam == RL and bump[i, 2] > 0
        b0 = np.float64(bump[i, 0])
        b1 = np.float64(bump[i, 1])
        b2 = np.float64(bump[i, 2])
        for j in range(n_grid):
            curve = log_scalar(fl + span * g[j])
            kl = knot_left[j]
            left = np.float64(knots[i, kl]) * sigma
            right = np.float64(knots[i, kl + 1]) * sigma
            noise = left + (right - left) * knot_frac[j]
            w = np.float64(white[i, j]) * wscale
            if fam == RL:  # heteroscedastic: largest while the curve learns fastest
                w *= 0.3 + 2.8 * g[j] * (1.0 - g[j])
                if bumpy:
                    z = (grid[j] - b0) / b1
                    noise += b2 * exp_scalar(-0.5 * (z * z))
            true_ll[i, j] = np.float32(curve)
            obs_ll[i, j] = np.float32(curve + noise + w)
