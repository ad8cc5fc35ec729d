"""Synthetic loss-curve families and their noise models (SPEC §6).

Every curve is tabulated on one fixed grid of log cumulative work (:data:`LOG_WORK_GRID`)
and evaluated by linear interpolation in (log work, log loss); below the first grid point
it is flat, above the last one it is flat. Tabulation makes every family, including the
real-data families to come, the same kind of object for the simulator: a row of
``GRID_SIZE`` log-losses.

A curve is ``l(s) = l_inf + (l_0 - l_inf) * g(s / scale)`` with a decreasing shape ``g``
from 1 to 0, taken from learning-curve research (Domhan et al. 2015, flipped to decreasing
losses):

============  ======================================  ==============================
family        shapes                                  noise model
============  ======================================  ==============================
supervised    pow3 ``(1+u)^-k``, weibull               smooth: mild correlated noise
              ``exp(-u^k)``, mmf ``1/(1+u^k)``,
              ilog ``(1+ln(1+u))^-k``
rl            sigmoid plateaus in log-work             heteroscedastic (largest while
              (1 to 3 stages)                          learning), occasional regressions
vision        power law ``(1+u)^-k`` with              mild noise
              learning-rate-step drops
============  ======================================  ==============================

The observed log-loss path is the true one plus a noise path drawn once per task as a
function of log work (common random numbers): a sum of random sinusoids in log work
(a correlated, stationary component), white noise per grid point (interpolated, so the
path is still a function of work), and for ``rl`` Gaussian bumps (regressions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WORK_MIN = 0.25
"""First grid point (node-slots); the curve is flat below it."""

WORK_MAX = 4096.0
"""Last grid point (node-slots); the curve is flat above it."""

GRID_SIZE = 128
"""Number of grid points."""

LOG_WORK_GRID = np.linspace(math.log(WORK_MIN), math.log(WORK_MAX), GRID_SIZE)
"""float64[G]: the log-work grid."""

GRID_STEP = float(LOG_WORK_GRID[1] - LOG_WORK_GRID[0])
"""Spacing of the log-work grid."""

FAMILIES = ("supervised", "rl", "vision")
"""Family names; a task's ``family`` is an index into this tuple."""

SUPERVISED_SHAPES = ("pow3", "weibull", "mmf", "ilog")


@dataclass(frozen=True)
class FamilyParams:
    """Parameter ranges of one curve family in one mix. Ranges are (low, high)."""

    family: str
    """One of :data:`FAMILIES`."""
    exponent: tuple[float, float]
    """Shape exponent k (uniform)."""
    scale_frac: tuple[float, float]
    """Curve scale as a fraction of the required work s* (log-uniform): small values put
    the target late on the curve, where it flattens."""
    initial_loss: tuple[float, float]
    """l_0 (uniform)."""
    floor_frac: tuple[float, float]
    """l_inf / l_0 (uniform)."""
    noise_sigma: float
    """Std of the correlated noise component (log-loss units)."""
    white_sigma: float
    """Std of the white noise component (log-loss units)."""
    stages: tuple[int, int] = (1, 1)
    """rl: number of plateau stages; vision: number of learning-rate drops (inclusive)."""
    drop_factor: tuple[float, float] = (0.4, 0.7)
    """vision: factor applied to the loss above the floor at each learning-rate drop."""
    regression_prob: float = 0.0
    """rl: probability that a task has a regression bump."""
    regression_size: tuple[float, float] = (0.05, 0.3)
    """rl: height of the regression bump (log-loss units)."""


MIXES: dict[str, tuple[tuple[FamilyParams, float], ...]] = {
    "train": (
        (FamilyParams("supervised", exponent=(0.6, 1.6), scale_frac=(0.03, 1.0),
                      initial_loss=(1.0, 3.0), floor_frac=(0.02, 0.3),
                      noise_sigma=0.02, white_sigma=0.006), 0.4),
        (FamilyParams("rl", exponent=(0.6, 1.2), scale_frac=(0.05, 0.8),
                      initial_loss=(0.8, 1.0), floor_frac=(0.05, 0.4),
                      noise_sigma=0.03, white_sigma=0.03, stages=(1, 2),
                      regression_prob=0.4), 0.3),
        (FamilyParams("vision", exponent=(0.3, 0.8), scale_frac=(0.02, 0.5),
                      initial_loss=(2.0, 4.6), floor_frac=(0.05, 0.2),
                      noise_sigma=0.015, white_sigma=0.01, stages=(1, 2)), 0.3),
    ),
    "held-out": (
        (FamilyParams("supervised", exponent=(0.3, 0.7), scale_frac=(0.01, 0.3),
                      initial_loss=(1.0, 3.0), floor_frac=(0.2, 0.5),
                      noise_sigma=0.035, white_sigma=0.01), 0.3),
        (FamilyParams("rl", exponent=(0.5, 1.0), scale_frac=(0.05, 0.5),
                      initial_loss=(0.8, 1.0), floor_frac=(0.02, 0.2),
                      noise_sigma=0.05, white_sigma=0.05, stages=(2, 3),
                      regression_prob=0.7, regression_size=(0.1, 0.4)), 0.4),
        (FamilyParams("vision", exponent=(0.2, 0.5), scale_frac=(0.01, 0.3),
                      initial_loss=(2.0, 6.9), floor_frac=(0.1, 0.3),
                      noise_sigma=0.02, white_sigma=0.015, stages=(2, 3),
                      drop_factor=(0.3, 0.6)), 0.3),
    ),
}
"""Named task-family mixes: (family parameters, weight) pairs; weights sum to 1."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _shape_supervised(rng: np.random.Generator, p: FamilyParams, log_u: np.ndarray) -> np.ndarray:
    n = log_u.shape[0]
    k = rng.uniform(*p.exponent, size=(n, 1))
    shape = rng.integers(0, len(SUPERVISED_SHAPES), size=(n, 1))
    u = np.exp(log_u)
    g_pow3 = np.exp(-k * np.log1p(u))
    g_weibull = np.exp(-np.exp(k * log_u))
    g_mmf = _sigmoid(-k * log_u)
    g_ilog = np.exp(-k * np.log1p(np.log1p(u)))
    return np.choose(shape, [g_pow3, g_weibull, g_mmf, g_ilog])


def _shape_rl(rng: np.random.Generator, p: FamilyParams, log_u: np.ndarray) -> np.ndarray:
    n = log_u.shape[0]
    stages = rng.integers(p.stages[0], p.stages[1] + 1, size=n)
    smax = p.stages[1]
    # Stage centres spread over [-1, 2] in log-u, widths ~ 1/k, weights Dirichlet.
    centres = np.sort(rng.uniform(-1.0, 2.0, size=(n, smax)), axis=1)
    widths = 1.0 / rng.uniform(*p.exponent, size=(n, smax)) * rng.uniform(0.15, 0.4, size=(n, smax))
    weights = rng.dirichlet(np.ones(smax), size=n) if smax > 1 else np.ones((n, 1))
    active = np.arange(smax)[None, :] < stages[:, None]
    weights = np.where(active, weights, 0.0)
    weights /= weights.sum(axis=1, keepdims=True)
    steps = _sigmoid((log_u[:, None, :] - centres[:, :, None]) / widths[:, :, None])
    return 1.0 - np.einsum("ns,nsg->ng", weights, steps)


def _shape_vision(rng: np.random.Generator, p: FamilyParams, log_u: np.ndarray) -> np.ndarray:
    n = log_u.shape[0]
    k = rng.uniform(*p.exponent, size=(n, 1))
    g = np.exp(-k * np.log1p(np.exp(log_u)))
    drops = rng.integers(p.stages[0], p.stages[1] + 1, size=n)
    smax = p.stages[1]
    at = np.sort(rng.uniform(-1.5, 1.5, size=(n, smax)), axis=1)
    factor = rng.uniform(*p.drop_factor, size=(n, smax))
    factor = np.where(np.arange(smax)[None, :] < drops[:, None], factor, 1.0)
    for i in range(smax):
        step = _sigmoid((log_u - at[:, i:i + 1]) / 0.03)
        g = g * (1.0 - (1.0 - factor[:, i:i + 1]) * step)
    return g


_SHAPES = {"supervised": _shape_supervised, "rl": _shape_rl, "vision": _shape_vision}


def _noise(rng: np.random.Generator, p: FamilyParams, g: np.ndarray) -> np.ndarray:
    """float64[n, G] noise path in log-loss over the log-work grid."""
    n = g.shape[0]
    n_waves = 4
    amp = rng.normal(0.0, p.noise_sigma * math.sqrt(2.0 / n_waves), size=(n, n_waves, 1))
    freq = rng.uniform(0.5, 4.0, size=(n, n_waves, 1))
    phase = rng.uniform(0.0, 2.0 * math.pi, size=(n, n_waves, 1))
    noise = (amp * np.sin(freq * LOG_WORK_GRID[None, None, :] + phase)).sum(axis=1)
    white = rng.normal(0.0, 1.0, size=(n, GRID_SIZE))
    if p.family == "rl":
        # heteroscedastic: noise peaks while the curve is learning fastest
        white *= p.white_sigma * (0.3 + 2.8 * g * (1.0 - g))
        has_bump = rng.random(n) < p.regression_prob
        where = rng.uniform(LOG_WORK_GRID[0] + 1.0, LOG_WORK_GRID[-1] - 1.0, size=(n, 1))
        width = rng.uniform(0.1, 0.4, size=(n, 1))
        height = rng.uniform(*p.regression_size, size=(n, 1)) * has_bump[:, None]
        noise += height * np.exp(-0.5 * ((LOG_WORK_GRID[None, :] - where) / width) ** 2)
    else:
        white *= p.white_sigma
    return noise + white


def sample_curves(rng: np.random.Generator, mix: str, required_work: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Draw one curve per task, with its target at the given required work.

    Args:
        rng: the episode's generator (consumed in a fixed order).
        mix: a key of :data:`MIXES`.
        required_work: float64[n], s*_j; the target is the true curve's value there.

    Returns:
        ``(family, true_log_loss, observed_log_loss, log_target)``: int8[n] index into
        :data:`FAMILIES`, float64[n, G] noise-free and observed log-loss tables on
        :data:`LOG_WORK_GRID`, and float64[n] ln eps_j.
    """
    entries = MIXES[mix]
    n = required_work.shape[0]
    weights = np.array([w for _, w in entries], dtype=np.float64)
    which = rng.choice(len(entries), size=n, p=weights / weights.sum())
    family = np.zeros(n, dtype=np.int8)
    true_ll = np.zeros((n, GRID_SIZE))
    obs_ll = np.zeros((n, GRID_SIZE))
    log_target = np.zeros(n)
    for e, (p, _) in enumerate(entries):
        idx = np.flatnonzero(which == e)
        if idx.size == 0:
            continue
        s_star = required_work[idx]
        lo, hi = np.log(p.scale_frac[0]), np.log(p.scale_frac[1])
        log_scale = np.log(s_star) + rng.uniform(lo, hi, size=idx.size)
        log_u = LOG_WORK_GRID[None, :] - log_scale[:, None]
        g = _SHAPES[p.family](rng, p, log_u)
        l0 = rng.uniform(*p.initial_loss, size=(idx.size, 1))
        floor = l0 * rng.uniform(*p.floor_frac, size=(idx.size, 1))
        curve = np.log(floor + (l0 - floor) * g)
        family[idx] = FAMILIES.index(p.family)
        true_ll[idx] = curve
        obs_ll[idx] = curve + _noise(rng, p, g)
        log_target[idx] = interp_log_loss(curve, np.log(s_star))
    return family, true_ll, obs_ll, log_target


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


def first_crossing(table: np.ndarray, log_level: np.ndarray) -> np.ndarray:
    """Least work at which a tabulated curve is at or below a level (inf if never).

    Args:
        table: float[n, G] log-loss tables.
        log_level: float[n] log-loss levels.

    Returns:
        float64[n] work (not log work): ``WORK_MIN`` if already below at the first grid
        point, else the linear interpolation inside the first grid interval that crosses.
    """
    below = table <= log_level[:, None]
    found = below.any(axis=1)
    i = np.argmax(below, axis=1)
    prev = np.maximum(i - 1, 0)
    rows = np.arange(table.shape[0])
    f0, f1 = table[rows, prev], table[rows, i]
    denom = np.where(f0 - f1 > 0, f0 - f1, 1.0)
    frac = np.where(i > 0, np.clip((f0 - log_level) / denom, 0.0, 1.0), 0.0)
    x = LOG_WORK_GRID[prev] + frac * GRID_STEP * (i > 0)
    return np.where(found, np.exp(x), np.inf)
