"""The PettingZoo parallel/AEC environment: API conformance, spaces, seeding, episode end,
bad input (SPEC §3)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test

import core_env
from core_env import scheduler_v0

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

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# ---------------------------------------------------------------- PettingZoo's own tests
@pytest.mark.parametrize("preset, cycles", [(SMALL, 400), ("CoRE-v0", 200)])
def test_parallel_api_test(preset, cycles):
    parallel_api_test(core_env.parallel_env(preset=preset), num_cycles=cycles)


@pytest.mark.parametrize("preset", [SMALL, "CoRE-v0"])
def test_parallel_seed_test(preset):
    parallel_seed_test(lambda: core_env.parallel_env(preset=preset), num_cycles=300)


def test_aec_api_test():
    api_test(scheduler_v0.env(preset=SMALL), num_cycles=300)


def test_aec_env_runs_a_masked_episode():
    env = scheduler_v0.env(preset=SMALL)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    steps = 0
    for agent in env.agent_iter(max_iter=100_000):
        obs, rew, term, trunc, info = env.last()
        if term or trunc:
            action = None
        else:
            assert env.observation_space(agent).contains(obs)
            action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        env.step(action)
        steps += 1
    assert steps > 4 * 10
    assert env.agents == []


# ---------------------------------------------------------------- spaces
def test_spaces_shapes_and_dtypes():
    env = core_env.parallel_env(preset=SMALL, n_nodes=3, max_visible_tasks=5)
    assert env.possible_agents == ["node_0", "node_1", "node_2"]
    for a in env.possible_agents:
        sp = env.observation_space(a)
        assert isinstance(sp, spaces.Dict)
        assert set(sp.spaces) == {"observation", "action_mask"}
        assert sp["observation"].dtype == np.float32
        assert sp["observation"].shape == (env.layout.size,)
        assert sp["action_mask"].dtype == np.int8 and sp["action_mask"].shape == (6,)
        assert env.action_space(a) == spaces.Discrete(6)
    assert env.state_space.shape == (env.state_layout.size,)
    assert env.state_space.dtype == np.float32


def _check_step_obs(env, obs):
    o, m = obs_matrix(env, obs)
    assert np.all(np.isfinite(o))
    assert m.dtype == np.int8
    assert np.all(m[:, 0] == 1)  # idle always legal
    assert np.all((m == 0) | (m == 1))
    assert np.all(m == m[0])  # the per-node mask only depends on the slots
    for a in env.possible_agents:
        assert env.observation_space(a).contains(obs[a]), a
        assert obs[a]["observation"].dtype == np.float32
    st = env.state()
    assert st.dtype == np.float32 and np.all(np.isfinite(st))
    assert env.state_space.contains(st)


@pytest.mark.parametrize("preset, overrides, seeds, policy", [
    (SMALL, {}, [0, 1, 2, 3], "masked"),
    (SMALL, {}, [4, 5], "uniform"),
    (SMALL, {"speed_choices": (0.5, 1.0, 3.0), "switch_cost": 0.4, "shaping_beta": 3.0},
     [6, 7], "masked"),
    (SMALL, {"n_nodes": 9, "max_visible_tasks": 3, "load": 4.0, "parallelism_choices": (1, 16)},
     [8], "uniform"),
    (SMALL, {"n_nodes": 1, "max_visible_tasks": 1}, [9], "masked"),
    ("CoRE-v0", {}, [10], "masked"),
    ("CoRE-HeldOut-v0", {"arrival_slots": 60}, [11], "masked"),
    ("CoRE-Extreme-v0", {"arrival_slots": 40}, [12], "uniform"),
])
def test_every_observation_and_state_inside_its_space(preset, overrides, seeds, policy):
    env = core_env.parallel_env(preset=preset, **overrides)
    for seed in seeds:
        rng = np.random.default_rng(seed + 100)
        pol = masked_random_policy(rng) if policy == "masked" else uniform_random_policy(rng)
        obs, _ = env.reset(seed=seed)
        _check_step_obs(env, obs)
        steps = 0
        while env.agents:
            obs, rew, term, trunc, infos = env.step(pol(env, obs))
            _check_step_obs(env, obs)
            assert all(np.isfinite(r) for r in rew.values())
            steps += 1
        assert steps == final_episode_info({"infos": [infos]})["length"]


# ---------------------------------------------------------------- seeding / determinism
def _assert_same_trajectory(t1, t2):
    assert len(t1["obs"]) == len(t2["obs"])
    for o1, o2 in zip(t1["obs"], t2["obs"], strict=False):
        assert o1.keys() == o2.keys()
        for a in o1:
            assert np.array_equal(o1[a]["observation"], o2[a]["observation"])
            assert np.array_equal(o1[a]["action_mask"], o2[a]["action_mask"])
    for s1, s2 in zip(t1["states"], t2["states"], strict=False):
        assert np.array_equal(s1, s2)
    assert t1["rewards"] == t2["rewards"]
    assert t1["terms"] == t2["terms"] and t1["truncs"] == t2["truncs"]
    assert t1["infos"] == t2["infos"]


@pytest.mark.parametrize("preset, seed", [(SMALL, 21), (SMALL, 22), ("CoRE-v0", 23)])
def test_full_episode_bit_identical_for_same_seed_and_actions(preset, seed):
    env1 = core_env.parallel_env(preset=preset)
    t1 = run_episode(env1, seed, masked_random_policy(np.random.default_rng(seed)))
    env2 = core_env.parallel_env(preset=preset)
    t2 = run_episode(env2, seed, replay_policy(t1["actions"]))
    _assert_same_trajectory(t1, t2)
    # the same env object, reset again with the same seed, also replays exactly
    t3 = run_episode(env1, seed, replay_policy(t1["actions"]))
    _assert_same_trajectory(t1, t3)


def _workload_arrays(env):
    return {name: np.copy(getattr(env.workload, name)) for name in env.workload._fields}


def test_workload_depends_on_the_seed_only():
    env_a = core_env.parallel_env(preset=SMALL)
    env_b = core_env.parallel_env(preset=SMALL)
    pols = [masked_random_policy(np.random.default_rng(1)),
            lambda env, obs: {a: 0 for a in env.agents}]  # always idle
    episodes = []
    for env, pol in zip((env_a, env_b), pols, strict=False):
        run_episode(env, 31, pol)
        first = _workload_arrays(env)
        run_episode(env, None, pol)  # continue the generator: still independent of actions
        episodes.append((first, _workload_arrays(env)))
    (a1, a2), (b1, b2) = episodes
    for name in a1:
        assert np.array_equal(a1[name], b1[name]), name
        assert np.array_equal(a2[name], b2[name]), name
    assert not np.array_equal(a1["log_loss"], a2["log_loss"])  # a new episode, new tasks


def test_different_seeds_give_different_workloads():
    env = core_env.parallel_env(preset=SMALL)
    env.reset(seed=1)
    w1 = env.workload
    env.reset(seed=2)
    w2 = env.workload
    assert w1.n_tasks != w2.n_tasks or not np.array_equal(w1.log_loss, w2.log_loss)


def test_reset_without_seed_continues_the_generator():
    env1 = core_env.parallel_env(preset=SMALL)
    env2 = core_env.parallel_env(preset=SMALL)
    env1.reset(seed=5)
    env1.reset()
    env2.reset(seed=5)
    env2.reset()
    assert np.array_equal(env1.workload.log_loss, env2.workload.log_loss)
    env3 = core_env.parallel_env(preset=SMALL)
    env3.reset(seed=5)
    assert not np.array_equal(env1.workload.log_loss, env3.workload.log_loss)


def test_no_global_rng_use():
    np.random.seed(0)
    env = core_env.parallel_env(preset=SMALL)
    t1 = run_episode(env, 8, masked_random_policy(np.random.default_rng(0)))
    np.random.seed(12345)
    state = np.random.get_state()[1].copy()
    t2 = run_episode(env, 8, replay_policy(t1["actions"]))
    _assert_same_trajectory(t1, t2)
    assert np.array_equal(np.random.get_state()[1], state)  # the env never draws from it


def test_returned_observations_are_not_overwritten_later():
    env = core_env.parallel_env(preset=SMALL)
    obs0, _ = env.reset(seed=4)
    keep = {a: (obs0[a]["observation"].copy(), obs0[a]["action_mask"].copy()) for a in obs0}
    st = env.state()
    st_copy = st.copy()
    pol = masked_random_policy(np.random.default_rng(0))
    obs = obs0
    for _ in range(15):
        obs, *_ = env.step(pol(env, obs))
    for a in obs0:
        assert np.array_equal(obs0[a]["observation"], keep[a][0])
        assert np.array_equal(obs0[a]["action_mask"], keep[a][1])
    assert np.array_equal(st, st_copy)


# ---------------------------------------------------------------- episode end
def test_truncation_at_max_steps():
    env = core_env.parallel_env(preset=SMALL, max_steps=10)
    obs, _ = env.reset(seed=0)
    pol = masked_random_policy(np.random.default_rng(0))
    for t in range(10):
        assert env.agents == env.possible_agents
        obs, rew, term, trunc, infos = env.step(pol(env, obs))
        if t < 9:
            assert not any(term.values()) and not any(trunc.values())
            assert all("episode" not in i for i in infos.values())
    assert set(trunc) == set(env.possible_agents)
    assert all(trunc.values()) and not any(term.values())
    for a in env.possible_agents:
        assert infos[a]["TimeLimit.truncated"] is True
        assert infos[a]["episode"]["length"] == 10
    assert env.agents == []
    with pytest.raises(RuntimeError):
        env.step({a: 0 for a in env.possible_agents})
    with pytest.raises(RuntimeError):
        env.step({})


def test_termination_resolves_every_arrived_task():
    env = core_env.parallel_env(preset=SMALL)
    for seed in range(3):
        traj = run_episode(env, seed, masked_random_policy(np.random.default_rng(seed)))
        last_term, last_trunc = traj["terms"][-1], traj["truncs"][-1]
        assert all(last_term.values()) and not any(last_trunc.values())
        for infos in traj["infos"][-1].values():
            assert "TimeLimit.truncated" not in infos
        ep = final_episode_info(traj)
        assert ep["arrived"] == env.workload.n_tasks
        assert ep["arrived"] == ep["completed"] + ep["expired"]
        assert ep["completion_rate"] == pytest.approx(ep["completed"] / max(ep["arrived"], 1))
        assert 0.0 <= ep["utilization"] <= 1.0
        assert ep["length"] == len(traj["actions"])
        assert ep["length"] >= env.config.workload.arrival_slots
        assert ep["length"] < env.config.max_steps
        assert ep["return"] == pytest.approx(sum(team_rewards(traj)), abs=1e-9)
        assert env.agents == []
        # every agent gets the same episode info and the same reward
        assert all(i["episode"] == ep for i in traj["infos"][-1].values())
        for rew in traj["rewards"]:
            assert len(set(rew.values())) == 1


def test_step_before_reset_raises():
    env = core_env.parallel_env(preset=SMALL)
    with pytest.raises(RuntimeError):
        env.step({a: 0 for a in env.possible_agents})


def test_reset_returns_all_agents_and_empty_infos():
    env = core_env.parallel_env(preset=SMALL)
    obs, infos = env.reset(seed=0)
    assert env.agents == env.possible_agents
    assert set(obs) == set(infos) == set(env.possible_agents)
    assert all(i == {} for i in infos.values())
    # after an episode end, reset brings every agent back
    env2 = core_env.parallel_env(preset=SMALL, max_steps=2)
    env2.reset(seed=0)
    env2.step({a: 0 for a in env2.agents})
    env2.step({a: 0 for a in env2.agents})
    assert env2.agents == []
    env2.reset()
    assert env2.agents == env2.possible_agents


# ---------------------------------------------------------------- bad input
def _twins(seed=7, steps=5):
    envs = [core_env.parallel_env(preset=SMALL, shaping_beta=2.0) for _ in range(2)]
    acts = []
    rng = np.random.default_rng(0)
    obs = [e.reset(seed=seed)[0] for e in envs]
    for _ in range(steps):  # get into the middle of an episode
        a = masked_random_policy(rng)(envs[0], obs[0])
        acts.append(a)
        obs = [e.step(a)[0] for e in envs]
    return envs, obs[0]


def _assert_twins_equal(env, twin, n_steps=25):
    assert np.array_equal(env.state(), twin.state())
    assert env.agents == twin.agents
    rng = np.random.default_rng(99)
    for _ in range(n_steps):
        if not twin.agents:
            break
        acts = {a: int(rng.integers(twin.action_space(a).n)) for a in twin.agents}
        r1, r2 = env.step(dict(acts)), twin.step(dict(acts))
        for a in twin.possible_agents:
            assert np.array_equal(r1[0][a]["observation"], r2[0][a]["observation"])
        assert r1[1:] == r2[1:]
        assert np.array_equal(env.state(), twin.state())


BAD_ACTIONS = [
    ("unknown agent", lambda ok: {**ok, "node_9": 0}, KeyError, "node_9"),
    ("typo agent", lambda ok: {**{k: v for k, v in ok.items() if k != "node_1"}, "node 1": 1},
     KeyError, "node 1"),
    ("float", lambda ok: {**ok, "node_2": 1.0}, ValueError, "node_2"),
    ("numpy float", lambda ok: {**ok, "node_1": np.float32(2)}, ValueError, "node_1"),
    ("string", lambda ok: {**ok, "node_3": "1"}, ValueError, "node_3"),
    ("bool", lambda ok: {**ok, "node_0": True}, ValueError, "node_0"),
    ("none", lambda ok: {**ok, "node_1": None}, ValueError, "node_1"),
    ("array", lambda ok: {**ok, "node_2": np.array([1])}, ValueError, "node_2"),
    ("negative", lambda ok: {**ok, "node_1": -1}, ValueError, "node_1"),
    ("too large", lambda ok: {**ok, "node_3": 9}, ValueError, "node_3"),
    ("huge numpy", lambda ok: {**ok, "node_0": np.int64(1000)}, ValueError, "node_0"),
    ("missing", lambda ok: {k: v for k, v in ok.items() if k != "node_2"}, KeyError, "node_2"),
    ("empty", lambda ok: {}, KeyError, "node_0"),
]


@pytest.mark.parametrize("name, make_bad, exc, agent", BAD_ACTIONS,
                         ids=[b[0] for b in BAD_ACTIONS])
def test_bad_actions_raise_naming_the_agent_and_leave_state_unchanged(name, make_bad, exc, agent):
    (env, twin), obs = _twins()
    # a valid joint action (the bad one is built on top of it, so the valid parts come first)
    ok = {a: int(np.flatnonzero(obs[a]["action_mask"])[-1]) for a in env.agents}
    with pytest.raises(exc) as err:
        env.step(make_bad(ok))
    assert agent in str(err.value)
    _assert_twins_equal(env, twin)


def test_actions_not_a_dict_rejected():
    (env, twin), _ = _twins()
    with pytest.raises(ValueError):
        env.step([0, 0, 0, 0])
    _assert_twins_equal(env, twin)


def test_numpy_integer_actions_accepted():
    (env, twin), obs = _twins()
    acts = {a: int(np.flatnonzero(obs[a]["action_mask"])[-1]) for a in env.agents}
    r1 = env.step({a: np.int64(v) for a, v in acts.items()})
    r2 = twin.step({a: np.array(v, dtype=np.int8) for a, v in acts.items()})  # 0-d array
    assert r1[1:] == r2[1:]
    assert np.array_equal(env.state(), twin.state())


def test_masked_but_in_range_action_runs_as_idle_and_is_counted():
    env = core_env.parallel_env(preset=SMALL, max_steps=40)
    twin = core_env.parallel_env(preset=SMALL, max_steps=40)
    obs, _ = env.reset(seed=3)
    twin.reset(seed=3)
    n_illegal = 0
    rng = np.random.default_rng(5)
    while env.agents:
        act, twin_act = {}, {}
        for a in env.agents:
            m = obs[a]["action_mask"]
            empty = np.flatnonzero(m == 0)
            if empty.size and rng.random() < 0.5:
                act[a], twin_act[a] = int(rng.choice(empty)), 0  # illegal vs explicit idle
                n_illegal += 1
            else:
                act[a] = twin_act[a] = int(rng.choice(np.flatnonzero(m)))
        obs, r, te, tr, inf = env.step(act)
        obs2, r2, te2, tr2, inf2 = twin.step(twin_act)
        o1, _ = obs_matrix(env, obs)
        o2, _ = obs_matrix(twin, obs2)
        assert np.array_equal(o1, o2) and r == r2
    assert n_illegal > 10
    ep1, ep2 = inf["node_0"]["episode"], inf2["node_0"]["episode"]
    assert ep1["illegal_actions"] == n_illegal
    assert ep2["illegal_actions"] == 0
    ep1 = {k: v for k, v in ep1.items() if k != "illegal_actions"}
    ep2 = {k: v for k, v in ep2.items() if k != "illegal_actions"}
    assert ep1 == ep2


# ---------------------------------------------------------------- misc
def test_render_ansi():
    env = core_env.parallel_env(preset=SMALL, render_mode="ansi")
    env.reset(seed=0)
    out = env.render()
    assert isinstance(out, str) and out.startswith("t=0")
    env.step({a: 0 for a in env.agents})
    assert env.render().startswith("t=1")
    assert core_env.parallel_env(preset=SMALL).render() is None
    with pytest.raises(ValueError, match="render_mode"):
        core_env.parallel_env(preset=SMALL, render_mode="human")


def test_agents_fixed_during_episode():
    env = core_env.parallel_env(preset=SMALL, n_nodes=6)
    obs, _ = env.reset(seed=2)
    pol = masked_random_policy(np.random.default_rng(0))
    while True:
        assert env.agents == [f"node_{i}" for i in range(6)]
        obs, rew, term, trunc, infos = env.step(pol(env, obs))
        assert set(rew) == set(term) == set(trunc) == set(infos) == set(env.possible_agents)
        if any(term.values()) or any(trunc.values()):
            break
    assert env.agents == []


def test_metadata_and_module_convention():
    assert core_env.CoreSchedulerEnv.metadata["is_parallelizable"] is True
    assert scheduler_v0.raw_env is core_env.CoreSchedulerEnv
    assert isinstance(scheduler_v0.parallel_env(preset=SMALL), core_env.CoreSchedulerEnv)
    aec = scheduler_v0.env(preset=SMALL, n_nodes=2)
    assert aec.possible_agents == ["node_0", "node_1"]
    assert core_env.raw_env is scheduler_v0.raw_env


def test_core_env_env_is_the_module_again():
    import importlib

    module = importlib.import_module("core_env.env")
    assert core_env.env is module and core_env.env.CoreSchedulerEnv is core_env.CoreSchedulerEnv
    with pytest.warns(DeprecationWarning, match="use core_env.scheduler_v0.env"):
        aec = core_env.env(preset=SMALL, n_nodes=2)  # the old call still builds the AEC env
    assert aec.possible_agents == ["node_0", "node_1"]
