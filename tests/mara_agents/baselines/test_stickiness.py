"""The stickiness knob and the held-state placement shared by LARA and the peers
(mara_agents/baselines/placement.py, CentralPolicy.place; SPEC §9)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import core_env
from mara_agents.baselines import BY_NAME, assign_nodes, sticky_counts
from mara_agents.baselines.placement import keep_nodes, node_slots
from mara_agents.policy import PEERS, make_policy, run_episode

from .helpers import counts_of, episode_actions, make_observations, small_env

STICKY = ("lara", *PEERS)
"""LARA and the peers: every one of them takes ``stickiness``."""


# ------------------------------------------------------------------------- the knob
@pytest.mark.parametrize("bad", [-0.1, -1, math.nan, math.inf, True, False, np.bool_(True),
                                 "0.5", None])
def test_bad_stickiness_is_refused_naming_it(bad):
    env = small_env()
    for name in ("lara", *PEERS, "edf", "round_robin"):
        with pytest.raises(ValueError, match="stickiness"):
            make_policy(name, env, stickiness=bad)


def test_random_has_no_stickiness():
    env = small_env()
    make_policy("random", env, stickiness=0.0)
    with pytest.raises(ValueError, match="stickiness"):
        make_policy("random", env, stickiness=0.5)


@pytest.mark.parametrize("name", [*STICKY, "edf", "oracle_greedy", "shortest_predicted"])
def test_every_placing_baseline_takes_stickiness(name):
    _, pol = make_policy(name, small_env(), stickiness=2)
    assert pol.stickiness == 2.0 and isinstance(pol.stickiness, float)
    assert BY_NAME[name].places_counts


# ------------------------------------------------------------------------- the rule
def test_sticky_counts_holds_small_shrinks_and_cuts_growth():
    # slot 0: 4 -> 3 (a shrink of 1 <= threshold 2: held); slot 1: 2 -> 0 (2 > 1: applied);
    # slot 2: new, wants 3; slot 3: 1 -> 2 (growth); N = 8
    want, prev = np.array([3, 0, 3, 2]), np.array([4, 2, 0, 1])
    out = sticky_counts(want, prev, np.array([2.0, 1.0, 0.0, 0.0]), 8)
    # 4 + 0 + 3 + 2 = 9 > 8: one node of growth is cut, the most growth first (slot 2)
    np.testing.assert_array_equal(out, [4, 0, 2, 2])
    # growth that costs a restore now (slot 3 has trained) is cut first
    out = sticky_counts(want, prev, np.array([2.0, 1.0, 0.0, 0.0]), 8,
                        growth_cost=np.array([0.3, 0.3, 0.0, 0.3]))
    np.testing.assert_array_equal(out, [4, 0, 3, 1])
    # no threshold: the policy's own counts
    np.testing.assert_array_equal(sticky_counts(want, prev, np.zeros(4), 8), want)


def test_sticky_counts_stays_feasible():
    rng = np.random.default_rng(0)
    for _ in range(500):
        k, n = int(rng.integers(1, 7)), int(rng.integers(1, 12))
        cap = rng.integers(0, n + 1, size=k)

        def fill(n=n, k=k, cap=cap):
            c = np.minimum(rng.integers(0, n + 1, size=k), cap)
            while c.sum() > n:
                c[int(np.argmax(c))] -= 1
            return c

        want, prev = fill(), fill()
        thr = rng.uniform(0, 3, size=k) * prev
        out = sticky_counts(want, prev, thr, n, growth_cost=rng.uniform(0, 1, size=k))
        held = (prev > want) & (prev - want <= thr)
        assert out.sum() <= n and np.all(out <= cap) and np.all(out >= 0)
        np.testing.assert_array_equal(out[held], prev[held])
        free = ~held
        assert np.all(out[free] <= np.maximum(want[free], prev[free]))
        assert np.all(out[free] >= np.minimum(want[free], prev[free]))


def test_assign_nodes_prefers_the_held_task_and_spares_held_state():
    # node 0 trained slot 1 last slot; node 1 idled holding slot 0; nodes 2-3 hold slot 2
    # (paused) and nothing; slot 0 and slot 3 need a node each, slot 1 one
    counts = np.array([1, 1, 0, 1])
    last, held = np.array([1, -1, -1, -1]), np.array([1, 0, 2, -1])
    np.testing.assert_array_equal(assign_nodes(counts, last), [2, 1, 4, 0])
    # with the held slots: node 1 resumes slot 0, node 3 (no state) takes slot 3, and
    # node 2 keeps the paused task's state
    np.testing.assert_array_equal(assign_nodes(counts, last, held), [2, 1, 0, 4])


def test_keep_nodes_places_the_counts_of_any_actions_as_the_baselines_do():
    # nodes 0-1 trained slot 0, node 3 slot 1, node 2 idled holding slot 2; the decoded
    # actions want 2 nodes on slot 0, 1 on slot 1, 1 on slot 2 but put them elsewhere
    last, held = np.array([0, 0, -1, 1]), np.array([0, 0, 2, 1])
    mask = np.ones((4, 4), dtype=np.int8)
    decoded = np.array([3, 2, 1, 1])
    placed = keep_nodes(decoded, last, held, mask)
    np.testing.assert_array_equal(placed, [1, 1, 3, 2])
    np.testing.assert_array_equal(np.bincount(placed, minlength=4),
                                  np.bincount(decoded, minlength=4))
    # a placement that a node's mask forbids falls back to the decoded actions
    mask[3, 2] = 0
    np.testing.assert_array_equal(keep_nodes(decoded, last, held, mask), decoded)


def test_node_slots_decodes_what_the_env_observes():
    env = small_env(switch_cost=0.2)
    obs, _ = env.reset(seed=0)
    act = {a: int(np.flatnonzero(o["action_mask"])[-1]) for a, o in obs.items()}
    obs, *_ = env.step(act)
    stacked = np.stack([obs[a]["observation"] for a in env.possible_agents])
    last, held = node_slots(stacked, env.layout)
    expected = np.array([act[a] for a in env.possible_agents]) - 1
    np.testing.assert_array_equal(last, expected)
    np.testing.assert_array_equal(held, expected)


def _tasks(cost):
    return {0: {"left": 10, "cap": 4, "nodes_last": 3, "work": 5.0, "switch_cost": cost},
            1: {"left": 5, "cap": 2}}


@pytest.mark.parametrize("stickiness,cost,want", [
    (0.0, 0.5, [2, 2]),    # off
    (0.5, 0.5, [2, 2]),    # shrink 1 of 3 > 0.5 * 0.5 * 3 = 0.75: applied
    (1.0, 0.5, [3, 1]),    # 1 <= 1.5: held; the new task gets the node left
    (10.0, 0.0, [2, 2]),   # a free restore is never held
])
def test_edf_holds_a_shrink_by_its_threshold(stickiness, cost, want):
    env = small_env()
    _, pol = make_policy("edf", env, stickiness=stickiness)
    obs = make_observations(env, 3, _tasks(cost), last_slot=[0, 0, 0, -1],
                            episode_cost=cost)
    np.testing.assert_array_equal(counts_of(pol.act(obs), 4)[:2], want)


# ------------------------------------------------------------------------- episodes
def _actions_of(env, pol, seed):
    return np.array(episode_actions(env, pol, seed)[0])


@pytest.mark.parametrize("name", [*STICKY, "edf"])
def test_stickiness_zero_is_the_legacy_placement_without_switching_cost(name):
    """With stickiness 0 and free switching every action is the one of the placement before
    the knob existed: ``assign_nodes(counts, last_slot)``."""
    base = core_env.parallel_env(preset="CoRE-Small-v0")
    env, pol = make_policy(name, base, stickiness=0.0)
    env2, legacy = make_policy(name, core_env.parallel_env(preset="CoRE-Small-v0"))
    legacy.place = lambda view, counts: assign_nodes(counts, view.last_slot)
    for seed in (0, 1):
        np.testing.assert_array_equal(_actions_of(env, pol, seed), _actions_of(env2, legacy, seed))


@pytest.mark.parametrize("name", STICKY)
def test_stickiness_changes_nothing_but_placement_when_switching_is_free(name):
    base = core_env.parallel_env(preset="CoRE-Small-v0")
    env, off = make_policy(name, base)
    env2, on = make_policy(name, core_env.parallel_env(preset="CoRE-Small-v0"), stickiness=5)
    a, b = run_episode(env, off, 2), run_episode(env2, on, 2)
    for key in ("completed", "expired", "utilization", "return"):
        assert a[key] == b[key], key


def test_stickiness_reduces_restores_under_a_switching_cost():
    """CoRE-v0 with c = 0.3 (arrivals in the first 100 slots, 130 slots), seeds 0-1: a
    stickiness of 3 (a task keeps its nodes unless it shrinks by more than 90%) never breaks
    the masks or caps, switches less for LARA and every peer, and restores less for LARA and
    at least four of the five peers (all five on these seeds)."""
    stats = {}
    for name in STICKY:
        for s in (0.0, 3.0):
            tot = {"restores": 0, "switches": 0}
            for seed in (0, 1):
                env, pol = make_policy(name, core_env.parallel_env(
                    preset="CoRE-v0", switch_cost=0.3, arrival_slots=100, max_steps=130),
                    stickiness=s)
                st = run_episode(env, pol, seed)
                assert st["illegal_actions"] == 0 and st["capacity_conflicts"] == 0
                for key in tot:
                    tot[key] += st[key]
            stats[name, s] = tot
    for name in STICKY:
        assert stats[name, 3.0]["switches"] < stats[name, 0.0]["switches"], name
    fewer = [n for n in STICKY if stats[n, 3.0]["restores"] < stats[n, 0.0]["restores"]]
    assert "lara" in fewer and len(fewer) >= 5, stats


@pytest.mark.parametrize("preset", ["CoRE-Switch-v0", "CoRE-Cluster-v0"])
def test_sticky_baselines_stay_legal_on_the_switching_presets(preset):
    for name in (*STICKY, "edf", "round_robin", "oracle_greedy"):
        env, pol = make_policy(name, core_env.parallel_env(preset=preset, arrival_slots=40,
                                                           max_steps=60), stickiness=4.0)
        st = run_episode(env, pol, 3)
        assert st["illegal_actions"] == 0 and st["capacity_conflicts"] == 0, name
