"""Workload generation and validation (SPEC §3 seeding, §6): a pure function of the seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import core_env
from core_env import generate_workload, make_config
from core_env.curves import FAMILIES, GRID_SIZE, WORK_MAX, WORK_MIN, interp_log_loss
from core_env.workload import validate_workload

from .helpers import SMALL, make_workload, masked_random_policy, run_episode, task

FIELDS = ("arrival", "deadline", "log_target", "cap", "alpha", "family", "log_loss",
          "true_log_loss", "speeds")


def _equal(w1, w2):
    return all(np.array_equal(getattr(w1, f), getattr(w2, f)) for f in FIELDS)


@pytest.mark.parametrize("preset", ["CoRE-v0", "CoRE-HeldOut-v0", SMALL])
def test_generated_workload_respects_the_config(preset):
    cfg = make_config(preset)
    w = cfg.workload
    for seed in range(3):
        wl = generate_workload(cfg, np.random.default_rng(seed))
        m = wl.n_tasks
        assert 0 < m <= w.max_tasks
        assert wl.arrival.shape == (m,) and wl.log_loss.shape == (m, GRID_SIZE)
        assert wl.true_log_loss.shape == (m, GRID_SIZE)
        assert wl.speeds.shape == (cfg.cluster.n_nodes,)
        assert wl.arrival.dtype == np.int64 and wl.deadline.dtype == np.int64
        assert wl.cap.dtype == np.int64 and wl.family.dtype == np.int8
        assert np.all(np.diff(wl.arrival) >= 0)  # FIFO order
        assert np.all((wl.arrival >= 0) & (wl.arrival < w.arrival_slots))
        window = wl.deadline - wl.arrival
        assert np.all((window >= w.window[0]) & (window <= w.window[1]))
        assert set(np.unique(wl.cap)) <= set(w.parallelism_choices)
        assert np.all((wl.alpha >= w.alpha_range[0]) & (wl.alpha <= w.alpha_range[1]))
        assert np.all((wl.family >= 0) & (wl.family < len(FAMILIES)))
        assert np.all(wl.speeds == 1.0)
        for name in FIELDS:
            assert np.all(np.isfinite(getattr(wl, name))), name
        # the target is the hidden curve's value at the required work, which lies in range
        s_req = wl.required_work
        assert np.all(np.isfinite(s_req))
        assert np.all(s_req <= w.required_work[1] * (1 + 1e-3))
        np.testing.assert_allclose(interp_log_loss(wl.true_log_loss.astype(np.float64),
                                                   np.log(s_req)), wl.log_target, atol=1e-4)
        # the observed path is the hidden curve plus a (small, non-zero) noise path
        noise = wl.log_loss.astype(np.float64) - wl.true_log_loss
        assert 0 < np.abs(noise).max() < 2.0
        # all curves are decreasing overall
        assert np.all(wl.true_log_loss[:, 0] > wl.true_log_loss[:, -1])


def test_same_seed_same_workload_different_seed_different():
    cfg = make_config(SMALL)
    w1 = generate_workload(cfg, np.random.default_rng(3))
    w2 = generate_workload(cfg, np.random.default_rng(3))
    w3 = generate_workload(cfg, np.random.default_rng(4))
    assert _equal(w1, w2)
    assert not _equal(w1, w3)


def test_env_workload_matches_generate_workload():
    env = core_env.parallel_env(preset=SMALL)
    env.reset(seed=12)
    assert _equal(env.workload, generate_workload(env.config, np.random.default_rng(12)))


def test_generate_workloads_equals_one_by_one():
    """The batched generator (if present) is documented as identical to one-by-one calls."""
    from core_env import workload as wmod
    if not hasattr(wmod, "generate_workloads"):
        pytest.skip("no generate_workloads in this version")
    cfg = make_config(SMALL, load=2.0)
    batch = wmod.generate_workloads(cfg, [np.random.default_rng(s) for s in (1, 2, 3)])
    for s, wl in zip((1, 2, 3), batch, strict=False):
        assert _equal(wl, generate_workload(cfg, np.random.default_rng(s)))


def test_speed_override_and_speed_choices():
    cfg = make_config(SMALL, node_speeds=(0.5, 1.0, 2.0, 4.0))
    wl = generate_workload(cfg, np.random.default_rng(0))
    assert wl.speeds.tolist() == [0.5, 1.0, 2.0, 4.0]
    cfg = make_config(SMALL, n_nodes=16, speed_choices=(0.5, 2.0))
    draws = [generate_workload(cfg, np.random.default_rng(s)).speeds for s in range(5)]
    assert all(set(d.tolist()) <= {0.5, 2.0} for d in draws)
    assert len({tuple(d) for d in draws}) > 1  # redrawn at each reset
    env = core_env.parallel_env(config=cfg)
    obs, _ = env.reset(seed=0)
    sp = np.array([obs[a]["observation"][env.layout.index("speed")] for a in env.agents])
    np.testing.assert_allclose(sp, env.workload.speeds / 2.0)


def test_mean_arrival_count_is_poisson_rate():
    cfg = make_config(SMALL, load=2.0)
    counts = [generate_workload(cfg, np.random.default_rng(s)).n_tasks for s in range(60)]
    mean = cfg.workload.arrival_rate * cfg.workload.arrival_slots  # 24
    assert np.mean(counts) == pytest.approx(mean, rel=0.1)
    assert np.var(counts) == pytest.approx(mean, rel=0.5)


def test_max_tasks_bound():
    w = make_config("CoRE-v0").workload
    mean = w.arrival_rate * w.arrival_slots
    assert w.max_tasks >= mean + 10 * math.sqrt(mean)


# ---------------------------------------------------------------- replay and validation
def test_replaying_a_workload_gives_the_same_episode():
    env1 = core_env.parallel_env(preset=SMALL)
    t1 = run_episode(env1, 17, masked_random_policy(np.random.default_rng(0)))
    wl = env1.workload
    env2 = core_env.parallel_env(preset=SMALL)
    it = iter(t1["actions"])
    t2 = run_episode(env2, 999, lambda env, obs: next(it), options={"workload": wl})
    assert t1["rewards"] == t2["rewards"] and t1["infos"] == t2["infos"]
    for o1, o2 in zip(t1["obs"], t2["obs"], strict=False):
        assert all(np.array_equal(o1[a]["observation"], o2[a]["observation"]) for a in o1)


def test_empty_workload_runs_until_arrivals_end():
    env = core_env.parallel_env(preset=SMALL, arrival_slots=3)
    obs, _ = env.reset(seed=0, options={"workload": make_workload([], [1.0] * 4)})
    steps = 0
    while env.agents:
        obs, rew, term, trunc, infos = env.step({a: 0 for a in env.agents})
        steps += 1
    assert steps == 3 and all(term.values())
    assert infos["node_0"]["episode"]["arrived"] == 0
    assert infos["node_0"]["episode"]["completion_rate"] == 0.0


def _good():
    return make_workload([task(0, 5, target_work=2.0), task(1, 4, target_work=3.0, cap=2)],
                         [1.0] * 4)


BAD_WORKLOADS = [
    ("arrival", lambda w: w._replace(arrival=np.array([1, 0]))),           # not sorted
    ("arrival", lambda w: w._replace(arrival=np.array([0, 40]),
                                     deadline=np.array([5, 45]))),        # >= arrival_slots
    ("arrival", lambda w: w._replace(arrival=np.array([-1, 1]))),
    ("arrival", lambda w: w._replace(arrival=np.array([0.0, 0.5]))),      # not integers
    ("deadline", lambda w: w._replace(deadline=np.array([0, 4]))),        # deadline <= arrival
    ("deadline", lambda w: w._replace(deadline=np.array([5, 100]))),      # window too long
    ("cap", lambda w: w._replace(cap=np.array([0, 1]))),
    ("alpha", lambda w: w._replace(alpha=np.array([1.5, 1.0]))),
    ("alpha", lambda w: w._replace(alpha=np.array([0.0, 1.0]))),
    ("speeds", lambda w: w._replace(speeds=np.array([1.0, 1.0]))),        # wrong length
    ("speeds", lambda w: w._replace(speeds=np.array([1.0, 0.0, 1.0, 1.0]))),
    ("log_loss", lambda w: w._replace(log_loss=w.log_loss[:, :5])),
    ("log_loss", lambda w: w._replace(log_loss=np.where(np.arange(GRID_SIZE) == 3, np.nan,
                                                        w.log_loss))),
    ("log_target", lambda w: w._replace(log_target=np.array([np.inf, 0.0]))),
    ("true_log_loss", lambda w: w._replace(true_log_loss=w.true_log_loss[:1])),
    ("deadline", lambda w: w._replace(deadline=np.array([5]))),
]


@pytest.mark.parametrize("field, corrupt", BAD_WORKLOADS,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_WORKLOADS)])
def test_invalid_workload_rejected_naming_the_field(field, corrupt):
    env = core_env.parallel_env(preset=SMALL)
    with pytest.raises(ValueError, match=field):
        env.reset(seed=0, options={"workload": corrupt(_good())})
    # the env is still usable
    env.reset(seed=0, options={"workload": _good()})
    env.step({a: 0 for a in env.agents})


def test_validate_workload_rejects_non_workloads_and_canonicalises():
    cfg = make_config(SMALL)
    with pytest.raises(ValueError, match="workload"):
        validate_workload({"arrival": [0]}, cfg)
    w = _good()._replace(arrival=np.array([0, 1], dtype=np.int32),
                         cap=np.array([1.0, 2.0]))
    out = validate_workload(w, cfg)
    assert out.arrival.dtype == np.int64 and out.cap.dtype == np.int64
    assert out.cap.tolist() == [1, 2]


def test_grid_constants():
    from core_env.curves import LOG_WORK_GRID
    assert LOG_WORK_GRID.shape == (GRID_SIZE,)
    assert LOG_WORK_GRID[0] == pytest.approx(math.log(WORK_MIN))
    assert LOG_WORK_GRID[-1] == pytest.approx(math.log(WORK_MAX))
    assert np.all(np.diff(LOG_WORK_GRID) > 0)


def test_user_workload_speeds_above_the_config_max_are_rejected():
    env = core_env.parallel_env(preset=SMALL, n_nodes=2, max_visible_tasks=2, arrival_slots=2)
    wl = make_workload([task(0, 5, target_work=3.0, cap=2)], speeds=[2.0, 1.0])
    with pytest.raises(ValueError, match=r"workload\.speeds\[0\]"):
        env.reset(seed=0, options={"workload": wl})
    # with a config that allows speed 2 the same workload runs and stays in its space
    env = core_env.parallel_env(preset=SMALL, n_nodes=2, max_visible_tasks=2, arrival_slots=2,
                                speed_choices=(1.0, 2.0))
    obs, _ = env.reset(seed=0, options={"workload": wl})
    assert all(env.observation_space(a).contains(obs[a]) for a in env.possible_agents)
    assert env.state_space.contains(env.state())
