"""Portable elementwise math: the same bits on every machine, at every array length.

numpy's transcendental ufuncs (``exp``, ``log``, ``log1p``, ``power``, ``tanh``, ...) round
differently on different CPUs and array lengths, and one ULP can flip a task's success, so
:mod:`core_env` computes every quantity that decides an outcome with these functions instead
(``tests/core_env/test_pmath.py`` scans the source for platform math). They are fdlibm's
algorithms in float64 with IEEE-754's correctly rounded operations only, each rounded on its
own (no FMA): ``exp`` and ``log`` within 1 ULP, ``log1p`` and ``expm1`` within 2, ``pow``
within about ``|y ln x|`` ULP; :func:`rowsum` sums in one fixed order and :func:`interp`
never fuses a multiply-add. Two backends give the same bits: compiled ufuncs
(:mod:`core_env._pmath_numba`, the ``fast`` extra) and numpy kernels
(``CORE_ENV_PMATH=numpy`` forces them); :data:`BACKEND` says which runs. Algorithms,
accuracy and cost: ``docs/reliability.md``, "Portable results"::

    from core_env import pmath
    pmath.exp(np.array([0.0, 1.0]))   # array([1.        , 2.71828183]) on every machine
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from types import SimpleNamespace
from typing import overload

import numpy as np

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

_F64 = np.float64

_CHUNK = 4096
"""The numpy kernels evaluate larger arrays in chunks of this many elements, so that their
temporaries stay in the CPU cache (whole-array temporaries are several times slower)."""


# --- numpy kernels: the same operations as core_env._pmath_numba, on arrays --------------

def _exp_kernel(x: np.ndarray) -> np.ndarray:
    """e**x for float64[n] in [EXP_MIN, EXP_MAX]."""
    n = np.rint(x * INV_LN2)
    hi = x - n * LN2_HI
    lo = n * LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    return np.ldexp(y, n.astype(np.int32))  # exact: y 2**n


def _log_kernel(x: np.ndarray) -> np.ndarray:
    """ln x for positive finite float64[n]."""
    m, e = np.frexp(x)  # x = m 2**e, m in [0.5, 1), exact
    low = m < SQRT_HALF
    m = m + m * low  # m in [sqrt(2)/2, sqrt(2)), exact
    k = (e - low).astype(_F64)
    f = m - 1.0  # exact (Sterbenz)
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7))) + w * (LG2 + w * (LG4 + w * LG6))
    hfsq = 0.5 * f * f
    return k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)


def _apply(kernel, x: np.ndarray) -> np.ndarray:
    """``kernel`` over a float64 array of any shape, in cache-sized chunks."""
    if x.size <= _CHUNK:
        return kernel(x)
    flat = x.reshape(-1)
    out = np.empty(flat.shape, dtype=_F64)
    for i in range(0, flat.shape[0], _CHUNK):
        out[i:i + _CHUNK] = kernel(flat[i:i + _CHUNK])
    return out.reshape(x.shape)


def _out(a: np.ndarray) -> np.ndarray | np.float64:
    """A 0-d result as a numpy scalar (as a ufunc returns it), anything else as the array."""
    return a[()] if a.ndim == 0 else a


def _np_exp(x):
    x = np.asarray(x, dtype=_F64)
    if x.size == 0 or (x.min() >= EXP_MIN and x.max() <= EXP_MAX):  # False for nan
        return _out(_apply(_exp_kernel, x))
    y = _apply(_exp_kernel, np.minimum(np.maximum(np.nan_to_num(x), EXP_MIN), EXP_MAX))
    y = np.where(x > EXP_MAX, np.inf, np.where(x < EXP_MIN, 0.0, y))
    return _out(np.where(np.isnan(x), np.nan, y))


def _np_log(x):
    x = np.asarray(x, dtype=_F64)
    if x.size == 0 or (x.min() > 0 and x.max() < np.inf):  # False for nan
        return _out(_apply(_log_kernel, x))
    ok = (x > 0) & (x < np.inf)
    y = _apply(_log_kernel, np.where(ok, x, 1.0))
    return _out(np.where(ok, y, np.where(x == 0, -np.inf,
                                         np.where(x == np.inf, np.inf, np.nan))))


def _np_log1p(x):
    x = np.asarray(x, dtype=_F64)
    u = 1.0 + x
    d = u - 1.0
    exact = d == 0.0
    inf = u == np.inf
    y = np.asarray(_np_log(u)) * (np.where(inf, 1.0, x) / np.where(exact | inf, 1.0, d))
    return _out(np.where(exact, x, y))


def _np_expm1(x):
    x = np.asarray(x, dtype=_F64)
    u = np.asarray(_np_exp(x))
    um1 = u - 1.0
    special = (u == 1.0) | (u == np.inf) | (u == 0.0)
    y = um1 * (x / np.asarray(_np_log(np.where(special, 2.0, u))))
    return _out(np.where(u == 1.0, x, np.where(um1 == -1.0, -1.0,
                                               np.where(u == np.inf, np.inf, y))))


def _np_pow(x, y):
    x, y = np.broadcast_arrays(np.asarray(x, dtype=_F64), np.asarray(y, dtype=_F64))
    pos = (x > 0) & (y != 0)
    r = np.asarray(_np_exp(y * np.asarray(_np_log(np.where(pos, x, 1.0)))))
    zero = np.where(y > 0, 0.0, np.inf)  # 0**y
    r = np.where(pos, r, np.where(y == 0, 1.0, np.where(x == 0, zero, np.nan)))
    return _out(np.where(np.isnan(x) | np.isnan(y), np.nan, r))


def _np_sigmoid(x):
    x = np.asarray(x, dtype=_F64)
    e = np.asarray(_np_exp(-np.abs(x)))
    return _out(np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))


def _np_softplus(x):
    x = np.asarray(x, dtype=_F64)
    return _out(np.maximum(x, 0.0) + np.asarray(_np_log1p(np.asarray(_np_exp(-np.abs(x))))))


NUMPY_KERNELS = SimpleNamespace(exp=_np_exp, log=_np_log, log1p=_np_log1p, expm1=_np_expm1,
                                pow=_np_pow, sigmoid=_np_sigmoid, softplus=_np_softplus)
"""The numpy backend (always available; the tests compare the compiled one with it)."""


def _compiled() -> SimpleNamespace | None:
    """The numba backend, or None if numba is missing, disabled or not wanted."""
    if os.environ.get("CORE_ENV_PMATH", "").lower() == "numpy":
        return None
    try:
        import numba
    except ImportError:
        return None
    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]  # numba's stubs omit it
        return None
    try:
        from core_env import _pmath_numba
    except Exception as e:  # e.g. no writable cache directory, an LLVM that cannot build
        warnings.warn(f"core_env.pmath: numba is installed but its kernel could not be "
                      f"built ({type(e).__name__}: {e}); using the numpy kernels (the same "
                      f"results, slower)", stacklevel=2)
        return None
    k = _pmath_numba.kernel
    return SimpleNamespace(exp=lambda x: k(0, x, 0.0), log=lambda x: k(1, x, 0.0),
                           log1p=lambda x: k(2, x, 0.0), expm1=lambda x: k(3, x, 0.0),
                           pow=lambda x, y: k(4, x, y), sigmoid=lambda x: k(5, x, 0.0),
                           softplus=lambda x: k(6, x, 0.0))


_K = _compiled() or NUMPY_KERNELS
BACKEND = "numpy" if _K is NUMPY_KERNELS else "numba"
"""``"numba"`` (compiled ufuncs) or ``"numpy"``; both give the same bits."""


# --- the API ----------------------------------------------------------------------------
# A float gives a numpy float64 and an array (or a sequence of floats) an array, as a ufunc
# does; the overloads say so to type checkers (a 0-d array, typed as an array, also gives a
# numpy scalar).

@overload
def exp(x: float) -> np.float64: ...
@overload
def exp(x: np.ndarray | Sequence[float]) -> np.ndarray: ...
def exp(x: np.ndarray | Sequence[float] | float) -> np.ndarray | np.float64:
    """e**x, float64 (inf above 709.78, 0.0 below -708.39, nan for nan)."""
    return _K.exp(x)


@overload
def log(x: float) -> np.float64: ...
@overload
def log(x: np.ndarray | Sequence[float]) -> np.ndarray: ...
def log(x: np.ndarray | Sequence[float] | float) -> np.ndarray | np.float64:
    """Natural logarithm, float64 (-inf at 0, nan below 0 or for nan, inf at inf)."""
    return _K.log(x)


@overload
def log1p(x: float) -> np.float64: ...
@overload
def log1p(x: np.ndarray | Sequence[float]) -> np.ndarray: ...
def log1p(x: np.ndarray | Sequence[float] | float) -> np.ndarray | np.float64:
    """ln(1 + x), float64, accurate for small x (Goldberg 1991, Theorem 4)."""
    return _K.log1p(x)


@overload
def expm1(x: float) -> np.float64: ...
@overload
def expm1(x: np.ndarray | Sequence[float]) -> np.ndarray: ...
def expm1(x: np.ndarray | Sequence[float] | float) -> np.ndarray | np.float64:
    """e**x - 1, float64, accurate for small x (Kahan's correction)."""
    return _K.expm1(x)


@overload
def pow(x: float, y: float) -> np.float64: ...
@overload
def pow(x: np.ndarray, y: np.ndarray | float) -> np.ndarray: ...
@overload
def pow(x: float, y: np.ndarray) -> np.ndarray: ...
def pow(x: np.ndarray | float, y: np.ndarray | float) -> np.ndarray | np.float64:
    """x**y for x >= 0, float64: ``exp(y ln x)``; x**0 is 1, 0**y is 0 for y > 0 and inf for
    y < 0; nan for x < 0."""
    return _K.pow(x, y)


@overload
def sigmoid(x: float) -> np.float64: ...
@overload
def sigmoid(x: np.ndarray | Sequence[float]) -> np.ndarray: ...
def sigmoid(x: np.ndarray | Sequence[float] | float) -> np.ndarray | np.float64:
    """1 / (1 + e**-x), float64, without overflow."""
    return _K.sigmoid(x)


@overload
def softplus(x: float) -> np.float64: ...
@overload
def softplus(x: np.ndarray | Sequence[float]) -> np.ndarray: ...
def softplus(x: np.ndarray | Sequence[float] | float) -> np.ndarray | np.float64:
    """ln(1 + e**x), float64, without overflow."""
    return _K.softplus(x)


_LOG_WHOLE = _log_kernel(np.arange(1, 4097, dtype=_F64))
"""ln k for k = 1 .. 4096, equal to :func:`log` of each (a table lookup is cheaper)."""


@overload
def log_whole(k: int) -> np.float64: ...
@overload
def log_whole(k: np.ndarray) -> np.ndarray: ...
def log_whole(k: np.ndarray | int) -> np.ndarray | np.float64:
    """ln k for whole numbers k in [1, 4096] (node counts), equal to ``log(k)``."""
    k = np.asarray(k)
    if k.size and (k.min() < 1 or k.max() > _LOG_WHOLE.shape[0]):
        raise ValueError(f"log_whole: expected whole numbers in [1, {_LOG_WHOLE.shape[0]}], "
                         f"got {k.min()}..{k.max()}")
    return _out(_LOG_WHOLE[k.astype(np.int64) - 1])


def rowsum(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sum along ``axis`` strictly left to right, float64.

    ``np.sum`` adds pairwise, in blocks whose boundaries depend on the axis length, so padding
    a row with zeros, or summing a longer row, can change the rounding of the same terms. A
    running sum has one order for every length, and trailing zeros leave it unchanged.
    """
    a = np.asarray(a, dtype=_F64)
    if a.shape[axis] == 0:
        return np.zeros(a.shape[:axis % a.ndim] + a.shape[axis % a.ndim + 1:])
    return np.take(np.cumsum(a, axis=axis), -1, axis=axis)


def interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Piecewise-linear interpolation, float64, flat outside ``[xp[0], xp[-1]]``: what
    ``np.interp`` computes, written with separate ufuncs (``np.interp`` is one C loop whose
    multiply-add a compiler may fuse into an FMA on some platforms).

    Args:
        x: float[...] points to evaluate at.
        xp: float[n] strictly increasing abscissae (n >= 2).
        fp: float[n] values at ``xp``.
    """
    x = np.asarray(x, dtype=_F64)
    xp = np.asarray(xp, dtype=_F64)
    fp = np.asarray(fp, dtype=_F64)
    j = np.clip(np.searchsorted(xp, x, side="right") - 1, 0, xp.shape[0] - 2)
    x0, x1, f0, f1 = xp[j], xp[j + 1], fp[j], fp[j + 1]
    y = f0 + (f1 - f0) * ((x - x0) / (x1 - x0))
    return np.where(x <= xp[0], fp[0], np.where(x >= xp[-1], fp[-1], y))
