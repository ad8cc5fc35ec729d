"""ForecastCache: forecasts only stale tasks and reproduces the uncached columns."""

from __future__ import annotations

import numpy as np
import pytest

import core_env
from core_env.forecast import LossForecastWrapper, WLSForecaster
from core_env.forecast.cache import ForecastCache, lognormal_p_reach


def _episode(cache: bool, seed: int, steps: int = 60):
    env = LossForecastWrapper(core_env.parallel_env(preset="CoRE-Small-v0"), WLSForecaster(),
                              cache=cache)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    visible = 0
    for _ in range(steps):
        out.append(np.stack([obs[a]["observation"] for a in env.possible_agents]))
        visible += int((env.unwrapped.sim.slot_task >= 0).sum())
        acts = {a: int(rng.integers(0, 9)) for a in env.agents}
        obs, *_ = env.step(acts)
        if not env.agents:
            break
    return env, out, visible


def test_cached_columns_equal_uncached_except_p_reach():
    env_c, cached, visible = _episode(True, seed=4)
    env_u, plain, _ = _episode(False, seed=4)
    cols = env_c.layout.task_columns
    for a, b in zip(cached, plain, strict=False):
        for name in ("fc_mean", "fc_q10", "fc_q50", "fc_q90"):
            np.testing.assert_allclose(a[:, cols(name)], b[:, cols(name)], atol=1e-6)
        # everything but p_reach is identical
        keep = np.ones(a.shape[1], dtype=bool)
        keep[cols("fc_p_reach")] = False
        np.testing.assert_allclose(a[:, keep], b[:, keep], atol=1e-6)
    # the cache forecast far fewer tasks than were visible over the steps
    assert 0 < env_c.cache.forecasts < visible


def test_p_reach_is_the_lognormal_through_the_quantiles():
    q10, q50, q90 = np.array([5.0]), np.array([10.0]), np.array([20.0])
    assert lognormal_p_reach(q10, q50, q90, np.array([10.0]))[0] == pytest.approx(0.5, abs=1e-6)
    assert lognormal_p_reach(q10, q50, q90, np.array([5.0]))[0] == pytest.approx(0.1, abs=0.02)
    assert lognormal_p_reach(q10, q50, q90, np.array([20.0]))[0] == pytest.approx(0.9, abs=0.02)
    budgets = np.linspace(0.1, 100, 50)
    p = lognormal_p_reach(np.full(50, 5.0), np.full(50, 10.0), np.full(50, 20.0), budgets)
    assert (np.diff(p) >= 0).all() and p[0] < 0.01 and p[-1] > 0.99
    assert lognormal_p_reach(np.zeros(1), np.zeros(1), np.zeros(1), np.ones(1))[0] == 1.0


def test_reset_forgets_and_bad_forecaster_is_rejected():
    benv = core_env.make_batched("CoRE-Small-v0", 2, seed=[0, 1])
    benv.reset()
    for _ in range(5):
        benv.step(np.ones((2, 4), dtype=np.int64))
    cache = ForecastCache(WLSForecaster(), 2, benv.layout.n_slots)
    cache.update(benv.sim)
    n = cache.forecasts
    cache.update(benv.sim)
    assert cache.forecasts == n  # nothing changed: nothing re-forecast
    cache.reset(np.array([True, False]))
    cache.update(benv.sim)
    assert cache.forecasts == n + int((benv.sim.slot_task[0] >= 0).sum())
    with pytest.raises(ValueError, match="forecaster"):
        ForecastCache(object(), 1, 8)
