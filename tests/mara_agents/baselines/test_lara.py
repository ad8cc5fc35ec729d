"""LARA's pieces and decisions (mara_agents/baselines/lara.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mara_agents.baselines import LARAParams, LARAPolicy, largest_remainder, moore_hodgson
from mara_agents.baselines.lara import steady_share

from .helpers import counts_of, make_observations, small_env


# ---------------------------------------------------------------- Moore-Hodgson
def test_moore_hodgson_textbook_instance():
    # EDF order: cumulative 2, 5 > 4 -> drop the longest accepted (p = 3); then 3, 7 <= 7
    acc = moore_hodgson(np.array([2.0, 3.0, 1.0, 4.0]), np.array([3.0, 4.0, 5.0, 7.0]))
    assert acc.tolist() == [0, 2, 3]


def test_moore_hodgson_drops_the_longest_not_the_latest():
    # jobs in EDF order; job 0 is long: the late job 2 triggers dropping job 0
    acc = moore_hodgson(np.array([5.0, 1.0, 1.0]), np.array([6.0, 6.0, 6.5]))
    assert acc.tolist() == [1, 2]
    # unsorted input, returned in EDF order
    acc = moore_hodgson(np.array([1.0, 1.0, 5.0]), np.array([6.5, 6.0, 6.0]))
    assert acc.tolist() == [1, 0]
    assert moore_hodgson(np.zeros(0), np.zeros(0)).tolist() == []
    assert moore_hodgson(np.array([3.0]), np.array([2.0])).tolist() == []


def test_moore_hodgson_rejects_bad_input():
    with pytest.raises(ValueError, match="equal length"):
        moore_hodgson(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match=">= 0"):
        moore_hodgson(np.array([-1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="finite"):
        moore_hodgson(np.array([np.inf]), np.array([1.0]))


def _on_time(p, d, subset) -> bool:
    total = 0.0
    for j in sorted(subset, key=lambda j: (d[j], j)):
        total += p[j]
        if total > d[j] + 1e-9:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 12)), min_size=0, max_size=7))
def test_moore_hodgson_is_feasible_and_maximum(jobs):
    p = np.array([j[0] for j in jobs], dtype=float)
    d = np.array([j[1] for j in jobs], dtype=float)
    acc = moore_hodgson(p, d)
    assert _on_time(p, d, acc.tolist())
    assert list(acc) == sorted(acc, key=lambda j: (d[j], j))
    best = max((r for r in range(len(jobs) + 1)
                for s in itertools.combinations(range(len(jobs)), r) if _on_time(p, d, s)),
               default=0)
    assert acc.size == best


# ---------------------------------------------------------------- largest remainder
def test_largest_remainder_hamilton_examples():
    # floors 3, 2, 1 = 6; the seventh node goes to the largest remainder (0.5)
    caps = np.array([8, 8, 8])
    assert largest_remainder(np.array([3.5, 2.3, 1.2]), caps, 7).tolist() == [4, 2, 1]
    # a cap binds: quotas (2, 2.5, 1.5), floors (2, 2, 1), the tie goes to the lower index
    capped = np.array([2, 8, 8])
    assert largest_remainder(np.array([4.0, 2.5, 1.5]), capped, 6).tolist() == [2, 3, 1]
    # what a cap clips is not handed to others when the shares add up to less than the total
    assert largest_remainder(np.array([4.0, 1.0, 1.0]), capped, 6).tolist() == [2, 1, 1]
    # over-subscribed shares are scaled down to the total
    out = largest_remainder(np.array([6.0, 6.0, 4.0]), np.array([8, 8, 8]), 8)
    assert out.tolist() == [3, 3, 2]
    # caps bind everywhere: fewer than the total
    assert largest_remainder(np.array([5.0, 5.0]), np.array([1, 2]), 8).tolist() == [1, 2]
    # equal remainders: the smaller priority wins
    assert largest_remainder(np.array([0.5, 0.5]), np.array([1, 1]), 1,
                             priority=np.array([2.0, 1.0])).tolist() == [0, 1]
    assert largest_remainder(np.array([0.5, 0.5]), np.array([1, 1]), 1).tolist() == [1, 0]


def test_largest_remainder_rejects_bad_input():
    with pytest.raises(ValueError, match="equal length"):
        largest_remainder(np.ones(2), np.ones(3, dtype=int), 2)
    with pytest.raises(ValueError, match="shares"):
        largest_remainder(np.array([-0.5]), np.array([1]), 1)
    with pytest.raises(ValueError, match="caps"):
        largest_remainder(np.array([0.5]), np.array([1.5]), 1)
    with pytest.raises(ValueError, match="total"):
        largest_remainder(np.array([0.5]), np.array([1]), -1)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_largest_remainder_sums_to_the_total_and_respects_caps(data):
    n = data.draw(st.integers(1, 12))
    shares = np.array(data.draw(st.lists(
        st.one_of(st.just(0.0), st.floats(0.0, 10.0, allow_nan=False)), min_size=n, max_size=n)))
    caps = np.array(data.draw(st.lists(st.integers(0, 8), min_size=n, max_size=n)))
    total = data.draw(st.integers(0, 40))
    out = largest_remainder(shares, caps, total)
    assert out.dtype == np.int64
    assert np.all(out >= 0) and np.all(out <= caps)
    assert np.all(out[shares == 0] == 0)
    clipped = np.minimum(shares, caps)
    if clipped.sum() >= total:
        assert out.sum() == min(total, int(caps[shares > 0].sum()))
        assert out.sum() == total or np.all(out[shares > 0] == caps[shares > 0])
    else:
        assert out.sum() == int(np.floor(clipped.sum() + 0.5))
    # Hamilton: nobody gets more than one node away from its (scaled) quota
    quota = clipped * (total / clipped.sum() if clipped.sum() > total else 1.0)
    assert np.all(np.abs(out - quota) < 1.0 + 1e-9)


# ---------------------------------------------------------------- steady share
def test_steady_share():
    # 8 units in 4 slots at alpha 0.5: rate 2 -> 2**2 = 4 nodes
    def share(work, slots, alpha, speed=1.0):
        return steady_share(np.array([work]), np.array([slots]), np.array([alpha]), speed)[0]

    assert share(8.0, 4.0, 0.5) == pytest.approx(4.0)
    # below one node a share is time-sharing of one node: linear
    assert share(1.0, 4.0, 0.5) == pytest.approx(0.25)
    assert share(6.0, 3.0, 1.0, speed=2.0) == pytest.approx(1.0)


# ---------------------------------------------------------------- decisions
def test_params_validation_and_overrides():
    env = small_env(forecast=True)
    pol = LARAPolicy(env, explore_obs=5, safety=1.5)
    assert pol.params.explore_obs == 5 and pol.params.safety == 1.5
    assert pol.params.column == LARAParams().column
    for bad in ({"explore_obs": -1}, {"explore_budget": 1.5}, {"column": "loss"},
                {"safety": 0.0}, {"capacity_model": "magic"}, {"explore_split": "x"},
                {"deadline_margin": 0.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            LARAParams(**bad)
    with pytest.raises(ValueError, match="forecast"):
        LARAPolicy(small_env(forecast=False))


def test_lara_serves_the_feasible_tasks_and_rejects_the_hopeless():
    env = small_env(n_nodes=4, k=4, forecast=True)
    pol = LARAPolicy(env, explore_obs=0)
    pol.reset(0)
    tasks = {
        0: {"left": 10, "cap": 4, "remaining": 5.0},    # easy: well under one node
        1: {"left": 3, "cap": 1, "remaining": 50.0},    # hopeless: 50 > 1 * 3 achievable
        2: {"left": 4, "cap": 2, "remaining": 7.0},     # tight: 2 nodes for 4 slots = 8
    }
    acts = pol.act(make_observations(env, 0, tasks))
    counts = counts_of(acts, 4)
    plan = pol.last_plan
    assert plan["accepted"].tolist() == [True, False, True, False]
    assert counts[2] == 2            # the tight task gets its cap
    assert counts[0] >= 1            # the easy one is served
    assert counts.sum() == 4 and counts[1] <= 4 - counts[0] - counts[2]


def test_lara_moore_hodgson_drops_the_largest_demand_when_overloaded():
    # one node; three tasks each feasible alone; only two fit: the longest is dropped
    env = small_env(n_nodes=1, k=4, forecast=True)
    pol = LARAPolicy(env, explore_obs=0, work_conserving=False)
    pol.reset(0)
    tasks = {0: {"left": 4, "cap": 1, "remaining": 2.0},
             1: {"left": 5, "cap": 1, "remaining": 4.0},
             2: {"left": 6, "cap": 1, "remaining": 2.0}}
    pol.act(make_observations(env, 0, tasks))
    assert pol.last_plan["accepted"].tolist() == [True, False, True, False]


def test_lara_explores_young_tasks():
    env = small_env(n_nodes=4, k=4, forecast=True)
    pol = LARAPolicy(env)  # explore_obs = 3: never-trained tasks are young
    pol.reset(0)
    tasks = {0: {"left": 10, "cap": 4}, 1: {"left": 12, "cap": 4}}  # no forecast yet
    acts = pol.act(make_observations(env, 0, tasks))
    assert pol.last_plan["young"][:2].tolist() == [True, True]
    counts = counts_of(acts, 4)
    assert counts[0] >= 1 and counts[1] >= 1  # both are probed
