"""The centralised single-agent Gymnasium view (SPEC §3: gymnasium.make(...))."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import core_env

from .helpers import SMALL, obs_matrix

PRESET_IDS = ["CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0", "CoRE-Small-v0"]

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_gymnasium_env_checker():
    env = gymnasium.make("core_env:core_env/CoRE-Small-v0")
    check_env(env.unwrapped)
    check_env(gymnasium.make("core_env:core_env/CoRE-Small-v0", n_nodes=2,
                             max_visible_tasks=3).unwrapped)


@pytest.mark.parametrize("preset", PRESET_IDS)
def test_all_presets_makeable(preset):
    env = gymnasium.make(f"core_env:core_env/{preset}")
    base = env.unwrapped
    assert isinstance(base, core_env.CentralCoreEnv) and isinstance(base, gymnasium.Env)
    assert base.config == core_env.make_config(preset)
    n, k = base.config.cluster.n_nodes, base.config.cluster.max_visible_tasks
    assert env.action_space == spaces.MultiDiscrete([k + 1] * n)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    env.close()


def test_overrides_through_gymnasium_make():
    env = gymnasium.make("core_env:core_env/CoRE-v0", n_nodes=3, max_visible_tasks=4)
    assert env.action_space == spaces.MultiDiscrete([5, 5, 5])
    assert env.observation_space["action_mask"].shape == (3, 5)


def test_only_the_central_view_is_registered_with_gymnasium():
    env = gymnasium.make("core_env:core_env/CoRE-Small-v0")
    assert not isinstance(env.unwrapped, core_env.CoreSchedulerEnv)


def test_action_masks_format_and_consistency_over_an_episode():
    env = core_env.CentralCoreEnv(preset=SMALL)
    n, k1 = env.n_nodes, env.n_actions
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(0)
    done = False
    steps = 0
    while not done:
        am = env.action_masks()
        assert am.shape == (n * k1,) and am.dtype == bool
        assert np.array_equal(am, obs["action_mask"].astype(bool).ravel())
        assert obs["action_mask"].dtype == np.int8 and np.all(obs["action_mask"][:, 0] == 1)
        assert env.observation_space.contains(obs)
        action = np.array([rng.choice(np.flatnonzero(am.reshape(n, k1)[i])) for i in range(n)])
        obs, rew, term, trunc, info = env.step(action)
        assert isinstance(rew, float) and isinstance(term, bool) and isinstance(trunc, bool)
        done = term or trunc
        steps += 1
    assert info["episode"]["length"] == steps
    assert info["episode"]["illegal_actions"] == 0


def test_central_equals_pettingzoo_trajectory():
    cen = core_env.CentralCoreEnv(preset=SMALL, shaping_beta=1.5)
    par = core_env.parallel_env(preset=SMALL, shaping_beta=1.5)
    obs_c, _ = cen.reset(seed=4)
    obs_p, _ = par.reset(seed=4)
    rng = np.random.default_rng(1)
    total = 0.0
    while True:
        _, m = obs_matrix(par, obs_p)
        assert np.array_equal(obs_c["action_mask"], m)
        assert np.array_equal(obs_c["state"], par.state())
        action = rng.integers(0, cen.n_actions, size=cen.n_nodes)  # illegal ones included
        obs_c, r_c, te_c, tr_c, info_c = cen.step(action)
        obs_p, r_p, te_p, tr_p, info_p = par.step(dict(zip(par.possible_agents,
                                                           action.tolist(), strict=False)))
        assert r_c == r_p["node_0"] and te_c == te_p["node_0"] and tr_c == tr_p["node_0"]
        total += r_c
        if te_c or tr_c:  # the same statistics, plus SB3's entries
            ep_c, ep_p = info_c["episode"], info_p["node_0"]["episode"]
            assert (ep_c["r"], ep_c["l"]) == (ep_p["return"], ep_p["length"])
            assert {k: v for k, v in ep_c.items() if k not in ("r", "l")} == ep_p
            assert info_c["completion_rate"] == ep_p["completion_rate"]
            assert set(info_c) - {"completion_rate"} == set(info_p["node_0"])
            break
    assert total == pytest.approx(info_c["episode"]["completed"], abs=1e-6)
    with pytest.raises(RuntimeError):
        cen.step(np.zeros(cen.n_nodes, dtype=np.int64))


def test_central_truncation_flag():
    env = core_env.CentralCoreEnv(preset=SMALL, max_steps=3)
    env.reset(seed=0)
    for _ in range(3):
        obs, rew, term, trunc, info = env.step(np.zeros(4, dtype=np.int64))
    assert trunc and not term
    assert info["TimeLimit.truncated"] is True and info["episode"]["length"] == 3


@pytest.mark.parametrize("bad", [np.zeros(3, dtype=np.int64), np.zeros((4, 1), dtype=np.int64),
                                 np.zeros(4, dtype=np.float64), np.full(4, 9, dtype=np.int64),
                                 np.full(4, -1, dtype=np.int64)],
                         ids=["short", "2d", "float", "too large", "negative"])
def test_central_bad_actions_raise_value_error_and_leave_state(bad):
    env = core_env.CentralCoreEnv(preset=SMALL)
    twin = core_env.CentralCoreEnv(preset=SMALL)
    env.reset(seed=2)
    twin.reset(seed=2)
    with pytest.raises(ValueError):
        env.step(bad)
    a = np.ones(4, dtype=np.int64)
    o1, r1, *_ = env.step(a)
    o2, r2, *_ = twin.step(a)
    assert np.array_equal(o1["state"], o2["state"]) and r1 == r2


def test_central_seeding_deterministic():
    def run(seed):
        env = core_env.CentralCoreEnv(preset=SMALL)
        obs, _ = env.reset(seed=seed)
        out = [obs["state"]]
        rng = np.random.default_rng(0)
        for _ in range(30):
            obs, r, te, tr, _ = env.step(rng.integers(0, 9, size=4))
            out.append(obs["state"])
            if te or tr:
                break
        return np.stack(out)
    assert np.array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))
