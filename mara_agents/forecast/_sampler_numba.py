"""The elementwise steps of :class:`~mara_agents.forecast.numpy_sampler.NumpySampler`,
compiled (used when numba, the ``fast`` extra, is installed).

A velocity evaluation is three small matrix products (BLAS, near the core's peak) and, around
them, elementwise passes that numpy makes one at a time over float32[m, S, hidden] arrays:
the bias of every task broadcast over its S samples, ``u tanh(u)`` and its sum for SiLU, and
the Euler step's bias, scale and update. On the few dozen tasks of one environment those
passes took about as long as the products. These kernels make them in one loop each, with
the same float32 operations in the same order (each ``+``, ``*`` and ``/`` rounded on its
own: numba without fast-math fuses no multiply-add), so the samples keep their bits; the
loops have no calls, so LLVM vectorises them. ``tanh`` is
:func:`~mara_agents.forecast._tanh.tanh_rational`'s rational function, written out
here in the same order. ``tests/mara_agents/forecast/test_forecaster.py`` compares the two
paths bit for bit. Compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

from numba import njit

from core_env._jit_options import JitOptions
from mara_agents.forecast._tanh import TANH_CLAMP, TANH_DEN, TANH_NUM, TANH_TINY

_JIT: JitOptions = {"cache": True, "error_model": "numpy", "boundscheck": False}
_INLINE: JitOptions = {**_JIT, "inline": "always"}

_C, _TINY = TANH_CLAMP, TANH_TINY
_A1, _A3, _A5, _A7, _A9, _A11, _A13 = TANH_NUM
_B0, _B2, _B4, _B6 = TANH_DEN


@njit(**_INLINE)
def _tanh(x):  # pragma: no cover - compiled
    """``tanh_rational`` of one float32, the same operations in the same order."""
    c = min(max(x, -_C), _C)
    x2 = c * c
    p = x2 * _A13 + _A11
    p = x2 * p + _A9
    p = x2 * p + _A7
    p = x2 * p + _A5
    p = x2 * p + _A3
    p = x2 * p + _A1
    p = c * p
    q = x2 * _B6 + _B4
    q = x2 * q + _B2
    q = x2 * q + _B0
    r = p / q
    return r if abs(x) >= _TINY else x  # NaN stays NaN


@njit(**_JIT)
def bias_silu(a, bias, layer, out):  # pragma: no cover - compiled
    """``u = a + bias[:, layer]`` (broadcast over samples), then ``out = u + u tanh(u)``
    (``silu(2 u)``; float32[m, S, H], float32[m, L, H]). ``out`` may be ``a``, but LLVM
    vectorises the loop only for distinct arrays (its overlap check fails otherwise)."""
    m, s, h = a.shape
    for i in range(m):
        for j in range(s):
            for k in range(h):
                u = a[i, j, k] + bias[i, layer, k]
                out[i, j, k] = u + _tanh(u) * u


@njit(**_JIT)
def silu_half(u):  # pragma: no cover - compiled
    """``u = u + u tanh(u)`` in place on a flat float32 array."""
    for i in range(u.shape[0]):
        x = u[i]
        u[i] = x + _tanh(x) * x


@njit(**_JIT)
def euler_step(x, v, out_bias, dt):  # pragma: no cover - compiled
    """``x += (v + out_bias) * dt`` in place, rounded as numpy's ``v += out_bias; v *= dt;
    x += v`` (float32[m, S, H], float32[H], float32)."""
    m, s, h = x.shape
    for i in range(m):
        for j in range(s):
            for k in range(h):
                x[i, j, k] = x[i, j, k] + (v[i, j, k] + out_bias[k]) * dt
