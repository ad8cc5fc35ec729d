"""Decoding, task tracking, cap filling and node placement (mara_agents/baselines/common.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import core_env
from core_env.forecast import LossForecastWrapper, WLSForecaster, forecast, slot_inputs
from mara_agents.baselines import ObservationDecoder, SlotTracker, assign_nodes, fill_by_priority

from .helpers import SMALL, make_observations, small_env


def test_decoder_recovers_the_simulator_state():
    """Every decoded quantity equals the hidden simulator value it stands for."""
    env = LossForecastWrapper(core_env.parallel_env(preset=SMALL), WLSForecaster())
    dec = ObservationDecoder.from_env(env)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=3)
    checked = 0
    while env.agents:
        view = dec.decode(obs)
        sim = env.unwrapped.sim
        t = int(sim.t[0])
        present = sim.slot_task[0] >= 0
        assert view.t == t
        assert np.array_equal(view.present, present)
        assert np.array_equal(view.time_left[present], sim.slot_deadline[0, present] - t)
        assert np.array_equal(view.arrival[present], sim.slot_arrival[0, present])
        assert np.array_equal(view.cap[present], np.minimum(sim.slot_cap[0, present], 4))
        np.testing.assert_allclose(view.work, np.where(present, sim.slot_work[0], 0.0),
                                   rtol=1e-5, atol=1e-5)
        assert np.array_equal(view.nodes_last, np.where(present, sim.slot_nodes_last[0], 0))
        assert np.array_equal(view.last_slot, sim.last_slot[0])
        np.testing.assert_allclose(view.speeds, sim.speed[0])
        _, slot, batch, log_t, ach = slot_inputs(sim)
        np.testing.assert_allclose(view.achievable[slot], ach, rtol=1e-6)
        if slot.size:
            fc = forecast(WLSForecaster(), batch, log_t, ach)
            rem, cens = dec.remaining(view, "fc_q50")
            ok = fc.q50 < 2 * ach
            np.testing.assert_allclose(rem[slot][ok], fc.q50[ok], rtol=1e-5, atol=1e-4)
            assert np.all(cens[slot] == ~ok)
            checked += 1
        actions = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
        obs, *_ = env.step(actions)
    assert checked > 10


def test_decoder_rejects_bad_input():
    env = small_env()
    dec = ObservationDecoder.from_env(env)
    obs = make_observations(env, 0, {0: {"left": 5, "cap": 1}})
    with pytest.raises(ValueError, match="missing nodes"):
        dec.decode({a: o for a, o in obs.items() if a != "node_2"})
    obs["node_1"] = {"observation": obs["node_1"]["observation"][:-1],
                     "action_mask": obs["node_1"]["action_mask"]}
    with pytest.raises(ValueError, match="observation of node_1"):
        dec.decode(obs)
    with pytest.raises(ValueError, match="dict"):
        dec.decode([1, 2])
    with pytest.raises(ValueError, match="forecast"):
        dec.remaining(dec.decode(make_observations(env, 0, {})))


def test_slot_tracker_counts_observations_and_resets_on_a_new_task():
    env = small_env()
    dec = ObservationDecoder.from_env(env)
    tr = SlotTracker(4)
    a = {"left": 10, "age": 0, "cap": 2, "alpha": 0.8}
    assert tr.update(dec.decode(make_observations(env, 0, {0: a}))).tolist() == [0, 0, 0, 0]
    a1 = dict(a, left=9, age=1, nodes_last=2, work=2.0)
    assert tr.update(dec.decode(make_observations(env, 1, {0: a1}))).tolist() == [1, 0, 0, 0]
    # calling twice in the same slot changes nothing
    assert tr.update(dec.decode(make_observations(env, 1, {0: a1}))).tolist() == [1, 0, 0, 0]
    a2 = dict(a, left=8, age=2, nodes_last=0, work=2.0)  # idle last slot: no observation
    assert tr.update(dec.decode(make_observations(env, 2, {0: a2}))).tolist() == [1, 0, 0, 0]
    a3 = dict(a, left=7, age=3, nodes_last=1, work=3.0)
    assert tr.update(dec.decode(make_observations(env, 3, {0: a3}))).tolist() == [2, 0, 0, 0]
    # a different task in slot 0 (other deadline, never trained): the count restarts
    b = {"left": 20, "age": 1, "cap": 1}
    out = tr.update(dec.decode(make_observations(env, 4, {0: b})))
    assert out.tolist() == [0, 0, 0, 0] and not tr.same_task[0]
    tr.reset()
    assert tr.count.tolist() == [0, 0, 0, 0]


def test_fill_by_priority_fills_caps_in_order():
    caps = np.array([2, 3, 1, 4])
    assert fill_by_priority([1, 3, 0], caps, 6).tolist() == [0, 3, 0, 3]
    assert fill_by_priority([2, 0], caps, 6).tolist() == [2, 0, 1, 0]
    assert fill_by_priority([], caps, 6).tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="distinct"):
        fill_by_priority([1, 1], caps, 3)
    with pytest.raises(ValueError, match="total"):
        fill_by_priority([1], caps, -1)


def test_assign_nodes_keeps_nodes_on_their_last_task():
    # node 0 trained slot 2, node 1 slot 0, node 2 slot 2, node 3 idle
    last = np.array([2, 0, 2, -1])
    acts = assign_nodes(np.array([1, 0, 2, 0]), last)
    assert acts.tolist() == [3, 1, 3, 0]  # everybody stays: no switch
    # slot 2 now wants one node: the lowest-numbered of its nodes keeps it, node 2 moves
    acts = assign_nodes(np.array([1, 2, 1, 0]), last)
    assert acts[0] == 3 and acts[1] == 1
    assert sorted(acts.tolist()) == [1, 2, 2, 3]
    with pytest.raises(ValueError, match="at most 4"):
        assign_nodes(np.array([3, 2, 0, 0]), last)
    with pytest.raises(ValueError, match="non-negative"):
        assign_nodes(np.array([-1, 0, 0, 0]), last)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_assign_nodes_realises_the_counts(data):
    n = data.draw(st.integers(1, 12))
    k = data.draw(st.integers(1, 8))
    last = np.array(data.draw(st.lists(st.integers(-1, k - 1), min_size=n, max_size=n)))
    raw = data.draw(st.lists(st.integers(0, n), min_size=k, max_size=k))
    counts = fill_by_priority(np.arange(k), np.array(raw), n)
    acts = assign_nodes(counts, last)
    assert np.array_equal(np.bincount(acts, minlength=k + 1)[1:], counts)
    # the number of nodes kept on their last slot is the most possible
    kept = sum(int(acts[i] == last[i] + 1) for i in range(n) if last[i] >= 0)
    best = sum(min(int((last == s).sum()), int(counts[s])) for s in range(k))
    assert kept == best
