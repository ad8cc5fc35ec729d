"""The elementwise steps of :class:`~mara_agents.forecast.numpy_sampler.NumpySampler`,
compiled (used when numba, the ``fast`` extra, is installed).

A velocity evaluation is three small matrix products (BLAS, near the core's peak) and, around
them, elementwise passes that numpy makes one at a time over float32[m, S, hidden] arrays:
the bias of every task broadcast over its S samples, ``u tanh(u)`` and its sum for SiLU, and
the Euler step's bias, scale and update. On the few dozen tasks of one environment those
passes took about as long as the products. These kernels make them in one loop each, with
the same float32 operations in the same order (each ``+`` and ``*`` rounded on its own:
numba without fast-math fuses no multiply-add), so the samples keep their bits; ``tanh``
stays numpy's. ``tests/mara_agents/forecast/test_forecaster.py`` compares the two paths bit
for bit. Compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

from numba import njit

_JIT = {"cache": True, "error_model": "numpy", "boundscheck": False}


@njit(**_JIT)
def add_bias(a, bias, layer):  # pragma: no cover - compiled
    """``a[i, j, :] += bias[i, layer, :]`` in place (float32[m, S, H], float32[m, L, H])."""
    m, s, h = a.shape
    for i in range(m):
        for j in range(s):
            for k in range(h):
                a[i, j, k] += bias[i, layer, k]


@njit(**_JIT)
def silu_from_tanh(u, t):  # pragma: no cover - compiled
    """``u += u * t`` in place, ``t = tanh(u)``: ``silu(2 u)`` as ``_silu_half`` computes it
    (``t *= u; u += t``)."""
    m, s, h = u.shape
    for i in range(m):
        for j in range(s):
            for k in range(h):
                u[i, j, k] = u[i, j, k] + t[i, j, k] * u[i, j, k]


@njit(**_JIT)
def euler_step(x, v, out_bias, dt):  # pragma: no cover - compiled
    """``x += (v + out_bias) * dt`` in place, rounded as numpy's ``v += out_bias; v *= dt;
    x += v`` (float32[m, S, H], float32[H], float32)."""
    m, s, h = x.shape
    for i in range(m):
        for j in range(s):
            for k in range(h):
                x[i, j, k] = x[i, j, k] + (v[i, j, k] + out_bias[k]) * dt
