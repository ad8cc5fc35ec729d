"""The FM sampler's ``tanh``: a rational function of float32 operations, accurate to 4e-7,
with the same bits compiled (numba) and in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from mara_agents.forecast._tanh import TANH_CLAMP, TANH_TINY, tanh_rational


def _grid() -> np.ndarray:
    lin = np.linspace(-12.0, 12.0, 400_001, dtype=np.float32)
    logs = np.logspace(-12, 1.2, 50_000).astype(np.float32)
    return np.concatenate([lin, logs, -logs])


def test_within_4e7_of_the_exact_tanh():
    x = _grid()
    exact = np.tanh(x.astype(np.float64))
    err = np.abs(tanh_rational(x).astype(np.float64) - exact)
    assert err.max() <= 4e-7 * np.maximum(np.abs(exact), 1e-30).max()
    tiny = np.abs(x) < 1e-3  # near 0 the error is relative too
    assert np.all(err[tiny] <= 4e-7 * np.abs(exact[tiny]) + 1e-45)


def test_odd_saturating_and_special_values():
    x = _grid()
    assert np.array_equal(tanh_rational(-x), -tanh_rational(x))
    assert np.all(np.abs(tanh_rational(x)) <= 1.0)
    big = np.array([TANH_CLAMP, 9.0, 1e30, np.inf], dtype=np.float32)
    assert np.all(tanh_rational(big) == 1.0) and np.all(tanh_rational(-big) == -1.0)
    small = np.array([0.0, 1e-30, TANH_TINY / 2], dtype=np.float32)
    assert np.array_equal(tanh_rational(small), small)
    with np.errstate(invalid="ignore"):
        assert np.isnan(tanh_rational(np.array([np.nan], dtype=np.float32)))[0]
    assert tanh_rational(np.zeros(3)).dtype == np.float32


def test_compiled_silu_is_numpys_bit_for_bit():
    """The compiled passes compute ``u + u tanh(u)`` with the numpy function's bits: in place,
    with a per-task bias broadcast over samples, special values included."""
    pytest.importorskip("numba")
    from mara_agents.forecast import _sampler_numba as k

    x = np.concatenate([_grid(), np.array([np.inf, -np.inf, np.nan, -0.0], np.float32)])
    with np.errstate(invalid="ignore"):
        want = x + tanh_rational(x) * x
    got = x.copy()
    k.silu_half(got)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))

    rng = np.random.default_rng(0)
    a = (4 * rng.standard_normal((5, 7, 48))).astype(np.float32)
    bias = rng.standard_normal((5, 2, 48)).astype(np.float32)
    u = a + bias[:, None, 1]
    want = u + tanh_rational(u) * u
    out = np.empty_like(a)
    k.bias_silu(a, bias, 1, out)
    assert np.array_equal(out.view(np.int32), want.view(np.int32))
    k.bias_silu(a, bias, 1, a)  # in place
    assert np.array_equal(a.view(np.int32), want.view(np.int32))
