"""The named observation / state layout (SPEC §3 "Observation, mask, state"): names map to
the right indices and every feature means what its documentation says."""

from __future__ import annotations

import math

import numpy as np
import pytest

import core_env
from core_env import observation_layout, state_layout
from core_env.layout import Feature

from .helpers import SMALL, obs_matrix, uniform_random_policy

LOG_NORM = math.log1p(4096.0)


# ---------------------------------------------------------------- structure
@pytest.mark.parametrize("n, k", [(1, 1), (4, 8), (16, 32), (3, 5)])
def test_layout_sizes_match_spaces(n, k):
    env = core_env.parallel_env(preset=SMALL, n_nodes=n, max_visible_tasks=k)
    lay, slay = env.layout, env.state_layout
    assert lay == observation_layout(n, k) and slay == state_layout(n, k)
    assert lay.size == env.observation_space("node_0")["observation"].shape[0]
    assert lay.size == lay.global_size + lay.node_size + k * lay.task_size
    assert slay.size == env.state_space.shape[0]
    assert slay.size == slay.global_size + n * slay.node_size + k * slay.task_size
    lo, hi = lay.bounds()
    assert np.array_equal(lo, env.observation_space("node_0")["observation"].low)
    assert np.array_equal(hi, env.observation_space("node_0")["observation"].high)
    assert np.all(lo < hi)
    slo, shi = slay.bounds()
    assert np.array_equal(slo, env.state_space.low) and np.array_equal(shi, env.state_space.high)


def test_index_ranges_partition_the_vector():
    lay = observation_layout(4, 3)
    seen = []
    for f in lay.global_features:
        seen.append(lay.index(f.name))
    for f in lay.node_features:
        cols = lay.node_columns(f.name)
        assert cols.shape == (1,) and cols[0] == lay.index(f.name)
        seen += cols.tolist()
    for f in lay.task_features:
        cols = lay.task_columns(f.name)
        assert cols.shape == (3,)
        assert np.all(np.diff(cols) == lay.task_size)
        seen += cols.tolist()
    assert sorted(seen) == list(range(lay.size))  # every index named exactly once


def test_state_layout_node_rows():
    slay = state_layout(5, 2)
    assert slay.node_rows == 5
    cols = slay.node_columns("node_index")
    assert cols.shape == (5,) and np.all(np.diff(cols) == slay.node_size)
    seen = [slay.index(f.name) for f in slay.global_features]
    for f in slay.node_features:
        seen += slay.node_columns(f.name).tolist()
    for f in slay.task_features:
        seen += slay.task_columns(f.name).tolist()
    assert sorted(seen) == list(range(slay.size))


def test_required_features_are_named():
    """SPEC: task features include at least present, time to deadline, loss ratio, log work,
    slope, nodes last slot, cap, remaining capacity, age, criticality."""
    names = {f.name for f in observation_layout(2, 2).task_features}
    assert {"present", "time_to_deadline", "loss_gap", "log_work", "slope", "nodes_last",
            "cap", "reachable_work", "age", "critical"} <= names
    assert "queue_len" in {f.name for f in observation_layout(2, 2).global_features}


def test_unknown_names_raise_key_error():
    lay = observation_layout(2, 2)
    with pytest.raises(KeyError, match="nope"):
        lay.index("nope")
    with pytest.raises(KeyError):
        lay.task_columns("queue_len")  # a global feature, not a task column
    with pytest.raises(KeyError):
        lay.node_columns("present")


def test_task_table_view_and_capacity():
    lay = observation_layout(4, 3)
    x = np.arange(2 * lay.size, dtype=np.float32).reshape(2, lay.size)
    tab = lay.task_table(x)
    assert tab.shape == (2, 3, lay.task_size)
    c = lay.task_column("cap")
    assert np.array_equal(tab[:, :, c], x[:, lay.task_columns("cap")])
    y = np.zeros(lay.size, dtype=np.float32)
    y[lay.task_columns("cap")] = [0.25, 0.5, 1.0]
    assert lay.capacity(y).tolist() == [1, 2, 4]
    assert lay.capacity(y).dtype == np.int64


def test_with_task_features_extends_sizes():
    lay = observation_layout(4, 3)
    extra = (Feature("forecast", 0.0, 1.0, "predicted remaining work"),
             Feature("forecast_std", 0.0, 2.0, "its uncertainty"))
    big = lay.with_task_features(extra)
    assert big.task_size == lay.task_size + 2
    assert big.size == lay.size + 3 * 2
    assert big.task_column("forecast") == lay.task_size
    assert big.index("queue_len") == lay.index("queue_len")
    lo, hi = big.bounds()
    assert lo.shape == (big.size,)
    assert hi[big.task_columns("forecast_std")].tolist() == [2.0] * 3
    assert lay.size == observation_layout(4, 3).size  # original untouched
    with pytest.raises(ValueError, match="present"):
        lay.with_task_features((Feature("present", 0, 1, "dup"),))


def test_describe_lists_every_feature():
    lay = observation_layout(4, 3)
    rows = lay.describe()
    assert len(rows) == lay.global_size + lay.node_size + lay.task_size
    assert {r[1] for r in rows} == {f.name for f in
                                    lay.global_features + lay.node_features + lay.task_features}


# ---------------------------------------------------------------- semantics in an episode
def _executed(actions, slot_task, slot_cap):
    """Reference resolution of steps 1-2: (executed slot per node or -1, illegal, conflicts)."""
    used = {}
    out, illegal, conflicts = [], 0, 0
    for a in actions:
        if a == 0:
            out.append(-1)
        elif slot_task[a - 1] < 0:
            out.append(-1)
            illegal += 1
        elif used.get(a, 0) >= slot_cap[a - 1]:
            out.append(-1)
            conflicts += 1
        else:
            used[a] = used.get(a, 0) + 1
            out.append(a - 1)
    return out, illegal, conflicts


def _check_features(env, obs, t):
    lay, n = env.layout, len(env.possible_agents)
    k = env.config.cluster.max_visible_tasks
    W = env.config.workload.window[1]
    o, m = obs_matrix(env, obs)
    rows = env.sim.slot_task[0].copy()
    present = rows >= 0
    wl = env.workload
    x = o[0]
    col = lambda name: x[lay.task_columns(name)]  # noqa: E731
    assert np.array_equal(col("present"), present.astype(np.float32))
    assert np.array_equal(m[0, 1:], present.astype(np.int8))
    # cap column * N == min(p, N) of the visible tasks
    caps = env.sim.slot_cap[0]
    assert np.array_equal(lay.capacity(x)[present], np.minimum(caps[present], n))
    assert np.all(col("cap")[~present] == 0)
    r = rows[present]
    d, a = wl.deadline[r], wl.arrival[r]
    np.testing.assert_allclose(col("time_to_deadline")[present], np.minimum((d - t) / W, 1),
                               rtol=1e-6)
    np.testing.assert_allclose(col("age")[present], np.minimum((t - a) / W, 1), rtol=1e-6,
                               atol=1e-7)
    assert np.array_equal(col("critical")[present], ((d - t) * 4 <= d - a).astype(np.float32))
    np.testing.assert_allclose(col("alpha")[present], wl.alpha[r].astype(np.float32))
    work = env.sim.slot_work[0][present].astype(np.float64)
    np.testing.assert_allclose(col("log_work")[present], np.log1p(work) / LOG_NORM, rtol=1e-5)
    rate = np.minimum(wl.cap[r], n) ** wl.alpha[r] * wl.speeds.mean()
    np.testing.assert_allclose(col("reachable_work")[present],
                               np.minimum(np.log1p(rate * (d - t)) / LOG_NORM, 1), rtol=1e-4)
    for name in ("time_to_deadline", "age", "critical", "loss_gap", "progress", "log_work",
                 "slope", "nodes_last", "alpha", "reachable_work"):
        assert np.all(col(name)[~present] == 0), name
    # globals
    assert x[lay.index("time")] == pytest.approx(t / env.config.max_steps)
    assert x[lay.index("arrivals_open")] == float(t < env.config.workload.arrival_slots)
    assert x[lay.index("active")] == pytest.approx(present.sum() / k)
    # node block
    nidx = o[:, lay.index("node_index")]
    np.testing.assert_allclose(nidx, np.arange(n) / max(n - 1, 1), rtol=1e-6)
    np.testing.assert_allclose(o[:, lay.index("speed")],
                               wl.speeds / env.config.cluster.max_speed, rtol=1e-6)
    # the global block and the task table are the same for every node
    g = slice(0, lay.global_size)
    assert np.all(o[:, g] == o[0, g])
    for f in env.state_layout.task_features:
        assert np.all(o[:, lay.task_columns(f.name)] == o[0, lay.task_columns(f.name)])
    # state = [globals | every node row | task table]
    st = env.state()
    slay = env.state_layout
    assert np.array_equal(st[:slay.global_size], x[:lay.global_size])
    for f in slay.node_features:
        assert np.array_equal(st[slay.node_columns(f.name)], o[:, lay.index(f.name)]), f.name
    for f in slay.task_features:
        assert np.array_equal(st[slay.task_columns(f.name)], x[lay.task_columns(f.name)]), f.name


@pytest.mark.parametrize("overrides, seed", [
    ({}, 0), ({"load": 3.0, "n_nodes": 6, "max_visible_tasks": 4}, 1),
    ({"speed_choices": (0.5, 2.0), "load": 2.0}, 2),
])
def test_features_follow_their_definition_through_an_episode(overrides, seed):
    env = core_env.parallel_env(preset=SMALL, **overrides)
    lay, n = env.layout, len(env.possible_agents)
    k = env.config.cluster.max_visible_tasks
    has_mine = "mine_last" in {f.name for f in lay.task_features}
    pol = uniform_random_policy(np.random.default_rng(seed))
    obs, _ = env.reset(seed=seed)
    t, illegal, conflicts, kept_checked = 0, 0, 0, 0
    _check_features(env, obs, t)
    while env.agents:
        acts = pol(env, obs)
        before = env.sim.slot_task[0].copy()
        executed, ill, con = _executed([acts[a] for a in env.possible_agents], before,
                                       env.sim.slot_cap[0].copy())
        illegal += ill
        conflicts += con
        obs, rew, term, trunc, infos = env.step(acts)
        t += 1
        after = env.sim.slot_task[0]
        o, _ = obs_matrix(env, obs)
        _check_features(env, obs, t)
        counts = np.bincount([e for e in executed if e >= 0], minlength=k)
        still = (after == before) & (before >= 0)
        np.testing.assert_allclose(o[0, lay.task_columns("nodes_last")],
                                   np.where(still, counts / n, 0), rtol=1e-6)
        assert o[0, lay.index("busy_last")] == pytest.approx(sum(e >= 0 for e in executed) / n)
        for i, e in enumerate(executed):
            assert o[i, lay.index("idle_last")] == float(e < 0)
            visible = e >= 0 and still[e]
            assert o[i, lay.index("last_slot")] == pytest.approx((e + 1) / k if visible else 0)
            if has_mine:
                mine = o[i, lay.task_columns("mine_last")]
                expected = np.zeros(k)
                if visible:
                    expected[e] = 1
                assert np.array_equal(mine, expected)
            kept_checked += visible
    ep = infos["node_0"]["episode"]
    assert ep["illegal_actions"] == illegal
    assert ep["capacity_conflicts"] == conflicts
    assert kept_checked > 20


# ---------------------------------------------------------------- known bugs
def test_log_work_stays_in_its_bounds_past_work_max():
    """16 nodes of speed 4 on one cap-16 task with an unreachable target: 64 work per slot,
    past 4096 after 65 slots. Every observation must stay inside the declared space."""
    from .helpers import joint, make_workload, task
    env = core_env.parallel_env(preset=SMALL, n_nodes=16, max_visible_tasks=1, arrival_slots=1,
                                node_speeds=(4.0,) * 16, window=(3, 80))
    wl = make_workload([task(0, 80, target_work=1e9, cap=16)], [4.0] * 16)
    obs, _ = env.reset(seed=0, options={"workload": wl})
    space = env.observation_space("node_0")
    for _ in range(70):
        obs, *_ = env.step(joint(env, [1] * 16))
        log_work = obs["node_0"]["observation"][env.layout.task_columns("log_work")]
        assert space.contains(obs["node_0"]), (env.sim.slot_work[0, 0], log_work)
        assert env.state_space.contains(env.state())
