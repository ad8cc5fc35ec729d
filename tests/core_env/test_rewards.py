"""Reward: C_t + beta * (Phi(s_{t+1}) - Phi(s_t)), Phi = 0 at the first and last state, so the
episode's shaped return equals its number of successes for every beta (SPEC §3 "Reward")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import core_env

from .helpers import (
    SMALL,
    final_episode_info,
    masked_random_policy,
    obs_matrix,
    replay_policy,
    run_episode,
    team_rewards,
    uniform_random_policy,
)

BETAS = [0.0, 0.5, 1.0, 3.0]


def _record(preset, seed, **overrides):
    env = core_env.parallel_env(preset=preset, shaping_beta=0.0, **overrides)
    return run_episode(env, seed, masked_random_policy(np.random.default_rng(seed)))["actions"]


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("preset, seed, overrides", [
    (SMALL, 0, {}), (SMALL, 1, {}), (SMALL, 2, {"max_steps": 10}), (SMALL, 3, {"max_steps": 25}),
    ("CoRE-v0", 4, {}),
])
def test_shaped_return_equals_completions(beta, preset, seed, overrides):
    env = core_env.parallel_env(preset=preset, shaping_beta=beta, **overrides)
    traj = run_episode(env, seed, masked_random_policy(np.random.default_rng(seed)))
    ep = final_episode_info(traj)
    total = sum(team_rewards(traj))
    assert total == pytest.approx(ep["completed"], abs=1e-6)
    assert ep["return"] == pytest.approx(total, abs=1e-9)
    if "max_steps" in overrides:
        assert all(traj["truncs"][-1].values())
        assert traj["infos"][-1]["node_0"]["TimeLimit.truncated"] is True
        assert ep["length"] == overrides["max_steps"]
    if beta == 0.0:
        assert all(float(r).is_integer() and r >= 0 for r in team_rewards(traj))


def test_truncated_episode_with_shaping_forces_phi_to_zero():
    """With tasks still in progress at the time limit the last reward must include
    -beta * Phi(s_T), otherwise the return would not equal the completions."""
    env = core_env.parallel_env(preset=SMALL, shaping_beta=2.0, max_steps=10, load=4.0)
    traj = run_episode(env, 0, masked_random_policy(np.random.default_rng(0)))
    progress_before_end = traj["obs"][-2]["node_0"]["observation"][
        env.layout.task_columns("progress")].sum()
    assert progress_before_end > 0  # the test is only meaningful if Phi > 0 at the end
    assert sum(team_rewards(traj)) == pytest.approx(final_episode_info(traj)["completed"],
                                                    abs=1e-6)


@pytest.mark.parametrize("preset, seed, overrides", [(SMALL, 5, {}), (SMALL, 6, {"max_steps": 12}),
                                                     ("CoRE-v0", 7, {"arrival_slots": 50})])
def test_beta_changes_rewards_but_not_the_trajectory(preset, seed, overrides):
    actions = _record(preset, seed, **overrides)
    trajs = {}
    for beta in BETAS:
        env = core_env.parallel_env(preset=preset, shaping_beta=beta, **overrides)
        trajs[beta] = run_episode(env, seed, replay_policy(actions))
    ref = trajs[0.0]
    for traj in trajs.values():
        assert final_episode_info(traj)["completed"] == final_episode_info(ref)["completed"]
        for key in ("arrived", "expired", "length", "switches", "utilization"):
            assert final_episode_info(traj)[key] == final_episode_info(ref)[key]
        for o1, o2 in zip(traj["obs"], ref["obs"], strict=False):
            assert all(np.array_equal(o1[a]["observation"], o2[a]["observation"]) for a in o1)
    assert team_rewards(trajs[3.0]) != team_rewards(trajs[0.0])  # shaping is not a no-op


@pytest.mark.parametrize("beta", [0.5, 3.0])
def test_per_step_reward_is_successes_plus_potential_difference(beta):
    """r_t - beta * (sum(progress_{t+1}) - sum(progress_t)) is the (integer) success count,
    with Phi = 0 after the last step; successes match the beta=0 rewards of the same run."""
    actions = _record(SMALL, 8)
    env = core_env.parallel_env(preset=SMALL, shaping_beta=beta)
    traj = run_episode(env, 8, replay_policy(actions))
    env0 = core_env.parallel_env(preset=SMALL, shaping_beta=0.0)
    succ = team_rewards(run_episode(env0, 8, replay_policy(actions)))
    cols = env.layout.task_columns("progress")
    phi = [float(o["node_0"]["observation"][cols].astype(np.float64).sum()) for o in traj["obs"]]
    assert phi[0] == 0.0
    phi[-1] = 0.0
    for t, r in enumerate(team_rewards(traj)):
        c = r - beta * (phi[t + 1] - phi[t])
        assert c == pytest.approx(succ[t], abs=1e-4), t
    assert sum(succ) == final_episode_info(traj)["completed"]


def test_rewards_identical_for_all_agents_and_progress_in_range():
    env = core_env.parallel_env(preset=SMALL, shaping_beta=1.0)
    traj = run_episode(env, 9, masked_random_policy(np.random.default_rng(9)))
    for rew in traj["rewards"]:
        assert set(rew) == set(env.possible_agents) and len(set(rew.values())) == 1
    cols = env.layout.task_columns("progress")
    for obs in traj["obs"]:
        p = obs["node_0"]["observation"][cols]
        assert np.all((p >= 0) & (p <= 1))


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 6), k=st.integers(1, 6), load=st.floats(0.5, 6.0),
       beta=st.sampled_from([0.0, 0.3, 1.0, 7.5]), max_steps=st.sampled_from([None, 5, 20]),
       switch_cost=st.sampled_from([0.0, 0.5]), seed=st.integers(0, 1000),
       masked=st.booleans())
def test_identity_and_spaces_on_random_configs(n, k, load, beta, max_steps, switch_cost, seed,
                                               masked):
    env = core_env.parallel_env(preset=SMALL, n_nodes=n, max_visible_tasks=k, load=load,
                                shaping_beta=beta, max_steps=max_steps, switch_cost=switch_cost,
                                arrival_slots=20)
    rng = np.random.default_rng(seed)
    pol = masked_random_policy(rng) if masked else uniform_random_policy(rng)
    traj = run_episode(env, seed, pol)
    ep = final_episode_info(traj)
    assert sum(team_rewards(traj)) == pytest.approx(ep["completed"], abs=1e-6)
    if not any(traj["truncs"][-1].values()):
        assert ep["arrived"] == ep["completed"] + ep["expired"]
    else:
        assert ep["arrived"] >= ep["completed"] + ep["expired"]
    for obs, state in zip(traj["obs"], traj["states"], strict=False):
        o, m = obs_matrix(env, obs)
        assert np.all(np.isfinite(o)) and np.all(m[:, 0] == 1)
        assert all(env.observation_space(a).contains(obs[a]) for a in env.possible_agents)
        assert env.state_space.contains(state)
