"""The batched simulator: equal to B PettingZoo envs, deterministic, validates its input."""

from __future__ import annotations

import numpy as np
import pytest

import core_env
from core_env.batched import EPISODE_KEYS

from .helpers import SMALL, obs_matrix


def _masked_actions(mask, rng):
    b, n, _ = mask.shape
    out = np.zeros((b, n), dtype=np.int64)
    for i in range(b):
        for j in range(n):
            out[i, j] = rng.choice(np.flatnonzero(mask[i, j]))
    return out


def _uniform_actions(mask, rng):
    return rng.integers(0, mask.shape[2], size=mask.shape[:2])


@pytest.mark.parametrize("preset, seeds, steps, overrides, policy", [
    (SMALL, [11, 12, 13], 260, {}, "masked"),
    (SMALL, [3, 4], 200, {"switch_cost": 0.3, "speed_choices": (0.5, 1.0, 2.0),
                          "shaping_beta": 2.5}, "uniform"),
    (SMALL, [5, 6, 7], 120, {"max_steps": 15, "n_nodes": 5, "max_visible_tasks": 3}, "masked"),
    ("CoRE-v0", [21, 22], 70, {"max_steps": 30}, "masked"),
    ("CoRE-Tenants-v0", [31, 32], 70, {"max_steps": 30}, "masked"),
])
def test_batched_equals_pettingzoo(preset, seeds, steps, overrides, policy):
    b = len(seeds)
    benv = core_env.make_batched(preset, num_envs=b, seed=seeds, **overrides)
    obs, mask = benv.reset()
    envs = [core_env.parallel_env(preset=preset, **overrides) for _ in seeds]
    pz = [e.reset(seed=s)[0] for e, s in zip(envs, seeds, strict=False)]
    rng = np.random.default_rng(0)
    episodes_seen = [0] * b
    for t in range(steps):
        for i, e in enumerate(envs):
            o, m = obs_matrix(e, pz[i])
            assert np.array_equal(o, obs[i]), (t, i)
            assert np.array_equal(m, mask[i]), (t, i)
            assert np.array_equal(e.state(), benv.states()[i]), (t, i)
        acts = _masked_actions(mask, rng) if policy == "masked" else _uniform_actions(mask, rng)
        obs, mask, rew, done, info = benv.step(acts)
        assert rew.shape == (b,) and done.dtype == bool
        assert np.array_equal(done, info["terminated"] | info["truncated"])
        tenants = benv.config.workload.n_tenants
        if tenants:  # this step's successes by tenant
            assert info["tenant_successes"].shape == (b, tenants)
            assert np.array_equal(info["tenant_successes"].sum(axis=1), info["successes"])
        else:
            assert "tenant_successes" not in info and "tenant_arrived" not in info["episode"]
        for i, e in enumerate(envs):
            po, r, te, tr, inf = e.step({a: int(acts[i, j])
                                         for j, a in enumerate(e.possible_agents)})
            assert r["node_0"] == rew[i], (t, i)
            assert te["node_0"] == info["terminated"][i] and tr["node_0"] == info["truncated"][i]
            if done[i]:
                assert i in info["episode"]["env"].tolist()
                row = info["episode"]["env"].tolist().index(i)
                for key, val in inf["node_0"]["episode"].items():
                    if key != "groups":  # the PettingZoo env's only (docs/env.md)
                        assert info["episode"][key][row] == val, key
                if tenants:  # the tenant grouping, as arrays
                    counts = inf["node_0"]["episode"]["groups"]["tenant"]
                    for kind in ("arrived", "completed"):
                        want = [counts.get(f"tenant {g}", {}).get(kind, 0)
                                for g in range(tenants)]
                        assert info["episode"][f"tenant_{kind}"][row].tolist() == want
                episodes_seen[i] += 1
                po, _ = e.reset()  # continue env i's generator, like the auto-reset
            else:
                assert i not in info["episode"]["env"].tolist()
            pz[i] = po
    assert sum(episodes_seen) >= b  # the run went across auto-resets


def test_episode_info_format():
    benv = core_env.make_batched(SMALL, num_envs=3, seed=0, max_steps=4)
    obs, mask = benv.reset()
    for t in range(4):
        obs, mask, rew, done, info = benv.step(np.zeros((3, 4), dtype=np.int64))
        ep = info["episode"]
        assert set(ep) == {"env", *EPISODE_KEYS}
        if t < 3:
            assert not done.any() and all(v.shape == (0,) for v in ep.values())
        else:
            assert done.all() and info["truncated"].all()
            assert ep["env"].tolist() == [0, 1, 2]
            assert ep["length"].tolist() == [4, 4, 4]
            assert ep["completed"].dtype == np.int64 and ep["return"].dtype == np.float64
    assert np.all(obs[:, :, benv.layout.index("time")] == 0)  # auto-reset: a new episode
    assert info["successes"].shape == (3,)


def _run(benv, seed, steps, rng_seed):
    rng = np.random.default_rng(rng_seed)
    out = [benv.reset(seed=seed)]
    mask = out[0][1]
    for _ in range(steps):
        res = benv.step(_masked_actions(mask, rng))
        mask = res[1]
        out.append(res)
    return out


def _assert_same(r1, r2):
    assert len(r1) == len(r2)
    for a, b in zip(r1, r2, strict=False):
        for x, y in zip(a, b, strict=False):
            if isinstance(x, dict):
                assert x.keys() == y.keys()
                for k in x:
                    if isinstance(x[k], dict):
                        for kk in x[k]:
                            assert np.array_equal(x[k][kk], y[k][kk]), (k, kk)
                    else:
                        assert np.array_equal(x[k], y[k]), k
            else:
                assert np.array_equal(x, y)


def test_batched_determinism_int_seed():
    r1 = _run(core_env.make_batched(SMALL, num_envs=4), 7, 150, 0)
    r2 = _run(core_env.make_batched(SMALL, num_envs=4), 7, 150, 0)
    _assert_same(r1, r2)
    # the same object reset with the same seed replays too
    benv = core_env.make_batched(SMALL, num_envs=4)
    _run(benv, 99, 20, 3)
    _assert_same(r1, _run(benv, 7, 150, 0))


def test_int_seed_spawns_distinct_streams():
    """reset(seed=s) gives each environment its own stream: after a few idle slots with a
    heavy load the environments' states differ from each other and from another seed's."""
    def states_after(seed):
        benv = core_env.make_batched(SMALL, num_envs=3, seed=seed, load=3.0)
        benv.reset()
        for _ in range(6):
            benv.step(np.zeros((3, 4), dtype=np.int64))
        return benv.states()
    s5, s6 = states_after(5), states_after(6)
    assert not np.array_equal(s5[0], s5[1]) and not np.array_equal(s5[1], s5[2])
    assert not np.array_equal(s5, s6)
    assert np.array_equal(s5, states_after(5))


def test_default_seed_from_constructor_and_env_id_prefix():
    a = core_env.make_batched("core_env/CoRE-Small-v0", num_envs=2, seed=[1, 2])
    b = core_env.make_batched(SMALL, num_envs=2)
    oa, ma = a.reset()
    ob, mb = b.reset(seed=[1, 2])
    assert np.array_equal(oa, ob) and np.array_equal(ma, mb)
    assert oa.shape == (2, 4, a.layout.size) and oa.dtype == np.float32
    assert ma.shape == (2, 4, 9) and ma.dtype == np.int8


def test_copy_semantics():
    benv = core_env.make_batched(SMALL, num_envs=2, seed=0, load=3.0)
    obs0, mask0 = benv.reset()
    keep = obs0.copy()
    rng = np.random.default_rng(0)
    obs1, mask1, *_ = benv.step(_masked_actions(mask0, rng))
    assert np.array_equal(obs0, keep)  # copy=True: returned arrays are not overwritten
    assert obs1 is not obs0
    fast = core_env.make_batched(SMALL, num_envs=2, seed=0, load=3.0, copy=False)
    f0, fm0 = fast.reset()
    assert np.array_equal(f0, keep)
    f1, *_ = fast.step(_masked_actions(fm0, np.random.default_rng(0)))
    assert np.array_equal(f1, obs1)


# ---------------------------------------------------------------- bad input
BAD = [
    ("wrong shape", lambda b, n, k: np.zeros((b, n + 1), dtype=np.int64)),
    ("transposed", lambda b, n, k: np.zeros((n, b), dtype=np.int64)),
    ("flat", lambda b, n, k: np.zeros(b * n, dtype=np.int64)),
    ("float dtype", lambda b, n, k: np.zeros((b, n), dtype=np.float32)),
    ("bool dtype", lambda b, n, k: np.zeros((b, n), dtype=bool)),
    ("object", lambda b, n, k: np.full((b, n), "1", dtype=object)),
    ("negative", lambda b, n, k: np.full((b, n), -1, dtype=np.int64)),
    ("too large", lambda b, n, k: np.full((b, n), k + 1, dtype=np.int64)),
    ("one too large", lambda b, n, k: np.pad(np.zeros((b, n - 1), dtype=np.int8), ((0, 0), (0, 1)),
                                             constant_values=k + 1)),
]


@pytest.mark.parametrize("name, make_bad", BAD, ids=[x[0] for x in BAD])
def test_batched_bad_actions_raise_and_leave_state_unchanged(name, make_bad):
    envs = [core_env.make_batched(SMALL, num_envs=3, seed=[1, 2, 3], load=2.0) for _ in range(2)]
    rng = np.random.default_rng(0)
    masks = [e.reset()[1] for e in envs]
    for _ in range(5):
        acts = _masked_actions(masks[0], rng)
        masks = [e.step(acts)[1] for e in envs]
    with pytest.raises(ValueError):
        envs[0].step(make_bad(3, 4, 8))
    assert np.array_equal(envs[0].states(), envs[1].states())
    for _ in range(40):
        acts = _masked_actions(masks[0], rng)
        r0, r1 = envs[0].step(acts), envs[1].step(acts)
        assert np.array_equal(r0[0], r1[0]) and np.array_equal(r0[2], r1[2])
        masks = [r0[1], r1[1]]


def test_batched_step_before_reset_and_bad_constructor_args():
    with pytest.raises(RuntimeError):
        core_env.make_batched(SMALL, num_envs=2).step(np.zeros((2, 4), dtype=np.int64))
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="num_envs"):
            core_env.make_batched(SMALL, num_envs=bad)
    with pytest.raises(ValueError, match="seed"):
        core_env.make_batched(SMALL, num_envs=2).reset(seed=[1, 2, 3])
    with pytest.raises(ValueError):
        core_env.make_batched("CoRE-Nope-v0", num_envs=2)


def test_states_shape_and_space():
    benv = core_env.make_batched(SMALL, num_envs=3, seed=0)
    benv.reset()
    env = core_env.parallel_env(preset=SMALL)
    st = benv.states()
    assert st.shape == (3, env.state_space.shape[0]) and st.dtype == np.float32
    assert all(env.state_space.contains(s) for s in st)


def test_auto_reset_after_truncation_with_untrained_tasks():
    """Episodes truncated while their tasks were never trained: the next episode's first
    observation (same task rows in the same slots, no observations yet) must still describe
    the new tasks, exactly as a PettingZoo env reset() would."""
    seeds = [1, 2, 3]
    benv = core_env.make_batched(SMALL, num_envs=3, seed=seeds, max_steps=2, load=6.0)
    obs, _ = benv.reset()
    envs = [core_env.parallel_env(preset=SMALL, max_steps=2, load=6.0) for _ in seeds]
    pz = [e.reset(seed=s)[0] for e, s in zip(envs, seeds, strict=False)]
    for i, (e, po) in enumerate(zip(envs, pz, strict=False)):  # the first observations too
        o, _ = obs_matrix(e, po)
        assert np.array_equal(o, obs[i]), i
    resets = 0
    for t in range(12):
        acts = np.zeros((3, 4), dtype=np.int64)
        obs, mask, rew, done, info = benv.step(acts)
        for i, e in enumerate(envs):
            po, *_ = e.step({a: 0 for a in e.possible_agents})
            if done[i]:
                po, _ = e.reset()
                resets += 1
            o, m = obs_matrix(e, po)
            assert np.array_equal(o, obs[i]), (t, i)
            assert np.array_equal(m, mask[i]), (t, i)
    assert resets == 18
