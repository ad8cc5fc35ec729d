"""``tanh`` as a rational function of float32 operations, for the FM sampler's SiLU.

:func:`tanh_rational` is the odd/even [13/6] rational minimax approximation that Eigen and
XLA use for float32 ``tanh`` (the argument clamped to +-:data:`TANH_CLAMP`, where it rounds
to +-1; ``x`` itself below :data:`TANH_TINY`), evaluated by Horner's rule with every ``+``,
``*`` and ``/`` rounded on its own. It is within 4e-7 of the exact ``tanh``, far below what
the trained network resolves, and unlike numpy's CPU-dependent kernel it gives the same bits
on every CPU. The compiled kernels (:mod:`mara_agents.forecast._sampler_numba`) evaluate the
same operations in the same order. Accuracy and speed against numpy's: ``docs/mara.md``,
"Inference cost"::

    tanh_rational(np.linspace(-8, 8, 5, dtype=np.float32))
"""

from __future__ import annotations

import numpy as np

TANH_CLAMP = np.float32(7.90531110763549805)
"""Arguments are clamped to [-TANH_CLAMP, TANH_CLAMP]."""
TANH_TINY = np.float32(0.0004)
"""Below this magnitude ``tanh(x)`` is ``x``."""
TANH_NUM = tuple(np.float32(c) for c in (
    4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
    -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16))
"""Numerator coefficients of x, x^3, ..., x^13."""
TANH_DEN = tuple(np.float32(c) for c in (
    4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06))
"""Denominator coefficients of 1, x^2, x^4, x^6."""


def tanh_rational(x: np.ndarray) -> np.ndarray:
    """float32 ``tanh(x)`` (a new array) as the rational function above, elementwise."""
    x = np.asarray(x, dtype=np.float32)
    c = np.minimum(np.maximum(x, -TANH_CLAMP), TANH_CLAMP)
    x2 = c * c
    a1, a3, a5, a7, a9, a11, a13 = TANH_NUM
    p = x2 * a13 + a11
    for a in (a9, a7, a5, a3, a1):
        p = x2 * p + a
    p = c * p
    b0, b2, b4, b6 = TANH_DEN
    q = x2 * b6 + b4
    for b in (b2, b0):
        q = x2 * q + b
    return np.where(np.abs(x) >= TANH_TINY, p / q, x)  # NaN stays NaN
