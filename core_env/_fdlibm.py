"""Constants of fdlibm's ``exp`` and ``log`` (Sun Microsystems, 1993; files e_exp.c and
e_log.c), shared by the two backends of :mod:`core_env.pmath`."""

LN2_HI = 6.93147180369123816490e-01
"""The upper 32 bits of ln 2 (the lower 21 are zero, so ``n * LN2_HI`` is exact)."""
LN2_LO = 1.90821492927058770002e-10
"""ln 2 - LN2_HI."""
INV_LN2 = 1.44269504088896338700e+00
P1 = 1.66666666666666019037e-01
P2 = -2.77777777770155933842e-03
P3 = 6.61375632143793436117e-05
P4 = -1.65339022054652515390e-06
P5 = 4.13813679705723846039e-08
"""exp: the rational approximation ``R(r**2)`` of ``r (e**r + 1) / (e**r - 1)``."""
EXP_MAX = 7.09782712893383973096e+02
"""Above: e**x overflows to inf."""
EXP_MIN = -7.08396418532264106224e+02
"""Below: e**x would be subnormal; flushed to 0."""
LG1 = 6.666666666666735130e-01
LG2 = 3.999999999940941908e-01
LG3 = 2.857142874366239149e-01
LG4 = 2.222219843214978396e-01
LG5 = 1.818357216161805012e-01
LG6 = 1.531383769920937332e-01
LG7 = 1.479819860511658591e-01
"""log: the polynomial in ``s**2`` of ``(ln(1 + f) - 2 s) / s``, ``s = f / (2 + f)``."""
SQRT_HALF = 0.70710678118654752440
