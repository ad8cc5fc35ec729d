"""Synthetic loss-curve families and their noise models (SPEC §6).

Every curve is tabulated on one fixed grid of log cumulative work (:data:`LOG_WORK_GRID`,
``GRID_SIZE`` points) and read by linear interpolation in (log work, log loss), flat outside
the grid, so every family, the real-data ones included, is the same kind of object for the
simulator: a row of ``GRID_SIZE`` log-losses. A curve is
``l(s) = l_inf + (l_0 - l_inf) * g(s / scale)`` with a decreasing shape ``g`` of its family
(``supervised``, ``rl``, ``vision``; :data:`MIXES` holds the parameter ranges of each mix),
and its observed path adds a noise path drawn once per task as a function of log work
(common random numbers). The shapes and noise models: ``docs/env.md``, "Task families and
noise"::

    rng = np.random.default_rng(0)
    family, true_ll, observed_ll, log_target = sample_curves(rng, "train", np.array([20.0, 80.0]))
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from core_env import pmath
from core_env.banks import place_curves

# the grid and the families live in their own modules; their names stay importable from here
from core_env.curve_families import (  # noqa: F401 (re-exported)
    FAMILIES,
    MAX_STAGES,
    MIXES,
    SUPERVISED_SHAPES,
    FamilyParams,
    RealFamily,
    _params,
)
from core_env.curve_grid import (  # noqa: F401 (re-exported)
    GRID_SIZE,
    GRID_STEP,
    LOG_WORK_GRID,
    WORK_MAX,
    WORK_MIN,
    first_crossing,
    grid_position,
    interp_log_loss,
)

_KNOT_EVERY = 4
_KNOTS = np.arange(0, GRID_SIZE + _KNOT_EVERY, _KNOT_EVERY)
_KNOT_LEFT = np.arange(GRID_SIZE) // _KNOT_EVERY
"""Grid point i lies between knots i // 4 and i // 4 + 1 (knots every ~0.6 in log work)..."""
_KNOT_FRAC = (np.arange(GRID_SIZE) % _KNOT_EVERY) / _KNOT_EVERY
"""... at this fraction of the way: the correlated noise is linear between knots."""

_F = np.float32


class CurveParams(NamedTuple):
    """Every random number behind n tasks' curves and noise paths (drawn per episode by
    :func:`draw_curve_params`; turned into tables by :func:`evaluate_curves`, which is
    deterministic and vectorised over any concatenation of tasks)."""

    entry: np.ndarray  # int64[n], index of the task's (family, params) entry in the mix
    log_required: np.ndarray  # float64[n], ln s*
    log_scale: np.ndarray  # float32[n], ln of the curve's work scale
    k: np.ndarray  # float32[n], shape exponent
    shape: np.ndarray  # int64[n], supervised shape index (SUPERVISED_SHAPES)
    l0: np.ndarray  # float32[n], initial loss
    floor: np.ndarray  # float32[n], asymptotic loss
    stage_at: np.ndarray  # float32[n, S], rl stage centres / vision drop points (log u)
    stage_width: np.ndarray  # float32[n, S], rl stage widths (log u)
    stage_weight: np.ndarray  # float32[n, S], rl stage weights / vision drop factors
    knots: np.ndarray  # float32[n, n_knots], standard normal knots of the correlated noise
    white: np.ndarray  # float32[n, G], uniform(-1/2, 1/2) white noise
    bump: np.ndarray  # float32[n, 3], rl regression (centre in log work, width, height)
    pick: np.ndarray  # float64[n, 2], real families: uniforms choosing the curve, the record


@lru_cache(maxsize=None)
def _mix_table(mix: str) -> dict[str, np.ndarray]:
    """Per-entry parameter ranges of a mix as arrays (indexed by entry)."""
    ps = [_params(p) for p, _ in MIXES[mix]]
    w = np.array([w for _, w in MIXES[mix]], dtype=np.float64)
    t = {"cum": np.cumsum(w / w.sum())[:-1],
         "is_rl": np.array([p.family == "rl" for p in ps]),
         "regression_prob": np.array([p.regression_prob for p in ps]),
         "scale_lo": pmath.log([p.scale_frac[0] for p in ps]),
         "scale_hi": pmath.log([p.scale_frac[1] for p in ps])}
    for name in ("exponent", "initial_loss", "floor_frac", "stages", "drop_factor",
                 "regression_size"):
        t[name + "_lo"] = np.array([getattr(p, name)[0] for p in ps], dtype=np.float64)
        t[name + "_hi"] = np.array([getattr(p, name)[1] for p in ps], dtype=np.float64)
    return t


_UNIFORM_COLUMNS = 11 + 5 * MAX_STAGES


def draw_curve_randomness(rng: np.random.Generator, n: int
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The generator calls behind n tasks' curves, in their fixed order: a block of uniforms
    float64[n, U] (one row per task, one column per scalar parameter), the standard normal
    noise knots float32[n, n_knots] and the white noise float32[n, G] (uniform in
    [-1/2, 1/2)). :func:`curve_params` turns them into :class:`CurveParams`."""
    u = rng.random((n, _UNIFORM_COLUMNS))
    knots = rng.standard_normal(size=(n, _KNOTS.size), dtype=np.float32)
    white = rng.random(size=(n, GRID_SIZE), dtype=np.float32) - _F(0.5)
    return u, knots, white


def curve_params(mix: str, required_work: np.ndarray, u: np.ndarray, knots: np.ndarray,
                 white: np.ndarray) -> CurveParams:
    """The curve parameters of n tasks from their draws (:func:`draw_curve_randomness`) and
    their required work s* (no randomness). Every operation is per task (row), so the
    parameters of several task sets computed at once, on their concatenated rows, equal those
    computed one set at a time."""
    t = _mix_table(mix)
    s_max = MAX_STAGES
    entry = np.searchsorted(t["cum"], u[:, 0], side="right")

    def between(name: str, col: np.ndarray) -> np.ndarray:
        lo, hi = t[name + "_lo"][entry], t[name + "_hi"][entry]
        if col.ndim == 2:
            lo, hi = lo[:, None], hi[:, None]
        return lo + (hi - lo) * col

    log_required = pmath.log(required_work)
    log_scale = log_required + between("scale", u[:, 1])
    k = between("exponent", u[:, 2])
    l0 = between("initial_loss", u[:, 3])
    floor = l0 * between("floor_frac", u[:, 4])
    shape = (u[:, 5] * len(SUPERVISED_SHAPES)).astype(np.int64)
    s_lo, s_hi = t["stages_lo"][entry], t["stages_hi"][entry]
    stages = (s_lo + np.floor(u[:, 6] * (s_hi - s_lo + 1))).astype(np.int64)
    has_bump = u[:, 7] < t["regression_prob"][entry]
    bump = np.stack([LOG_WORK_GRID[0] + 1.0 + (LOG_WORK_GRID[-1] - LOG_WORK_GRID[0] - 2.0)
                     * u[:, 8], 0.1 + 0.3 * u[:, 9],
                     between("regression_size", u[:, 10]) * has_bump], axis=1)
    cols = [u[:, 11 + i * s_max: 11 + (i + 1) * s_max] for i in range(5)]
    active = np.arange(s_max)[None, :] < stages[:, None]
    is_rl = t["is_rl"][entry][:, None]
    at = np.sort(-1.0 + 3.0 * cols[0], axis=1)
    at = np.where(is_rl, at, at - 0.5)  # rl centres in [-1, 2], vision drops in [-1.5, 1.5]
    width = (0.15 + 0.25 * cols[1]) / between("exponent", cols[2])
    raw = -pmath.log1p(-cols[3]) * active  # exponentials: a Dirichlet over the active stages
    rl_weight = raw / pmath.rowsum(raw)[:, None]
    factor = np.where(active, between("drop_factor", cols[4]), 1.0)
    weight = np.where(is_rl, rl_weight, factor)
    return CurveParams(entry=entry, log_required=log_required, log_scale=log_scale.astype(_F),
                       k=k.astype(_F), shape=shape, l0=l0.astype(_F), floor=floor.astype(_F),
                       stage_at=at.astype(_F), stage_width=width.astype(_F),
                       stage_weight=weight.astype(_F), knots=knots, white=white,
                       bump=bump.astype(_F), pick=u[:, 1:3])


def draw_curve_params(rng: np.random.Generator, mix: str, required_work: np.ndarray
                      ) -> CurveParams:
    """Draw the curve parameters of n tasks whose required work s* is given.

    Three generator calls in a fixed order (:func:`draw_curve_randomness`): a block of
    uniforms (one row per task, one column per scalar parameter), the standard normal noise
    knots, the white noise; then :func:`curve_params`. A task of a real family uses two of its
    uniforms (``pick``) and none of the other draws.
    """
    u, knots, white = draw_curve_randomness(rng, required_work.shape[0])
    return curve_params(mix, required_work, u, knots, white)


def _shape(family: str, c: CurveParams, log_u: np.ndarray, stages: int) -> np.ndarray:
    """float64[n, G] decreasing shape g in [0, 1] of tasks of one family entry whose
    rl stages / vision drops are at most ``stages`` (``log_u`` = float64[n, G] ln(s / scale))."""
    k = c.k[:, None].astype(np.float64)
    if family == "supervised":
        g = np.empty_like(log_u)
        for i, name in enumerate(SUPERVISED_SHAPES):
            idx = np.flatnonzero(c.shape == i)
            if idx.size == 0:
                continue
            lu, ki = log_u[idx], k[idx]
            if name == "pow3":
                g[idx] = pmath.exp(-ki * pmath.softplus(lu))  # (1 + u)^-k
            elif name == "weibull":
                g[idx] = pmath.exp(-pmath.exp(ki * lu))  # exp(-u^k)
            elif name == "mmf":
                g[idx] = pmath.sigmoid(-ki * lu)  # 1 / (1 + u^k)
            else:  # ilog: (1 + ln(1 + u))^-k
                g[idx] = pmath.exp(-ki * pmath.log1p(pmath.softplus(lu)))
        return g
    at = c.stage_at.astype(np.float64)
    weight = c.stage_weight.astype(np.float64)
    if family == "rl":  # 1 - sum_i w_i sigmoid((log u - c_i) / width_i)
        width = c.stage_width.astype(np.float64)
        g = np.ones_like(log_u)
        for i in range(stages):
            g -= weight[:, i:i + 1] * pmath.sigmoid((log_u - at[:, i:i + 1]) / width[:, i:i + 1])
        return np.maximum(g, 0.0)
    # vision: (1 + u)^-k times a drop factor after each learning-rate step
    g = pmath.exp(-k * pmath.softplus(log_u))
    for i in range(stages):
        step = pmath.sigmoid((log_u - at[:, i:i + 1]) * (1.0 / 0.03))
        g *= 1.0 - (1.0 - weight[:, i:i + 1]) * step
    return g


def _take(c: CurveParams, idx: np.ndarray) -> CurveParams:
    return CurveParams(*(a[idx] for a in c))


def concat_params(parts: list[CurveParams]) -> CurveParams:
    """Concatenate the parameters of several task sets (e.g. several episodes)."""
    return CurveParams(*(np.concatenate(a, axis=0) for a in zip(*parts, strict=False)))


def evaluate_curves(c: CurveParams, mix: str) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                         np.ndarray]:
    """Tabulate the curves of :func:`draw_curve_params` (vectorised, no randomness).

    Returns:
        ``(family, true_log_loss, observed_log_loss, log_target)``: int8[n] index into
        :data:`FAMILIES`, float32[n, G] noise-free and observed log-loss tables on
        :data:`LOG_WORK_GRID`, and float64[n] ln eps_j (the true curve's value at s*).
    """
    tabulate = _compiled_tabulate()
    if tabulate is None:
        return _evaluate_numpy(c, mix)
    return _evaluate_compiled(c, mix, tabulate)


def _evaluate_numpy(c: CurveParams, mix: str) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """:func:`evaluate_curves` in numpy (the reference, and the backend without numba)."""
    entries = MIXES[mix]
    n = c.entry.shape[0]
    family = np.zeros(n, dtype=np.int8)
    true_ll = np.zeros((n, GRID_SIZE), dtype=np.float32)
    obs_ll = np.zeros((n, GRID_SIZE), dtype=np.float32)
    log_target = np.zeros(n)
    grid = LOG_WORK_GRID
    for e, (p, _) in enumerate(entries):
        idx = np.flatnonzero(c.entry == e)
        if idx.size == 0:
            continue
        ce = _take(c, idx)
        family[idx] = FAMILIES.index(p.family)
        if isinstance(p, RealFamily):
            true_ll[idx], obs_ll[idx], log_target[idx] = place_curves(
                p.family, p.split, ce.log_required, ce.pick, LOG_WORK_GRID)
            continue
        g = _shape(p.family, ce, grid[None, :] - ce.log_scale[:, None].astype(np.float64),
                   p.stages[1])
        l0, floor = ce.l0[:, None].astype(np.float64), ce.floor[:, None].astype(np.float64)
        curve = pmath.log(floor + (l0 - floor) * g)
        knots = ce.knots.astype(np.float64) * p.noise_sigma
        left = knots[:, _KNOT_LEFT]
        noise = left + (knots[:, _KNOT_LEFT + 1] - left) * _KNOT_FRAC
        white = ce.white.astype(np.float64) * (p.white_sigma * math.sqrt(12.0))
        if p.family == "rl":  # heteroscedastic: largest while the curve learns fastest
            white *= 0.3 + 2.8 * g * (1.0 - g)
            bumpy = np.flatnonzero(ce.bump[:, 2] > 0)
            if bumpy.size:
                b = ce.bump[bumpy].astype(np.float64)
                z = (grid[None, :] - b[:, 0:1]) / b[:, 1:2]
                noise[bumpy] += b[:, 2:3] * pmath.exp(-0.5 * (z * z))
        true_ll[idx] = curve
        obs_ll[idx] = curve + noise + white
        i0, frac = grid_position(ce.log_required)
        rows = np.arange(idx.size)
        lo = true_ll[idx[rows], i0].astype(np.float64)
        log_target[idx] = lo + (true_ll[idx[rows], i0 + 1] - lo) * frac
    return family, true_ll, obs_ll, log_target



@lru_cache(maxsize=None)
def _entry_table(mix: str) -> tuple[np.ndarray, ...]:
    """Per-entry constants of a mix for the compiled kernel: family index (into
    :data:`FAMILIES`), kernel kind (-1 for a real family), number of stages, noise sigma and
    white-noise scale (the same doubles as :func:`_evaluate_numpy` computes)."""
    from core_env import _curves_numba as nb

    kinds = {"supervised": nb.SUPERVISED, "rl": nb.RL, "vision": nb.VISION}
    entries = [p for p, _ in MIXES[mix]]
    family = np.array([FAMILIES.index(p.family) for p in entries], dtype=np.int8)
    kind = np.array([-1 if isinstance(p, RealFamily) else kinds[p.family] for p in entries],
                    dtype=np.int64)
    stages = np.array([0 if isinstance(p, RealFamily) else p.stages[1] for p in entries],
                      dtype=np.int64)
    sigma = np.array([0.0 if isinstance(p, RealFamily) else p.noise_sigma for p in entries],
                     dtype=np.float64)
    white = np.array([0.0 if isinstance(p, RealFamily) else p.white_sigma * math.sqrt(12.0)
                      for p in entries], dtype=np.float64)
    return family, kind, stages, sigma, white


_KNOT_LEFT_I64 = _KNOT_LEFT.astype(np.int64)


def _run_kernel(tabulate, c: CurveParams, kind: np.ndarray, stages: np.ndarray,
                sigma: np.ndarray, white: np.ndarray, true_ll: np.ndarray,
                obs_ll: np.ndarray) -> None:
    """Call the compiled kernel with contiguous arrays of fixed dtypes (one signature)."""
    def f32(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=np.float32)

    tabulate(np.ascontiguousarray(c.entry, dtype=np.int64), kind, stages, sigma, white,
             f32(c.log_scale), f32(c.k), np.ascontiguousarray(c.shape, dtype=np.int64),
             f32(c.l0), f32(c.floor), f32(c.stage_at), f32(c.stage_width),
             f32(c.stage_weight), f32(c.knots), f32(c.white), f32(c.bump), LOG_WORK_GRID,
             _KNOT_LEFT_I64, _KNOT_FRAC, true_ll, obs_ll)


@lru_cache(maxsize=None)
def _compiled_tabulate():
    """The compiled kernel of :mod:`core_env._curves_numba`, built (or loaded from numba's
    cache) and tried once; None where :mod:`core_env.pmath` runs its numpy backend (numba
    missing, disabled or ``CORE_ENV_PMATH=numpy``) or the kernel cannot be built."""
    if pmath.BACKEND != "numba":
        return None
    try:
        from core_env import _curves_numba

        tabulate = _curves_numba.tabulate
        c = curve_params("train", np.ones(1), np.full((1, _UNIFORM_COLUMNS), 0.5),
                         np.zeros((1, _KNOTS.size), dtype=_F),
                         np.zeros((1, GRID_SIZE), dtype=_F))
        _, kind, stages, sigma, white = _entry_table("train")
        out = np.zeros((2, 1, GRID_SIZE), dtype=_F)
        _run_kernel(tabulate, c, kind, stages, sigma, white, out[0], out[1])
    except Exception as e:  # e.g. no writable cache directory, an LLVM that cannot build
        warnings.warn(f"core_env.curves: numba is installed but its curve kernel could not "
                      f"be built ({type(e).__name__}: {e}); using the numpy code (the same "
                      f"results, slower)", stacklevel=3)
        return None
    return tabulate


def _evaluate_compiled(c: CurveParams, mix: str, tabulate) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`evaluate_curves` with the synthetic families tabulated by the compiled kernel
    (the same bits as :func:`_evaluate_numpy`); the real families as there."""
    entries = MIXES[mix]
    n = c.entry.shape[0]
    family_of, kind, stages, sigma, white = _entry_table(mix)
    entry = np.asarray(c.entry)
    valid = (entry >= 0) & (entry < len(entries))
    family = np.zeros(n, dtype=np.int8)
    family[valid] = family_of[entry[valid]]
    true_ll = np.zeros((n, GRID_SIZE), dtype=np.float32)
    obs_ll = np.zeros((n, GRID_SIZE), dtype=np.float32)
    log_target = np.zeros(n)
    if n == 0:
        return family, true_ll, obs_ll, log_target
    _run_kernel(tabulate, c, kind, stages, sigma, white, true_ll, obs_ll)
    synthetic = np.flatnonzero(valid)
    synthetic = synthetic[kind[entry[synthetic]] >= 0]
    if synthetic.size:
        i0, frac = grid_position(np.asarray(c.log_required)[synthetic])
        lo = true_ll[synthetic, i0].astype(np.float64)
        log_target[synthetic] = lo + (true_ll[synthetic, i0 + 1] - lo) * frac
    for e, (p, _) in enumerate(entries):
        if not isinstance(p, RealFamily):
            continue
        idx = np.flatnonzero(entry == e)
        if idx.size:
            ce = _take(c, idx)
            true_ll[idx], obs_ll[idx], log_target[idx] = place_curves(
                p.family, p.split, ce.log_required, ce.pick, LOG_WORK_GRID)
    return family, true_ll, obs_ll, log_target


def sample_curves(rng: np.random.Generator, mix: str, required_work: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Draw and tabulate one curve per task (see :func:`evaluate_curves` for the outputs)."""
    return evaluate_curves(draw_curve_params(rng, mix, required_work), mix)
