"""Online loss-curve fits of Optimus and SLAQ, in portable scalar arithmetic.

Both fit an inverse-polynomial curve to a task's observed loss ``l`` against its cumulative
work ``k`` (here the loss over the task's target, ``exp(log gap)``, so a ratio of 1 is the
target):

* Optimus (Peng et al., EuroSys 2018): ``l(k) = 1 / (b0 k + b1) + b2``;
* SLAQ (Zhang et al., SoCC 2017, for sublinear convergence): ``l(k) = 1 / (a2 k**2 + a1 k
  + a0) + d``;

with every coefficient >= 0, by non-negative least squares. For a fixed floor ``b2`` (or
``d``) the model is linear in the other coefficients after ``z = 1 / (l - floor)``, so
:func:`fit_inverse_curve` solves a weighted NNLS in ``z`` for each floor and searches the
floor below the lowest observed loss (a grid, refined once around the best) for the curve
with the smallest weighted squared error in ``l``. :func:`nnls` is exact for the two or
three columns used: it solves the least squares on every support and keeps the best
non-negative solution, which is the NNLS optimum by the KKT conditions.

The sums go through ``core_env.pmath.rowsum`` (a fixed order) and the small systems are
solved in Python floats, so a fit gives the same bits on every machine.
"""

from __future__ import annotations

from itertools import combinations
from typing import NamedTuple

import numpy as np

from core_env import pmath

FLOOR_FRACTIONS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.93, 0.96, 0.98)
"""The floors tried first, as fractions of the lowest observed loss; the best is refined
:data:`REFINE_LEVELS` times on a grid of :data:`REFINE_POINTS` between its neighbours."""

MAX_FLOOR_FRACTION = 0.995
"""The highest floor, as a fraction of the lowest observed loss."""

REFINE_LEVELS = 1
"""Rounds of refinement of the floor."""

REFINE_POINTS = 21
"""Floors per round of refinement."""


class InverseCurve(NamedTuple):
    """``l(k) = 1 / (sum_i coef[i] * (k / scale)**(degree - i)) + floor`` (coefficients
    highest power first); ``ok`` is False when no curve could be fitted."""

    coef: tuple[float, ...]
    floor: float
    scale: float
    ok: bool

    def __call__(self, k: np.ndarray | float) -> np.ndarray:
        """Loss predicted at cumulative work ``k`` (inf where the polynomial is 0)."""
        x = np.asarray(k, dtype=np.float64) / self.scale
        poly = np.zeros_like(x)
        for c in self.coef:
            poly = poly * x + c
        with np.errstate(divide="ignore"):
            return np.where(poly > 0, 1.0 / np.where(poly > 0, poly, 1.0), np.inf) + self.floor

    def work_to(self, level: float) -> float:
        """Cumulative work at which the curve reaches ``level`` (inf if it never does;
        degree 1 only)."""
        if not self.ok or len(self.coef) != 2:
            raise ValueError("work_to: needs a fitted degree-1 curve")
        b0, b1 = self.coef
        if level <= self.floor or b0 <= 0:
            return float("inf")
        return max((1.0 / (level - self.floor) - b1) / b0, 0.0) * self.scale


def _solve(g: list[list[float]], h: list[list[float]]) -> list[list[float]] | None:
    """Gaussian elimination with partial pivoting on a small dense system with several
    right-hand sides (``h[i]`` is row i of them); None if singular. Each right-hand side goes
    through exactly the operations it would go through alone."""
    n = len(g)
    a = [row[:] + h[i][:] for i, row in enumerate(g)]
    width = len(a[0])
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(a[r][c]))
        if abs(a[p][c]) < 1e-12 * max(1.0, max(abs(v) for v in a[p][:n])):
            return None
        a[c], a[p] = a[p], a[c]
        for r in range(c + 1, n):
            f = a[r][c] / a[c][c]
            for q in range(c, width):
                a[r][q] -= f * a[c][q]
    x = [[0.0] * (width - n) for _ in range(n)]
    for j in range(width - n):
        for r in range(n - 1, -1, -1):
            s = a[r][n + j]
            for q in range(r + 1, n):
                s -= a[r][q] * x[q][j]
            x[r][j] = s / a[r][r]
    return x


def _inverse(g: list[list[float]]) -> list[list[float]] | None:
    """Inverse of a small matrix by Gaussian elimination (None if singular)."""
    n = len(g)
    return _solve(g, [[1.0 if r == c else 0.0 for c in range(n)] for r in range(n)])


class _Design(NamedTuple):
    """What :func:`nnls` computes once for a design (columns and weights): the weighted
    columns, their Gram matrix, and for every support with an invertible Gram block (largest
    first, in :func:`itertools.combinations` order) that block's inverse, zero-padded to
    ``m x m``: ``inverse[s, p, q]``."""

    wa: np.ndarray
    gram: list[list[float]]
    inverse: np.ndarray


def _design(columns: np.ndarray, w: np.ndarray) -> _Design:
    m = columns.shape[0]
    wa = columns * w
    gram_rows = pmath.rowsum(wa[:, None, :] * columns[None, :, :])  # [m, m]
    gram = [[float(gram_rows[p, q]) for q in range(m)] for p in range(m)]
    inverse = []
    for size in range(m, 0, -1):
        for support in combinations(range(m), size):
            inv = _inverse([[gram[p][q] for q in support] for p in support])
            if inv is not None:
                padded = [[0.0] * m for _ in range(m)]
                for i, p in enumerate(support):
                    for j, q in enumerate(support):
                        padded[p][q] = inv[i][j]
                inverse.append(padded)
    return _Design(wa, gram, np.array(inverse, dtype=np.float64).reshape(len(inverse), m, m))


def nnls(columns: np.ndarray, z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted non-negative least squares ``min sum w (z - A c)**2, c >= 0``, for a batch
    of right-hand sides.

    Every support is solved (in one pass over all of them) and the best non-negative
    solution kept, the first support of the least error on ties. The zero-padded terms of
    a support's sums add exact zeros, so each support's solution has the bits of its own
    left-to-right sums.

    Args:
        columns: float64[m, n] the m columns of A (m is small: every support is tried).
        z: float64[B, n] B right-hand sides. w: float64[n] weights (>= 0).

    Returns:
        float64[B, m] the coefficients (NaN rows where no support has a solution).
    """
    return _nnls(_design(columns, w), np.atleast_2d(z), w)


def _nnls(design: _Design, z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """:func:`nnls` of a design computed once (``z`` float64[B, n])."""
    wa, gram, inverse = design
    m = wa.shape[0]
    rhs = pmath.rowsum(wa[:, None, :] * z[None, :, :])  # [m, B]
    zz = pmath.rowsum(w * z * z)
    coef = np.zeros((inverse.shape[0], z.shape[0], m))  # [support, B, m]
    for p in range(m):
        acc = np.zeros(coef.shape[:2])
        for q in range(m):
            acc = acc + inverse[:, p, q, None] * rhs[q]
        coef[:, :, p] = acc
    # sum w (z - A c)**2 = z'Wz - 2 c'A'Wz + c'A'WA c
    quad = np.zeros(coef.shape[:2])
    for p in range(m):
        for q in range(m):
            quad = quad + coef[:, :, p] * gram[p][q] * coef[:, :, q]
    lin = np.zeros(coef.shape[:2])
    for p in range(m):
        lin = lin + coef[:, :, p] * rhs[p]
    sse = zz - 2.0 * lin + quad
    score = np.where(np.all(coef >= 0, axis=2) & (sse < np.inf), sse, np.inf)
    best = np.full((z.shape[0], m), np.nan)
    if not score.size:
        return best
    pick = np.argmin(score, axis=0)
    rows = np.arange(z.shape[0])
    found = score[pick, rows] < np.inf
    best[found] = coef[pick[found], rows[found]]
    return best


def fit_inverse_curve(work: np.ndarray, loss: np.ndarray, degree: int = 1,
                      weights: np.ndarray | None = None) -> InverseCurve:
    """Fit ``l = 1 / poly(k) + floor`` (non-negative coefficients) to observed points.

    Args:
        work: float[n] cumulative work (> 0) at each observation.
        loss: float[n] observed loss (> 0) at each observation.
        degree: 1 (Optimus) or 2 (SLAQ).
        weights: float[n] point weights (default all 1).

    Returns:
        The :class:`InverseCurve` with the smallest weighted squared error in loss over the
        floors searched (``ok=False`` with fewer than ``degree + 1`` points).
    """
    if degree not in (1, 2):
        raise ValueError(f"degree: expected 1 or 2, got {degree!r}")
    k = np.asarray(work, dtype=np.float64)
    y = np.asarray(loss, dtype=np.float64)
    n = k.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    failed = InverseCurve((0.0,) * (degree + 1), 0.0, 1.0, False)
    if n < degree + 1 or y.shape != (n,) or w.shape != (n,):
        return failed
    scale = float(k.max()) if k.max() > 0 else 1.0
    x = k / scale
    columns = np.stack([x * x, x, np.ones(n)][2 - degree:])
    lowest = float(y.min())
    design = _design(columns, w)

    def fit_at(fracs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        floors = fracs * lowest
        coef = _nnls(design, 1.0 / (y[None, :] - floors[:, None]), w)
        poly = np.zeros((fracs.size, n))
        for i in range(degree + 1):
            poly = poly * x[None, :] + coef[:, i: i + 1]
        good = np.all(poly > 0, axis=1) & np.all(np.isfinite(coef), axis=1)
        pred = 1.0 / np.where(poly > 0, poly, 1.0) + floors[:, None]
        sse = np.where(good, pmath.rowsum(w * (y - pred) * (y - pred)), np.inf)
        return sse, coef

    fracs = np.array(FLOOR_FRACTIONS)
    sse, coef = fit_at(fracs)
    for _ in range(REFINE_LEVELS):
        i = int(np.argmin(sse))
        if not np.isfinite(sse[i]):
            return failed
        lo = fracs[max(i - 1, 0)]
        hi = fracs[i + 1] if i + 1 < fracs.size else max(fracs[i], MAX_FLOOR_FRACTION)
        fracs = np.unique(np.concatenate([[fracs[i]], np.linspace(lo, hi, REFINE_POINTS)]))
        sse, coef = fit_at(fracs)
    i = int(np.argmin(sse))
    if not np.isfinite(sse[i]):
        return failed
    return InverseCurve(tuple(float(c) for c in coef[i]), float(fracs[i] * lowest), scale, True)
