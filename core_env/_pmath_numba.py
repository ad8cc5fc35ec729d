"""Compiled kernels of :mod:`core_env.pmath` (used when numba is installed).

Each function is fdlibm's algorithm on one float64, written with the same IEEE operations in
the same order as the numpy kernels of :mod:`core_env.pmath` (numba compiles without
fast-math, so LLVM neither reorders them nor fuses a multiply and an add into an FMA), and
the same special cases; ``tests/core_env/test_pmath.py`` checks the two bit for bit. The
scalar functions are plain Python too (``exp_scalar.py_func``); the ufunc :func:`kernel` at
the bottom is what :mod:`core_env.pmath` calls.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, vectorize

from core_env._fdlibm import (
    EXP_MAX,
    EXP_MIN,
    INV_LN2,
    LG1,
    LG2,
    LG3,
    LG4,
    LG5,
    LG6,
    LG7,
    LN2_HI,
    LN2_LO,
    P1,
    P2,
    P3,
    P4,
    P5,
    SQRT_HALF,
)
from core_env._jit_options import JitOptions

# division by zero gives inf, never raises
_JIT: JitOptions = {"cache": True, "error_model": "numpy"}
# inlined into the callers' loops
_INLINE: JitOptions = {**_JIT, "boundscheck": False, "inline": "always"}


# fdlibm without C library calls: np.rint(t) is (t + 1.5 * 2**52) - 1.5 * 2**52 (round half
# to even, exact for |t| < 2**51; here |t| < 1025), math.ldexp(y, n) is y times 2**n from a
# table (one correctly rounded multiplication, as ldexp rounds once; n is in [-1022, 1024]
# for x in [EXP_MIN, EXP_MAX], and 2**1024 is applied as 2**1023 then 2, the first step
# exact), and math.frexp(x) reads the exponent bits (of x times 2**54, exact, for a
# subnormal x). The library calls cost most of the functions' time and keep LLVM from
# inlining and vectorising the loops that call them (the curve tabulation, the dynamics
# kernels); the results are the same bits (tests/core_env/test_pmath.py and
# test_curves_kernel.py compare them with the numpy kernels).

_ROUND = 6755399441055744.0  # 1.5 * 2**52
_POW2 = np.array([math.ldexp(1.0, n) for n in range(-1022, 1024)], dtype=np.float64)
"""2**n for n in [-1022, 1023], at index n + 1022."""
_TINY = 2.2250738585072014e-308  # the least normal double
_TWO54 = 18014398509481984.0  # 2**54
_MANT = 0x000FFFFFFFFFFFFF
_HALF_EXP = 1022 << 52  # exponent bits of [0.5, 1)



@njit(**_INLINE)
def exp_scalar(x: float) -> float:
    if x != x:
        return x
    if x > EXP_MAX:
        return math.inf
    if x < EXP_MIN:
        return 0.0
    n = (x * INV_LN2 + _ROUND) - _ROUND
    hi = x - n * LN2_HI
    lo = n * LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    k = int(n)
    if k > 1023:
        return (y * _POW2[1023 + 1022]) * 2.0
    return y * _POW2[k + 1022]


@njit(**_INLINE)
def log_scalar(x: float) -> float:
    if not (x > 0.0 and x < math.inf):
        if x == 0.0:
            return -math.inf
        if x == math.inf:
            return math.inf
        return math.nan
    shift = 0
    if x < _TINY:  # subnormal: scaled by 2**54 (exact) into the normal range
        x = x * _TWO54
        shift = 54
    bits = np.float64(x).view(np.int64)
    e = (bits >> 52) - 1022 - shift  # frexp: x = m 2**e, m in [0.5, 1)
    m = np.int64((bits & _MANT) | _HALF_EXP).view(np.float64)
    if m < SQRT_HALF:
        m = m + m
        e -= 1
    k = float(e)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7))) + w * (LG2 + w * (LG4 + w * LG6))
    hfsq = 0.5 * f * f
    return k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)


@njit(**_INLINE)
def log1p_scalar(x: float) -> float:
    u = 1.0 + x
    d = u - 1.0
    if d == 0.0:
        return x
    if u == math.inf:
        return math.inf
    return log_scalar(u) * (x / d)


@njit(**_INLINE)
def expm1_scalar(x: float) -> float:
    u = exp_scalar(x)
    if u == 1.0:
        return x
    um1 = u - 1.0
    if um1 == -1.0:
        return -1.0
    if u == math.inf:
        return math.inf
    return um1 * (x / log_scalar(u))


@njit(**_INLINE)
def pow_scalar(x: float, y: float) -> float:
    if x != x or y != y:
        return math.nan
    if y == 0.0:
        return 1.0
    if x < 0.0:
        return math.nan
    if x == 0.0:
        return 0.0 if y > 0.0 else math.inf
    return exp_scalar(y * log_scalar(x))


@njit(**_INLINE)
def sigmoid_scalar(x: float) -> float:
    e = exp_scalar(-abs(x))
    if x >= 0.0:
        return 1.0 / (1.0 + e)
    return e / (1.0 + e)


@njit(**_INLINE)
def softplus_scalar(x: float) -> float:
    return max(x, 0.0) + log1p_scalar(exp_scalar(-abs(x)))


OPS = ("exp", "log", "log1p", "expm1", "pow", "sigmoid", "softplus")
"""The functions of :func:`kernel`, by op code (their index)."""


@vectorize(["float64(int64, float64, float64)"], cache=True)
def kernel(op, x, y):
    """``OPS[op](x)`` (``pow(x, y)`` for op 4; y is ignored otherwise). One ufunc for all
    seven functions: loading each compiled ufunc from numba's cache costs ~40 ms per process,
    one costs that once."""
    if op == 0:
        return exp_scalar(x)
    if op == 1:
        return log_scalar(x)
    if op == 2:
        return log1p_scalar(x)
    if op == 3:
        return expm1_scalar(x)
    if op == 4:
        return pow_scalar(x, y)
    if op == 5:
        return sigmoid_scalar(x)
    return softplus_scalar(x)
