"""core_env.forecast: protocol, WLS, oracle, cases and the forecast wrapper."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

import core_env
from core_env.curves import LOG_WORK_GRID, first_crossing
from core_env.forecast import (
    FORECAST_FEATURES,
    REMAINING_CAP,
    CurveHistory,
    Forecaster,
    HistoryBatch,
    LossForecastWrapper,
    OnlineWLS,
    OracleForecaster,
    RemainingWork,
    WLSForecaster,
    naive_slope_forecaster,
)
from core_env.forecast.cases import make_cases
from core_env.forecast.wls import norm_cdf


def power_law(a: float, b: float, work: np.ndarray) -> CurveHistory:
    return CurveHistory(work, a * work ** -b)


# ---------------------------------------------------------------- protocol
def test_every_forecaster_satisfies_the_protocol():
    tables = np.zeros((1, LOG_WORK_GRID.size))
    for f in (WLSForecaster(), naive_slope_forecaster(), OracleForecaster(tables)):
        assert isinstance(f, Forecaster)


def test_history_batch_pads_and_validates():
    hb = HistoryBatch.from_histories([CurveHistory(np.array([1.0, 2.0]), np.array([3.0, 2.0]), 7),
                                      CurveHistory(np.array([5.0]), np.array([1.0]))])
    assert hb.log_work.shape == (2, 2)
    np.testing.assert_allclose(hb.log_work[0], np.log([1.0, 2.0]))
    assert list(hb.length) == [2, 1] and list(hb.key) == [7, -1]
    assert hb.log_work[1, 1] == 0.0
    lw, ll = hb.last()
    np.testing.assert_allclose(lw, np.log([2.0, 5.0]))
    np.testing.assert_allclose(ll, np.log([2.0, 1.0]))
    bad = [
        (CurveHistory(np.array([1.0, 2.0]), np.array([1.0])), "equal length"),
        (CurveHistory(np.array([1.0, np.nan]), np.array([1.0, 1.0])), "finite"),
        (CurveHistory(np.array([1.0, 2.0]), np.array([1.0, 0.0])), "positive"),
        (CurveHistory(np.array([2.0, 1.0]), np.array([1.0, 1.0])), "non-decreasing"),
    ]
    for h, msg in bad:
        with pytest.raises(ValueError, match=msg):
            WLSForecaster().predict([CurveHistory(np.array([1.0]), np.array([1.0])), h],
                                    np.array([0.5, 0.5]))


def test_predict_rejects_bad_targets_and_budgets():
    h = [power_law(2.0, 0.5, np.array([1.0, 2.0, 4.0]))]
    f = WLSForecaster()
    with pytest.raises(ValueError, match="targets"):
        f.predict(h, np.array([0.0]))
    with pytest.raises(ValueError, match="targets"):
        f.predict(h, np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="budgets"):
        f.predict(h, np.array([0.5]), np.array([-1.0]))


def test_remaining_work_check_catches_bad_outputs():
    ok = np.ones(2)
    RemainingWork(ok, ok, ok, ok, ok * 0.5).check(2)
    with pytest.raises(ValueError, match="finite"):
        RemainingWork(ok * np.nan, ok, ok, ok, ok).check(2)
    with pytest.raises(ValueError, match="q10 <= q50"):
        RemainingWork(ok, ok * 2, ok, ok, ok).check(2)
    with pytest.raises(ValueError, match="p_reach"):
        RemainingWork(ok, ok, ok, ok, ok * 2).check(2)
    with pytest.raises(ValueError, match="shape"):
        RemainingWork(ok, ok, ok, ok, np.ones(3)).check(2)


# ---------------------------------------------------------------- WLS
def test_wls_recovers_an_exact_power_law_and_its_closed_form_remaining_work():
    a, b = 3.0, 0.7
    work = np.array([1.0, 1.5, 2.5, 4.0, 6.0, 9.0])
    h = power_law(a, b, work)
    f = WLSForecaster(ridge=0.0)
    c_hat, b_hat, sigma, ok = f.fit(HistoryBatch.from_histories([h]))
    assert ok[0]
    assert b_hat[0] == pytest.approx(b, rel=1e-9)
    assert math.exp(c_hat[0]) == pytest.approx(a, rel=1e-9)
    eps = 0.5
    expected = (a / eps) ** (1 / b) - work[-1]  # exp((ln a - ln eps) / b) - s_now
    rw = f.predict([h], np.array([eps]))
    assert rw.q50[0] == pytest.approx(expected, rel=1e-7)
    # exact fit: the residual scale is the floor, the interval is tight around the median
    assert rw.q10[0] < rw.q50[0] < rw.q90[0]
    assert sigma[0] == pytest.approx(f.min_sigma)


def test_wls_weights_recent_points_more_when_the_curve_bends():
    # slope 0.2 early, 1.0 late: gamma < 1 follows the late slope, gamma = 1 averages
    work = np.exp(np.linspace(0, 3, 12))
    loss = np.where(np.log(work) < 1.5, work ** -0.2,
                    math.exp(-0.2 * 1.5) * (work / math.exp(1.5)) ** -1.0)
    batch = HistoryBatch.from_histories([CurveHistory(work, loss)])
    _, b_recent, _, _ = WLSForecaster(gamma=0.5, ridge=0.0).fit(batch)
    _, b_all, _, _ = WLSForecaster(gamma=1.0, ridge=0.0).fit(batch)
    assert b_recent[0] > 0.9 > b_all[0]


@pytest.mark.parametrize("work, loss", [
    ([1.0, 2.0, 3.0], [1.0, 1.0, 1.0]),  # flat
    ([1.0, 2.0, 3.0], [1.0, 1.5, 2.0]),  # increasing
    ([2.0], [1.0]),  # one point
    ([2.0, 2.0, 2.0], [1.0, 0.9, 1.1]),  # no spread in work
    ([1.0, 2.0, 4.0, 8.0], [1.0, 0.3, 2.0, 0.2]),  # very noisy
])
def test_wls_stays_finite_on_degenerate_histories(work, loss):
    h = CurveHistory(np.array(work), np.array(loss))
    for f in (WLSForecaster(), naive_slope_forecaster()):
        rw = f.predict([h], np.array([0.05]), np.array([10.0]))
        for arr in rw:
            assert np.all(np.isfinite(arr))


def test_wls_fallbacks_are_documented_values():
    f = WLSForecaster()
    flat = CurveHistory(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0]))
    reached = CurveHistory(np.array([1.0, 2.0]), np.array([1.0, 0.4]))
    rw = f.predict([flat, reached], np.array([0.5, 0.5]))
    assert rw.q50[0] == REMAINING_CAP and rw.p_reach[0] == 0.0
    assert rw.q50[1] == 0.0 and rw.p_reach[1] == 1.0


def test_wls_p_reach_is_the_normal_cdf_of_the_log_required_work_and_monotone():
    h = power_law(3.0, 0.7, np.array([1.0, 2.0, 4.0]))
    f = WLSForecaster(ridge=0.0, min_sigma=0.1)
    budgets = np.array([1.0, 5.0, 10.0, 20.0, 50.0])
    rw = f.predict([h] * 5, np.full(5, 0.5), budgets)
    assert np.all(np.diff(rw.p_reach) >= 0)
    mu = math.log((3.0 / 0.5) ** (1 / 0.7))
    expected = norm_cdf((np.log(4.0 + budgets) - mu) / (0.1 / 0.7))
    np.testing.assert_allclose(rw.p_reach, expected, atol=1e-9)


def test_norm_cdf_matches_erf():
    x = np.linspace(-5, 5, 101)
    exact = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(norm_cdf(x), exact, atol=2e-7)


def test_online_wls_equals_the_batch_fit():
    rng = np.random.default_rng(0)
    params = WLSForecaster(gamma=0.8)
    n, steps = 5, 9
    work = np.cumsum(rng.uniform(0.5, 2.0, size=(n, steps)), axis=1)
    loss = 2.0 * work ** -0.6 * np.exp(rng.normal(0, 0.05, size=(n, steps)))
    online = OnlineWLS(params, n)
    for i in range(steps):
        online.update(np.log(work[:, i]), np.log(loss[:, i]))
    batch = HistoryBatch.from_histories([CurveHistory(work[j], loss[j]) for j in range(n)])
    for got, want in zip(online.fit(), params.fit(batch), strict=False):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="window"):
        OnlineWLS(naive_slope_forecaster(), 1)


def test_naive_slope_uses_only_the_last_five_points():
    work = np.exp(np.linspace(0, 3, 10))
    loss = np.where(np.arange(10) < 5, work ** -0.1, 5.0 * work ** -1.0)
    batch = HistoryBatch.from_histories([CurveHistory(work, loss)])
    _, b, _, ok = naive_slope_forecaster().fit(batch)
    assert ok[0] and b[0] == pytest.approx(1.0, rel=1e-9)


def test_wls_config_is_validated():
    for kw in ({"gamma": 0.0}, {"gamma": 1.5}, {"ridge": -1.0}, {"window": 1}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            WLSForecaster(**kw)


# ---------------------------------------------------------------- oracle and cases
def test_oracle_is_exact_on_cases_and_cases_are_consistent():
    rng = np.random.default_rng(3)
    cases = make_cases(rng, "train", 300, 0.2)
    ok = np.isfinite(cases.remaining) & (cases.remaining > 0)
    assert ok.mean() > 0.9
    rw = OracleForecaster(cases.log_loss_table).predict_batch(
        cases.batch, cases.log_targets, np.full(300, 1e9))
    np.testing.assert_allclose(rw.q50[ok], cases.remaining[ok], rtol=1e-9)
    # every prefix observation is above the target and the prefix ends near 20% of the way
    x_now, y_now = cases.batch.last()
    assert np.all(y_now[ok] > cases.log_targets[ok])
    frac = np.exp(x_now[ok]) / cases.required[ok]
    assert np.median(frac) == pytest.approx(0.2, abs=0.05)
    # the recorded observed losses are the path at the recorded work
    i = 7
    n = cases.batch.length[i]
    path = np.interp(cases.batch.log_work[i, :n], LOG_WORK_GRID, cases.log_loss_table[i])
    np.testing.assert_allclose(cases.batch.log_loss[i, :n], path, atol=1e-5)


def test_oracle_needs_keys():
    with pytest.raises(ValueError, match="key"):
        OracleForecaster(np.zeros((2, LOG_WORK_GRID.size))).predict(
            [CurveHistory(np.array([1.0]), np.array([1.0]))], np.array([0.5]))


def test_first_crossing_from_a_later_start():
    # a V-shaped path: below the level only after its minimum
    table = np.abs(LOG_WORK_GRID - 2.0)[None, :] - 1.0
    level = np.array([-0.5])
    first = first_crossing(table, level)[0]
    assert math.log(first) == pytest.approx(1.5, abs=1e-9)
    later = first_crossing(table, level, np.array([1.8]))[0]
    assert math.log(later) == pytest.approx(1.8)  # already below there
    after = first_crossing(table, level, np.array([2.6]))[0]
    assert np.isinf(after)  # rising again past 2.5


# ---------------------------------------------------------------- wrapper
class CountingForecaster(WLSForecaster):
    calls = 0

    def predict_batch(self, batch, log_targets, budgets):
        type(self).calls += 1
        return super().predict_batch(batch, log_targets, budgets)


def test_wrapper_passes_the_pettingzoo_api_test():
    env = LossForecastWrapper(core_env.parallel_env(preset="CoRE-Small-v0"), WLSForecaster())
    parallel_api_test(env, num_cycles=200)


def test_wrapper_extends_layout_spaces_and_calls_the_forecaster_once_per_step():
    base = core_env.parallel_env(preset="CoRE-Small-v0")
    twin = core_env.parallel_env(preset="CoRE-Small-v0")
    CountingForecaster.calls = 0
    env = LossForecastWrapper(base, CountingForecaster())
    k, f = base.layout.n_slots, base.layout.task_size
    e = len(FORECAST_FEATURES)
    assert env.layout.task_size == f + e
    assert env.layout.size == base.layout.size + k * e
    agent = env.possible_agents[0]
    assert env.observation_space(agent)["observation"].shape == (env.layout.size,)
    assert env.state_space.shape == (env.state_layout.size,)
    obs, _ = env.reset(seed=4)
    plain, _ = twin.reset(seed=4)
    rng = np.random.default_rng(0)
    steps = 0
    while env.agents:
        for a in env.agents:
            assert env.observation_space(a).contains(obs[a])
            wide = obs[a]["observation"]
            narrow = plain[a]["observation"]
            # the original features are untouched, the new columns sit at the end of each row
            head = base.layout.task_block.start
            assert np.array_equal(wide[:head], narrow[:head])
            assert np.array_equal(env.layout.task_table(wide)[:, :f],
                                  base.layout.task_table(narrow))
            assert np.array_equal(obs[a]["action_mask"], plain[a]["action_mask"])
        state = env.state()
        assert env.state_space.contains(state)
        assert np.array_equal(env.state_layout.task_table(state)[:, :f],
                              twin.state_layout.task_table(twin.state()))
        acts = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        obs, *_ = env.step(acts)
        plain, *_ = twin.step(acts)
        steps += 1
    # one call per reset/step that has a visible task, never per agent
    assert 0 < CountingForecaster.calls <= steps + 1
    assert env.forecast_calls == CountingForecaster.calls


def test_wrapper_columns_match_a_direct_forecast_and_are_zero_for_empty_slots():
    base = core_env.parallel_env(preset="CoRE-v0")
    env = LossForecastWrapper(base, OracleForecaster.for_env(base))
    obs, _ = env.reset(seed=2)
    for _ in range(25):
        obs, *_ = env.step({a: 1 + (i % 3) for i, a in enumerate(env.agents)})
    table = env.layout.task_table(obs[env.possible_agents[0]]["observation"])
    col = {ft.name: env.layout.task_column(ft.name) for ft in FORECAST_FEATURES}
    s = base.sim
    n = s.speed.shape[1]
    for k in range(env.layout.n_slots):
        task = s.slot_task[0, k]
        if task < 0:
            assert np.all(table[k, -len(FORECAST_FEATURES):] == 0)
            continue
        cap = min(s.slot_cap[0, k], n)
        achievable = cap ** float(s.slot_alpha[0, k]) * float(s.mean_speed[0]) * (
            s.slot_deadline[0, k] - s.t[0])
        work = float(s.slot_work[0, k])
        log_from = math.log(work) if s.slot_n_obs[0, k] else -np.inf
        req = first_crossing(base.workload.log_loss[task:task + 1],
                             np.array([float(s.slot_log_target[0, k])]),
                             np.array([log_from]))[0]
        remaining = min(max(req - (work if s.slot_n_obs[0, k] else 0.0), 0.0), REMAINING_CAP)
        expected = min(remaining / achievable, 2.0) / 2
        assert table[k, col["fc_mean"]] == pytest.approx(expected, rel=1e-4, abs=1e-6)
        assert table[k, col["fc_p_reach"]] == float(remaining <= achievable and
                                                    remaining < REMAINING_CAP)


def test_wrapper_rejects_an_object_without_predict():
    with pytest.raises(ValueError, match="forecaster"):
        LossForecastWrapper(core_env.parallel_env(preset="CoRE-Small-v0"), object())
