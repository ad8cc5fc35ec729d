"""Heuristic schedulers on hand-made situations (mara_agents/baselines/heuristics.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mara_agents.baselines import (
    EDFPolicy,
    FIFOPolicy,
    LeastLaxityPolicy,
    OracleGreedyPolicy,
    RandomPolicy,
    RandomSequentialPolicy,
    RoundRobinPolicy,
    ShortestPredictedPolicy,
)
from tests.core_env.helpers import hand_env, make_workload, task

from .helpers import counts_of, make_observations, small_env


def _trace(env, policy, wl, steps):
    """The first ``steps`` joint actions of node_0 and the slot's task row they train."""
    obs, _ = env.reset(seed=0, options={"workload": wl})
    policy.reset(0)
    picked = []
    for _ in range(steps):
        if not env.agents:
            break
        acts = policy.act(obs)
        a = acts["node_0"]
        picked.append(int(env.unwrapped.sim.slot_task[0, a - 1]) if a else -1)
        obs, *_ = env.step(acts)
    return picked


def test_edf_trains_the_nearest_deadline():
    env = hand_env(1, 3, arrival_slots=1, shaping_beta=0.0)
    wl = make_workload([task(0, 10, target_work=1000.0), task(0, 5, target_work=1000.0),
                        task(0, 8, target_work=1000.0)], speeds=[1.0])
    picked = _trace(env, EDFPolicy(env), wl, 9)
    # task 1 (deadline 5) until it expires, then task 2 (deadline 8), then task 0
    assert picked == [1] * 5 + [2] * 3 + [0]


def test_fifo_trains_the_oldest():
    env = hand_env(1, 3, arrival_slots=3, shaping_beta=0.0)
    wl = make_workload([task(0, 30, target_work=1000.0), task(1, 6, target_work=1000.0),
                        task(2, 8, target_work=1000.0)], speeds=[1.0])
    assert _trace(env, FIFOPolicy(env), wl, 6) == [0] * 6
    # EDF on the same workload switches to the urgent arrivals
    assert _trace(env, EDFPolicy(env), wl, 6)[:3] == [0, 1, 1]


def test_fifo_fills_the_oldest_task_to_its_cap_then_the_next():
    env = small_env(n_nodes=4, k=4)
    tasks = {0: {"left": 9, "age": 1, "cap": 2}, 1: {"left": 5, "age": 3, "cap": 1},
             2: {"left": 20, "age": 2, "cap": 4}}
    counts = counts_of(FIFOPolicy(env).act(make_observations(env, 5, tasks)), 4)
    assert counts.tolist() == [0, 1, 3, 0]  # age 3 (cap 1), then age 2 gets the other 3
    counts = counts_of(EDFPolicy(env).act(make_observations(env, 5, tasks)), 4)
    assert counts.tolist() == [2, 1, 1, 0]  # deadline order: slot 1, slot 0, slot 2


def _known(tasks: dict, t_end: int, n_obs: int = 2) -> list[tuple[int, dict]]:
    """Observation sequence in which every task has trained ``n_obs`` slots by ``t_end``."""
    out = []
    for t in range(t_end - n_obs, t_end + 1):
        back = t_end - t
        out.append((t, {s: dict(d, left=d["left"] + back, age=d.get("age", 0) + n_obs - back,
                               nodes_last=1 if t > t_end - n_obs else 0, work=1.0 + t)
                        for s, d in tasks.items()}))
    return out


def _act_after_history(env, policy, tasks, t_end=5):
    policy.reset(0)
    for t, ts in _known(tasks, t_end):
        acts = policy.act(make_observations(env, t, ts))
    return counts_of(acts, env.layout.n_slots)


def test_shortest_predicted_orders_by_predicted_remaining_work():
    env = small_env(n_nodes=2, k=4, forecast=True)
    tasks = {0: {"left": 30, "cap": 1, "remaining": 30.0},
             1: {"left": 30, "cap": 1, "remaining": 5.0},
             2: {"left": 30, "cap": 1, "remaining": 12.0}}
    counts = _act_after_history(env, ShortestPredictedPolicy(env), tasks)
    assert counts.tolist() == [0, 1, 1, 0]


def test_shortest_predicted_probes_tasks_without_a_forecast():
    env = small_env(n_nodes=1, k=4, forecast=True)
    pol = ShortestPredictedPolicy(env)
    pol.reset(0)
    tasks = {0: {"left": 30, "cap": 1, "remaining": 1.0, "nodes_last": 1, "work": 3.0},
             1: {"left": 20, "cap": 1}}  # never trained: optimistic, served first
    counts = counts_of(pol.act(make_observations(env, 0, tasks)), 4)
    assert counts.tolist() == [0, 1, 0, 0]


def test_least_laxity_serves_the_tightest_feasible_tasks():
    env = small_env(n_nodes=2, k=4, forecast=True)
    tasks = {0: {"left": 10, "cap": 1, "remaining": 8.0},    # laxity 2
             1: {"left": 20, "cap": 1, "remaining": 2.0},    # laxity 18
             2: {"left": 5, "cap": 1, "remaining": 9.0}}     # laxity -4: predicted lost
    counts = _act_after_history(env, LeastLaxityPolicy(env), tasks)
    assert counts.tolist() == [1, 1, 0, 0]
    env1 = small_env(n_nodes=1, k=4, forecast=True)
    assert _act_after_history(env1, LeastLaxityPolicy(env1), tasks).tolist() == [1, 0, 0, 0]


def test_round_robin_spreads_evenly_and_rotates_the_extra_node():
    env = small_env(n_nodes=4, k=4)
    pol = RoundRobinPolicy(env)
    pol.reset(0)
    tasks = {0: {"left": 30, "cap": 4}, 1: {"left": 30, "cap": 4}, 2: {"left": 30, "cap": 4}}
    seen = [counts_of(pol.act(make_observations(env, t, tasks)), 4).tolist() for t in range(3)]
    assert seen == [[2, 1, 1, 0], [1, 2, 1, 0], [1, 1, 2, 0]]
    # caps bind: (cap 1, cap 4) -> 1 and 3
    counts = counts_of(pol.act(make_observations(env, 3, {0: {"left": 9, "cap": 1},
                                                          3: {"left": 9, "cap": 4}})), 4)
    assert counts.tolist() == [1, 0, 0, 3]
    # more tasks than nodes: one node each for a rotating subset
    env2 = small_env(n_nodes=2, k=4)
    pol2 = RoundRobinPolicy(env2)
    pol2.reset(0)
    tasks = {s: {"left": 30, "cap": 2} for s in range(4)}
    seen = [counts_of(pol2.act(make_observations(env2, t, tasks)), 4).tolist() for t in range(2)]
    assert seen == [[1, 1, 0, 0], [0, 0, 1, 1]]


def test_naive_random_draws_each_node_from_its_own_mask():
    env = small_env(n_nodes=4, k=4)
    tasks = {0: {"left": 30, "cap": 1}, 2: {"left": 30, "cap": 2}}
    obs = make_observations(env, 0, tasks)
    pol = RandomPolicy(env)
    pol.reset(3)
    draws = np.array([[pol.act(obs)[a] for a in pol.agents] for _ in range(3000)])
    assert set(np.unique(draws)) == {0, 1, 3}  # idle, slot 0, slot 2: never an empty slot
    for i in range(4):  # each node uniform over its 3 legal actions, whatever the others do
        share = np.bincount(draws[:, i], minlength=4)[[0, 1, 3]] / len(draws)
        assert np.all(np.abs(share - 1 / 3) < 0.04), (i, share)
    assert (np.sum(draws == 1, axis=1) > 1).mean() > 0.2  # cap 1 exceeded: it is naive
    pol.reset(3)
    assert np.array_equal([[pol.act(obs)[a] for a in pol.agents] for _ in range(3000)], draws)


def test_sequential_random_respects_caps_and_its_seed():
    env = small_env(n_nodes=4, k=4)
    tasks = {0: {"left": 30, "cap": 1}, 2: {"left": 30, "cap": 2}}
    obs = make_observations(env, 0, tasks)
    pol = RandomSequentialPolicy(env)
    pol.reset(7)
    draws = [pol.act(obs) for _ in range(200)]
    for acts in draws:
        c = counts_of(acts, 4)
        assert c[0] <= 1 and c[2] <= 2 and c[1] == 0 and c[3] == 0
    pol.reset(7)
    assert [pol.act(obs) for _ in range(200)] == draws
    assert len({tuple(a.values()) for a in draws}) > 3


def test_forecast_policies_need_the_wrapper():
    env = small_env(forecast=False)
    for cls in (LeastLaxityPolicy, ShortestPredictedPolicy, OracleGreedyPolicy):
        with pytest.raises(ValueError, match="LossForecastWrapper"):
            cls(env)
    with pytest.raises(ValueError, match="column"):
        LeastLaxityPolicy(small_env(forecast=True), column="fc_p_reach")
