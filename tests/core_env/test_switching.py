"""Switching cost as a cluster has it (SPEC §9): a job pays its own restore cost wherever it
lands on a node that does not hold its state, resumes for free on a node that does, pays
nothing in its first slot; the costs are drawn per task, visible to the scheduler, and
leave the rest of the workload unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import core_env
from core_env.config import MAX_SWITCH_COST
from core_env.workload import generate_workload, validate_workload

from .helpers import column, hand_env, joint, make_workload, task

NEVER_REACHED = 1e6


def _work(env) -> np.ndarray:
    return env.sim.slot_work[0].astype(np.float64)


def _instance(cost_a: float = 0.5, cost_b: float = 0.25) -> core_env.Workload:
    """2 nodes of speed 1; A (cap 2) and B (cap 1), alpha 1, targets never reached."""
    wl = make_workload([task(0, 30, target_work=NEVER_REACHED, cap=2),
                        task(0, 30, target_work=NEVER_REACHED, cap=1)], speeds=[1.0, 1.0])
    return wl._replace(switch_cost=np.array([cost_a, cost_b]))


def test_a_job_pays_its_restore_wherever_it_lands_and_resumes_free_where_it_is_held():
    env = hand_env(2, 2, arrival_slots=1, shaping_beta=0.0)
    obs, _ = env.reset(seed=0, options={"workload": _instance()})
    np.testing.assert_allclose(column(env, obs, "switch_cost"), [0.5, 0.25])
    # t=0: node_0 trains A for the first time: nothing to restore
    obs, *_ = env.step(joint(env, [1, 0]))
    assert _work(env)[0] == pytest.approx(1.0)
    assert obs["node_0"]["observation"][env.layout.index("held_slot")] == pytest.approx(0.5)
    assert column(env, obs, "holders")[0] == pytest.approx(0.5)
    # t=1: A moves to node_1, which idled: it restores A (the old node rule charged nothing)
    env.step(joint(env, [0, 1]))
    assert _work(env)[0] == pytest.approx(1.5)
    # t=2: A back on node_0, which still holds it (it idled since): free
    env.step(joint(env, [1, 0]))
    assert _work(env)[0] == pytest.approx(2.5)
    # t=3: both nodes hold A (node_1 trained it at t=1): free on both
    obs, *_ = env.step(joint(env, [1, 1]))
    assert _work(env)[0] == pytest.approx(4.5)
    assert column(env, obs, "holders")[0] == pytest.approx(1.0)
    # t=4: node_0 trains B (its first slot: free) and evicts A; t=5: A on node_0 restores
    env.step(joint(env, [2, 1]))
    assert _work(env)[1] == pytest.approx(1.0) and _work(env)[0] == pytest.approx(5.5)
    obs, _, _, _, infos = env.step(joint(env, [1, 0]))
    assert _work(env)[0] == pytest.approx(6.0)
    assert column(env, obs, "holders")[1] == 0.0  # nobody holds B now
    # restores: A at t=1 and t=5; the node rule's switches: node_0 A->B at t=4, B->A at t=5
    assert int(env.sim.restores[0]) == 2 and int(env.sim.switches[0]) == 2


def test_without_costs_restores_are_counted_and_free():
    env = hand_env(2, 2, arrival_slots=1, shaping_beta=0.0)
    env.reset(seed=0, options={"workload": _instance(0.0, 0.0)})
    for acts in ([1, 0], [0, 1], [2, 1], [1, 2]):
        env.step(joint(env, acts))
    assert _work(env)[0] == pytest.approx(4.0) and _work(env)[1] == pytest.approx(2.0)
    assert int(env.sim.restores[0]) == 3  # A on node_1 at t=1; A on node_0, B on node_1 at t=3


def test_costs_are_drawn_per_task_after_everything_else():
    plain = core_env.make_config("CoRE-v0")
    costly = core_env.make_config("CoRE-Switch-v0")
    a = generate_workload(plain, np.random.default_rng(3))
    b = generate_workload(costly, np.random.default_rng(3))
    for f in ("arrival", "deadline", "log_target", "cap", "alpha", "log_loss", "speeds"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert not a.switch_cost.any() and a.episode_switch_cost == 0.0
    lo, hi = 0.1 * 0.2, 0.1 * 5.0
    assert b.episode_switch_cost == 0.1
    assert lo <= b.switch_cost.min() < 0.03 and 0.35 < b.switch_cost.max() <= hi
    assert b.switch_cost.std() > 0
    choices = plain.replace(switch_cost_choices=(0.0, 0.2, 0.4))
    drawn = {generate_workload(choices, np.random.default_rng(s)).episode_switch_cost
             for s in range(30)}
    assert drawn == {0.0, 0.2, 0.4}


def test_the_global_feature_is_the_episode_cost_and_costs_are_capped():
    env = core_env.parallel_env(preset="CoRE-v0", switch_cost=0.9,
                                switch_cost_spread=(1.0, 4.0))
    obs, _ = env.reset(seed=1)
    assert obs["node_3"]["observation"][env.layout.index("episode_switch_cost")] == \
        pytest.approx(0.9)
    assert env.workload.switch_cost.max() == MAX_SWITCH_COST


def test_user_workloads_take_the_configs_cost_or_are_refused():
    cfg = core_env.make_config("CoRE-Small-v0", n_nodes=2, switch_cost=0.3)
    wl = make_workload([task(0, 5, target_work=3.0)], speeds=[1.0, 1.0])
    assert validate_workload(wl, cfg).switch_cost.tolist() == [0.3]
    for bad in (np.array([1.2]), np.array([-0.1]), np.array([0.1, 0.2]), np.array([np.nan])):
        with pytest.raises(ValueError, match="workload.switch_cost"):
            validate_workload(wl._replace(switch_cost=bad), cfg)


@pytest.mark.parametrize("field,value", [("switch_cost", 0.96), ("switch_cost_spread", (0, 1)),
                                         ("switch_cost_spread", (2.0, 1.0)),
                                         ("switch_cost_choices", (0.1, 1.0)),
                                         ("switch_cost_choices", ())])
def test_bad_cost_settings_are_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        core_env.make_config("CoRE-v0", **{field: value})


def test_the_cluster_preset_draws_gavel_speeds_and_costs():
    cfg = core_env.make_config("CoRE-Cluster-v0")
    assert cfg.cluster.speed_choices == (0.3, 1.0, 1.4) and cfg.cluster.has_switch_cost
    assert dataclasses.replace(cfg.cluster, speed_choices=None) == \
        core_env.make_config("CoRE-Switch-v0").cluster
