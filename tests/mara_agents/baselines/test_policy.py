"""The Policy protocol, make_policy, run_episode, and every baseline's legality and
determinism over random episodes (mara_agents/policy.py)."""

from __future__ import annotations

import numpy as np
import pytest

import core_env
from core_env.forecast import LossForecastWrapper, OracleForecaster, WLSForecaster
from mara_agents.policy import BASELINES as POLICY_NAMES
from mara_agents.policy import Policy, make_policy, run_episode

from .helpers import SMALL, episode_actions, make_observations


def test_every_baseline_implements_the_protocol():
    for name in POLICY_NAMES:
        env, pol = make_policy(name, core_env.parallel_env(preset=SMALL))
        assert isinstance(pol, Policy), name
        assert pol.name == name


def test_make_policy_wraps_the_env_for_forecast_policies():
    for name in ("random", "random_sequential", "round_robin", "fifo", "edf"):
        base = core_env.parallel_env(preset=SMALL)
        env, _ = make_policy(name, base)
        assert env is base
    for name in ("least_laxity", "shortest_predicted", "lara"):
        env, _ = make_policy(name, core_env.parallel_env(preset=SMALL))
        assert isinstance(env, LossForecastWrapper) and isinstance(env.forecaster, WLSForecaster)
    env, _ = make_policy("oracle_greedy", core_env.parallel_env(preset=SMALL))
    assert isinstance(env.forecaster, OracleForecaster)
    # an already wrapped env is used as is
    wrapped = LossForecastWrapper(core_env.parallel_env(preset=SMALL), WLSForecaster(gamma=0.8))
    env, _ = make_policy("lara", wrapped)
    assert env is wrapped
    # policy keyword arguments go to the constructor
    _, lara = make_policy("lara", core_env.parallel_env(preset=SMALL), explore_obs=5)
    assert lara.params.explore_obs == 5


def test_make_policy_errors():
    base = core_env.parallel_env(preset=SMALL)
    with pytest.raises(ValueError, match="expected a built-in name"):
        make_policy("sjf", base)
    with pytest.raises(ValueError, match="reads no forecasts"):
        make_policy("edf", base, forecaster=WLSForecaster())
    with pytest.raises(ValueError, match="OracleForecaster"):
        make_policy("oracle_greedy", base, forecaster=WLSForecaster())
    wrapped = LossForecastWrapper(core_env.parallel_env(preset=SMALL), WLSForecaster())
    with pytest.raises(ValueError, match="OracleForecaster"):
        make_policy("oracle_greedy", wrapped)
    with pytest.raises(ValueError, match="already has"):
        make_policy("lara", wrapped, forecaster=WLSForecaster())


def test_run_episode_plain_and_wrapped():
    env, pol = make_policy("edf", core_env.parallel_env(preset=SMALL))
    stats = run_episode(env, pol, seed=0)
    assert {"completion_rate", "utilization", "illegal_actions",
            "capacity_conflicts"} <= set(stats)
    env, pol = make_policy("lara", core_env.parallel_env(preset=SMALL))
    stats2 = run_episode(env, pol, seed=0)
    assert stats2["arrived"] == stats["arrived"]  # same seed, same workload
    with pytest.raises(ValueError, match="policy"):
        run_episode(env, object(), seed=0)


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_no_masked_action_and_no_conflict_over_random_episodes(name):
    """Every policy but the naive ``random`` (each node on its own mask) respects the caps."""
    for preset, seeds in ((SMALL, range(6)), ("CoRE-v0", range(2))):
        env, pol = make_policy(name, core_env.parallel_env(preset=preset))
        conflicts = 0
        for seed in seeds:
            stats = run_episode(env, pol, seed=seed)
            assert stats["illegal_actions"] == 0, (preset, seed)
            conflicts += stats["capacity_conflicts"]
            assert stats["completed"] + stats["expired"] == stats["arrived"]
        assert (conflicts > 0) if name == "random" else (conflicts == 0), (preset, conflicts)


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_deterministic_per_seed(name):
    env, pol = make_policy(name, core_env.parallel_env(preset=SMALL))
    a1, s1 = episode_actions(env, pol, 11)
    a2, s2 = episode_actions(env, pol, 11)
    assert a1 == a2 and s1 == s2
    # a fresh policy object gives the same episode too (no hidden global state)
    env3, pol3 = make_policy(name, core_env.parallel_env(preset=SMALL))
    assert episode_actions(env3, pol3, 11)[0] == a1


def test_random_policy_depends_on_its_seed():
    env, pol = make_policy("random", core_env.parallel_env(preset=SMALL))
    obs = make_observations(env, 0, {0: {"left": 9, "cap": 2}, 3: {"left": 5, "cap": 4}})
    pol.reset(1)
    first = [pol.act(obs) for _ in range(5)]
    pol.reset(2)
    assert [pol.act(obs) for _ in range(5)] != first


def test_baselines_beat_random_on_the_training_preset():
    """A sanity check, not a benchmark: paired on two seeds of CoRE-v0."""
    rates = {}
    for name in ("random", "edf", "oracle_greedy"):
        env, pol = make_policy(name, core_env.parallel_env(preset="CoRE-v0"))
        rates[name] = np.mean([run_episode(env, pol, seed=s)["completion_rate"]
                               for s in (0, 1)])
    assert rates["oracle_greedy"] > rates["edf"] > rates["random"]
