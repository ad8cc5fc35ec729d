"""core_env._curves_numba: the compiled tabulation of the synthetic curve families gives the
same bits as the numpy reference (core_env.curves._evaluate_numpy), and the batched draw
arithmetic (core_env.curves.curve_params over many task sets at once) equals per-set
draw_curve_params."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core_env import curves, pmath
from core_env.curves import (
    MIXES,
    SUPERVISED_SHAPES,
    CurveParams,
    RealFamily,
    curve_params,
    draw_curve_params,
    draw_curve_randomness,
)

needs_numba = pytest.mark.skipif(pmath.BACKEND != "numba" or curves._compiled_tabulate() is None,
                                 reason="numba is not installed (or the kernel cannot build)")


def _params(mix: str, seed: int, n: int) -> CurveParams:
    rng = np.random.default_rng(seed)
    s_star = pmath.exp(rng.uniform(math.log(0.3), math.log(3000.0), n))
    return draw_curve_params(rng, mix, s_star)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values with the same sign (so +0 and -0 differ); any nan equals any nan (the
    numpy kernels do not fix a nan's sign bit)."""
    nan = np.isnan(a)
    return (np.array_equal(a, b, equal_nan=True)
            and np.array_equal(np.signbit(a) & ~nan, np.signbit(b) & ~nan))


def _assert_same_tables(c: CurveParams, mix: str) -> None:
    want = curves._evaluate_numpy(c, mix)
    got = curves.evaluate_curves(c, mix)
    for name, a, b in zip(("family", "true", "observed", "target"), got, want, strict=False):
        assert _same(a, b), (mix, name, np.argwhere(a != b)[:5] if a.shape == b.shape else None)


@needs_numba
@pytest.mark.parametrize("mix", sorted(MIXES))
def test_compiled_tabulation_equals_the_numpy_reference(mix):
    synthetic = [i for i, (p, _) in enumerate(MIXES[mix]) if not isinstance(p, RealFamily)]
    for seed in range(6):
        c = _params(mix, seed, 400 if synthetic else 60)
        _assert_same_tables(c, mix)
    if not synthetic:
        return
    # every supervised shape, rl with several stages and with bumps, vision with drops hit
    c = _params(mix, 99, 2000)
    fam = {p.family: i for i, (p, _) in enumerate(MIXES[mix])}
    sup, rl, vis = (c.entry == fam["supervised"]), (c.entry == fam["rl"]), (c.entry == fam["vision"])
    assert set(c.shape[sup].tolist()) == set(range(len(SUPERVISED_SHAPES)))
    assert (rl & (c.bump[:, 2] > 0)).any() and (rl & (c.bump[:, 2] == 0)).any()
    assert (rl & (c.stage_weight[:, 1] > 0)).any()  # an rl task with two active stages
    assert (vis & (c.stage_weight[:, 1] < 1)).any()  # a vision task with two drops
    _assert_same_tables(c, mix)


@needs_numba
def test_compiled_tabulation_at_extreme_parameters():
    """Curves far off the grid (u tiny or huge), exponents near 0, floors near l0, noise at
    its bounds: the kernel still gives the reference's bits (nan and inf included)."""
    rng = np.random.default_rng(5)
    n = 3000
    c = _params("train", 7, n)
    f32 = np.float32
    c = c._replace(
        log_scale=rng.uniform(-60, 60, n).astype(f32),
        k=np.exp(rng.uniform(-12, 3, n)).astype(f32),
        floor=(c.l0 * rng.choice([0.0, 1e-30, 0.5, 1.0], n)).astype(f32),
        stage_width=np.where(rng.random((n, c.stage_width.shape[1])) < 0.1, f32(0.0),
                             c.stage_width).astype(f32),
        white=np.where(rng.random((n, c.white.shape[1])) < 0.5, f32(-0.5),
                       c.white).astype(f32))
    with np.errstate(all="ignore"):
        _assert_same_tables(c, "train")


@needs_numba
def test_compiled_tabulation_of_a_batch_equals_its_parts():
    parts = [_params(m, s, 37 + s) for m in ("train", "held-out") for s in range(3)][:3]
    whole = curves.concat_params(parts)
    got = curves.evaluate_curves(whole, "train")
    start = 0
    for p in parts:
        sl = slice(start, start + p.entry.shape[0])
        start = sl.stop
        for a, b in zip(got, curves.evaluate_curves(p, "train"), strict=False):
            assert _same(a[sl], b)


@needs_numba
def test_the_test_can_fail():
    """One flipped bit of one parameter changes the tables (the comparison is not vacuous)."""
    c = _params("train", 3, 50)
    k = c.k.copy()
    k[c.entry != 0] = np.nextafter(k[c.entry != 0], np.float32(np.inf))
    with pytest.raises(AssertionError):
        want = curves._evaluate_numpy(c, "train")
        got = curves.evaluate_curves(c._replace(k=k), "train")
        assert all(_same(a, b) for a, b in zip(got, want, strict=False))


@needs_numba
def test_compiled_scalar_math_equals_the_numpy_kernels_near_every_edge():
    """The compiled fdlibm functions the kernels inline (core_env._pmath_numba, without C
    library calls) equal the numpy reference kernels on every double near their edges:
    subnormals, +-0, nan, inf, the exp range limits, every power of two's exponent."""
    from numba import njit

    from core_env import _pmath_numba as nb

    def loop(fn):
        @njit
        def run(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
        return run

    rng = np.random.default_rng(11)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1e-310, 2.2250738585072014e-308,
               2.225073858507201e-308, 1e-300, 1e300, 1.7976931348623157e308, 1.0, -1.0,
               -0.999999, -1.0000001, 1e-17, -1e-17]
    x = np.concatenate([special, np.linspace(-709.8, 709.8, 200001), rng.uniform(-40, 40, 100000),
                        np.exp(rng.uniform(-745, 709, 100000)), rng.uniform(-1e-6, 1e-6, 20000),
                        -np.exp(rng.uniform(-745, 709, 20000))])
    with np.errstate(over="ignore"):
        x = np.concatenate([x, np.nextafter(x, np.inf), np.nextafter(x, -np.inf)])
    from core_env._fdlibm import EXP_MAX, EXP_MIN
    x = np.concatenate([x, [EXP_MAX, EXP_MIN, np.nextafter(EXP_MAX, 0), np.nextafter(EXP_MIN, 0),
                            np.nextafter(EXP_MAX, np.inf), np.nextafter(EXP_MIN, -np.inf)],
                        np.arange(-1022.5, 1024.5, 0.5) * math.log(2.0)])
    ref = pmath.NUMPY_KERNELS
    pairs = [(nb.exp_scalar, ref.exp), (nb.log_scalar, ref.log), (nb.log1p_scalar, ref.log1p),
             (nb.sigmoid_scalar, ref.sigmoid), (nb.softplus_scalar, ref.softplus)]
    for f, r in pairs:
        a = np.empty_like(x)
        loop(f)(x, a)
        with np.errstate(all="ignore"):
            b = r(x)
        assert _same_values(a, b), (f.__name__, x[~((a == b) | (np.isnan(a) & np.isnan(b)))][:5])

    @njit
    def powers(fn, x, y, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i], y[i])

    base = np.concatenate([np.abs(x[:60000]), [0.0, -0.0, -1.0, np.nan, np.inf, 16.0]])
    expo = np.concatenate([rng.uniform(-3.0, 3.0, 60000), [0.5, -0.5, 0.0, 1.0, 0.0, np.nan]])
    a = np.empty_like(base)
    with np.errstate(all="ignore"):
        powers(nb.pow_scalar, base, expo, a)
        b = ref.pow(base, expo)
    assert _same_values(a, b), "pow"


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_batched_draw_arithmetic_equals_per_set_draws(mix):
    """curve_params over the concatenated draws of several generators equals draw_curve_params
    of each generator, bit for bit (both backends: the arithmetic is numpy)."""
    sizes = [0, 1, 17, 130, 3, 64]
    parts, draws, works = [], [], []
    for seed, n in enumerate(sizes):
        work = pmath.exp(np.random.default_rng(100 + seed).uniform(-1.0, 8.0, n))
        parts.append(draw_curve_params(np.random.default_rng(seed), mix, work))
        draws.append(draw_curve_randomness(np.random.default_rng(seed), n))
        works.append(work)
    batched = curve_params(mix, np.concatenate(works), *(np.concatenate(d) for d in zip(*draws, strict=False)))
    want = curves.concat_params(parts)
    for name, a, b in zip(CurveParams._fields, batched, want, strict=False):
        assert _same(a, b), (mix, name)
    # and the generator is left where draw_curve_params leaves it
    r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
    draw_curve_params(r1, mix, np.ones(5))
    draw_curve_randomness(r2, 5)
    assert r1.random() == r2.random()
