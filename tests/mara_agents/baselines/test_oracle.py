"""The oracle-informed greedy reference (mara_agents/baselines/oracle.py)."""

from __future__ import annotations

from core_env.forecast import OracleForecaster
from mara_agents.baselines import OracleGreedyPolicy
from mara_agents.policy import make_policy
from tests.core_env.helpers import hand_env, make_workload, task

from .helpers import counts_of, make_observations, small_env


def test_oracle_greedy_gives_the_fewest_nodes_then_spreads_the_spare():
    env = small_env(n_nodes=4, k=4, forecast=True)
    # the hand columns stand for oracle forecasts (the policy only reads the columns)
    pol = OracleGreedyPolicy(env)
    tasks = {0: {"left": 4, "cap": 4, "remaining": 8.0},    # 2 nodes finish it in time
             1: {"left": 2, "cap": 2, "remaining": 10.0},   # infeasible: 2 * 2 < 10
             2: {"left": 10, "cap": 1, "remaining": 3.0}}   # 1 node
    counts = counts_of(pol.act(make_observations(env, 0, tasks)), 4)
    assert counts.tolist() == [3, 0, 1, 0]  # the spare node goes to the first served


def test_oracle_greedy_completes_hand_workload():
    """Two tasks that both fit only if each gets exactly the nodes it needs."""
    env = hand_env(3, 2, arrival_slots=1, shaping_beta=0.0)
    wl = make_workload([task(0, 4, target_work=8.0, cap=3), task(0, 4, target_work=4.0, cap=2)],
                       speeds=[1.0, 1.0, 1.0])
    env, pol = make_policy("oracle_greedy", env)
    assert isinstance(env.forecaster, OracleForecaster)
    obs, _ = env.reset(seed=0, options={"workload": wl})
    pol.reset(0)
    while env.agents:
        obs, _, _, _, infos = env.step(pol.act(obs))
    assert infos["node_0"]["episode"]["completed"] == 2
