"""Hand-worked instances of the step dynamics (SPEC §3 "Entities and one step").

Every task uses a loss curve ``c * w**-b`` that is linear in log work, so the simulator's
interpolation reproduces it and the work at which a task reaches its target is known exactly.
Expected slots, rewards and counters below are derived by hand in the comments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import core_env
from core_env.curves import interp_log_loss

from .helpers import (
    column,
    hand_env,
    joint,
    make_workload,
    masked_random_policy,
    task,
    work_from_obs,
)

NEVER_REACHED = 1e6  # a target work no hand instance gets close to
W = 40.0  # max window of CoRE-Small-v0: time features are divided by it


def episode_keys(ep: dict) -> dict:
    """``info["episode"]`` without its group counts (test_audit.py tests those)."""
    return {k: v for k, v in ep.items() if k != "groups"}


def _work(env) -> np.ndarray:
    return env.sim.slot_work[0].astype(np.float64)


def _feature(env, obs, name, agent="node_0"):
    return float(obs[agent]["observation"][env.layout.index(name)])


# ---------------------------------------------------------------- instance A
def instance_a():
    """2 nodes, K = 2, four tasks (speeds 1, alpha 1, loss 1/w).

    T0: arrives 0, deadline 10, cap 1, succeeds at work >= 2.5 (loss 1/w <= 0.4)
    T1: arrives 0, deadline 3,  cap 2, unreachable target
    T2: arrives 1, deadline 8,  cap 2, succeeds at work >= 3.5
    T3: arrives 1, deadline 2,  cap 1, succeeds at work >= 1.5 (but never becomes visible)
    """
    return make_workload([
        task(0, 10, target_work=2.5, cap=1),
        task(0, 3, target_work=NEVER_REACHED, cap=2),
        task(1, 8, target_work=3.5, cap=2),
        task(1, 2, target_work=1.5, cap=1),
    ], speeds=[1.0, 1.0])


def test_instance_a_completion_and_expiry_slots():
    env = hand_env(2, 2, arrival_slots=3, shaping_beta=0.0)
    obs, _ = env.reset(seed=0, options={"workload": instance_a()})
    assert list(column(env, obs, "present")) == [1, 1]
    assert list(obs["node_0"]["action_mask"]) == [1, 1, 1]
    assert _feature(env, obs, "queue_len") == 0.0
    np.testing.assert_allclose(column(env, obs, "time_to_deadline"), [10 / W, 3 / W])

    # t=0: node_0 -> T0 (slot 0), node_1 -> T1 (slot 1): work 1 each, nothing succeeds.
    # t becomes 1: T2 and T3 arrive, both slots are busy: queue = 2.
    obs, rew, term, trunc, _ = env.step(joint(env, [1, 2]))
    assert rew["node_0"] == 0.0 and not term["node_0"] and not trunc["node_0"]
    np.testing.assert_allclose(_work(env), [1.0, 1.0])
    np.testing.assert_allclose(work_from_obs(env, obs), [1.0, 1.0], rtol=1e-5)
    assert _feature(env, obs, "queue_len") == pytest.approx(2 / (4 * 2))
    # loss_gap = ln(loss / target) / 4 = (ln 1 - ln 0.4) / 4 for T0
    np.testing.assert_allclose(column(env, obs, "loss_gap")[0], math.log(2.5) / 4, rtol=1e-5)

    # t=1: work 2 each (T0 loss 0.5 > 0.4). t becomes 2: the queued T3 (deadline 2) expires
    # without ever having been visible; T2 still waits.
    obs, rew, *_ = env.step(joint(env, [1, 2]))
    assert rew["node_0"] == 0.0
    np.testing.assert_allclose(_work(env), [2.0, 2.0])
    assert _feature(env, obs, "queue_len") == pytest.approx(1 / 8)
    assert list(column(env, obs, "present")) == [1, 1]
    np.testing.assert_allclose(column(env, obs, "time_to_deadline"), [8 / W, 1 / W], rtol=1e-6)

    # t=2: T0 reaches work 3 (loss 1/3 <= 0.4): success, reward 1, slot 0 frees.
    # t becomes 3: T1 (deadline 3) expires; T2 leaves the queue for the lowest free slot (0).
    obs, rew, *_ = env.step(joint(env, [1, 2]))
    assert rew["node_0"] == 1.0
    assert list(column(env, obs, "present")) == [1, 0]
    assert list(obs["node_1"]["action_mask"]) == [1, 1, 0]
    assert _feature(env, obs, "queue_len") == 0.0
    np.testing.assert_allclose(column(env, obs, "time_to_deadline")[0], (8 - 3) / W, rtol=1e-6)
    np.testing.assert_allclose(column(env, obs, "age")[0], (3 - 1) / W, rtol=1e-6)  # queued time
    assert column(env, obs, "log_work")[0] == 0.0  # a fresh task, never trained
    assert column(env, obs, "loss_gap")[0] == 0.0

    # t=3: both nodes on T2 (cap 2, alpha 1): work 2, loss 0.5 > 1/3.5.
    obs, rew, *_ = env.step(joint(env, [1, 1]))
    assert rew["node_0"] == 0.0
    assert _work(env)[0] == pytest.approx(2.0)
    assert column(env, obs, "nodes_last")[0] == pytest.approx(1.0)
    # t=4: node_1 picks the empty slot 1 -> runs as idle (illegal); T2 work 3.
    obs, rew, *_ = env.step(joint(env, [1, 2]))
    assert rew["node_0"] == 0.0
    assert _work(env)[0] == pytest.approx(3.0)
    assert _feature(env, obs, "idle_last", "node_1") == 1.0
    assert _feature(env, obs, "idle_last", "node_0") == 0.0
    assert _feature(env, obs, "busy_last") == pytest.approx(0.5)
    # t=5: both on T2: work 5 >= 3.5: success. Arrivals ended, nothing left: terminated.
    obs, rew, term, trunc, infos = env.step(joint(env, [1, 1]))
    assert rew["node_0"] == 1.0
    assert all(term.values()) and not any(trunc.values())
    ep = episode_keys(infos["node_1"]["episode"])
    assert ep == {
        "arrived": 4, "completed": 2, "expired": 2, "completion_rate": 0.5,
        # busy node-slots: 2 + 2 + 2 + 2 + 1 + 2 = 11 of 6 * 2
        "utilization": pytest.approx(11 / 12), "illegal_actions": 1, "capacity_conflicts": 0,
        # at t=3 both nodes moved to T2 from a different task (T0 / T1); at t=5 node_1 had idled
        "switches": 2, "restores": 0, "length": 6, "return": 2.0,  # T2's nodes held it
    }


def test_instance_a_queued_task_never_visible():
    """T3 (deadline 2) must never appear in a visible slot: every visible deadline is one of
    T0/T1/T2's, decoded from the time_to_deadline feature."""
    env = hand_env(2, 2, arrival_slots=3, shaping_beta=0.0)
    obs, _ = env.reset(seed=0, options={"workload": instance_a()})
    t = 0
    for acts in ([1, 2], [1, 2], [1, 2], [1, 1], [1, 2], [1, 1]):
        present = column(env, obs, "present") > 0
        deadlines = np.rint(column(env, obs, "time_to_deadline")[present] * W) + t
        assert set(deadlines.tolist()) <= {10, 3, 8}
        obs, *_ = env.step(joint(env, acts))
        t += 1


def test_success_in_last_slot_before_deadline_counts():
    """A task may train in slots a .. d-1; reaching the target in slot d-1 is a success."""
    env = hand_env(1, 2, arrival_slots=1, shaping_beta=0.0)
    wl = make_workload([task(0, 2, target_work=1.5), task(0, 2, target_work=2.5)], [1.0])
    env.reset(seed=0, options={"workload": wl})
    env.step(joint(env, [1]))  # T0 work 1
    obs, rew, term, trunc, infos = env.step(joint(env, [1]))  # T0 work 2 at slot 1 = d - 1
    assert rew["node_0"] == 1.0 and all(term.values())
    ep = episode_keys(infos["node_0"]["episode"])
    assert (ep["completed"], ep["expired"], ep["length"]) == (1, 1, 2)


def test_arrival_becomes_visible_in_its_slot():
    env = hand_env(1, 2, arrival_slots=4, shaping_beta=0.0)
    wl = make_workload([task(2, 6, target_work=NEVER_REACHED)], [1.0])
    obs, _ = env.reset(seed=0, options={"workload": wl})
    assert column(env, obs, "present").sum() == 0
    assert _feature(env, obs, "arrivals_open") == 1.0
    obs, *_ = env.step(joint(env, [0]))
    assert column(env, obs, "present").sum() == 0  # t = 1 < 2
    obs, *_ = env.step(joint(env, [0]))
    assert list(column(env, obs, "present")) == [1, 0]  # t = 2: arrived, visible
    assert column(env, obs, "age")[0] == 0.0
    for _ in range(2):
        obs, *_ = env.step(joint(env, [0]))
    assert _feature(env, obs, "arrivals_open") == 0.0  # t = 4 = arrival_slots


def test_fifo_queue_fills_lowest_free_slots_in_arrival_order():
    """1 node, K = 3, six tasks arriving at slot 0; nothing is ever trained.

    Visible at t=0: T0 (deadline 2) slot 0, T1 (20) slot 1, T2 (2) slot 2; queue T3, T4, T5.
    At t=2 T0 and T2 expire: T3 -> slot 0, T4 -> slot 2. At t=20 T1 expires: T5 -> slot 1.
    """
    deadlines = [2, 20, 2, 30, 25, 35]
    wl = make_workload([task(0, d, target_work=NEVER_REACHED) for d in deadlines], [1.0])
    env = hand_env(1, 3, arrival_slots=1, shaping_beta=1.0)
    obs, _ = env.reset(seed=0, options={"workload": wl})

    def visible_deadlines(t):
        present = column(env, obs, "present") > 0
        dl = np.rint(column(env, obs, "time_to_deadline") * W) + t
        return [int(d) if p else None for d, p in zip(dl, present, strict=False)]

    assert visible_deadlines(0) == [2, 20, 2]
    assert _feature(env, obs, "queue_len") == pytest.approx(3 / 12)
    # queue_urgency: the most urgent queued task (T4, deadline 25) has 25 slots of 40 left
    assert _feature(env, obs, "queue_urgency") == pytest.approx(25 / W)
    rewards = []
    for t in range(1, 36):
        obs, rew, term, trunc, infos = env.step(joint(env, [0]))
        rewards.append(rew["node_0"])
        if t == 1:
            assert visible_deadlines(t) == [2, 20, 2]
        if t == 2:
            assert visible_deadlines(t) == [30, 20, 25]
            assert _feature(env, obs, "queue_len") == pytest.approx(1 / 12)
            assert _feature(env, obs, "queue_urgency") == pytest.approx((35 - 2) / W)
        if t == 20:
            assert visible_deadlines(t) == [30, 35, 25]
            assert _feature(env, obs, "queue_urgency") == 1.0  # empty queue
            np.testing.assert_allclose(column(env, obs, "age")[1], 20 / W)
        if t == 25:
            assert visible_deadlines(t) == [30, 35, None]
    assert all(term.values())
    ep = episode_keys(infos["node_0"]["episode"])
    assert (ep["arrived"], ep["completed"], ep["expired"], ep["length"]) == (6, 0, 6, 35)
    assert ep["utilization"] == 0.0 and ep["switches"] == 0
    assert rewards == [0.0] * 35  # never trained: psi stays 0, no shaping either


# ---------------------------------------------------------------- rewards by hand
def test_docstring_worked_example_beta_half():
    """Loss 2/w, target 0.5 (work 4). Work 1 -> loss 2 (first observation, psi 0);
    work 2 -> loss 1, psi = ln(2/1) / ln(2/0.5) = 0.5, r = 0.5 * 0.5 = 0.25;
    then 3 nodes (cap 3, alpha 1) -> work 5, loss 0.4 <= 0.5: r = 1 + 0.5 * (0 - 0.5) = 0.75."""
    wl = make_workload([task(0, 10, target_work=4.0, cap=3, c=2.0)], [1.0, 1.0, 1.0])
    env = hand_env(3, 1, arrival_slots=1, shaping_beta=0.5)
    env.reset(seed=0, options={"workload": wl})
    obs, r0, *_ = env.step(joint(env, [1, 0, 0]))
    assert r0["node_0"] == pytest.approx(0.0, abs=1e-6)
    assert column(env, obs, "progress")[0] == pytest.approx(0.0, abs=1e-6)
    obs, r1, *_ = env.step(joint(env, [1, 0, 0]))
    assert r1["node_0"] == pytest.approx(0.25, abs=1e-6)
    assert column(env, obs, "progress")[0] == pytest.approx(0.5, abs=1e-6)
    obs, r2, term, _, infos = env.step(joint(env, [1, 1, 1]))
    assert r2["node_0"] == pytest.approx(0.75, abs=1e-6)
    assert all(term.values())
    assert infos["node_0"]["episode"]["return"] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0])
def test_shaping_on_expiry_by_hand(beta):
    """Loss 1/w, target work 16, deadline 3: psi after work 1, 2, 3 is 0, ln2/ln16, ln3/ln16;
    the task expires at the end of slot 2, so that step's reward is beta * (0 - ln2/ln16)."""
    wl = make_workload([task(0, 3, target_work=16.0)], [1.0])
    env = hand_env(1, 1, arrival_slots=1, shaping_beta=beta)
    env.reset(seed=0, options={"workload": wl})
    rewards = []
    for _ in range(3):
        obs, rew, term, trunc, infos = env.step(joint(env, [1]))
        rewards.append(rew["node_0"])
    psi1 = math.log(2) / math.log(16)
    np.testing.assert_allclose(rewards, [0.0, beta * psi1, -beta * psi1], atol=1e-6)
    assert all(term.values())
    assert infos["node_0"]["episode"]["expired"] == 1
    assert sum(rewards) == pytest.approx(0.0, abs=1e-9)


# ---------------------------------------------------------------- parallelism caps
def test_capacity_conflicts_lowest_nodes_keep_the_task():
    """3 nodes of speeds 0.5, 2, 1; T0 cap 1 (alpha 1), T1 cap 2 (alpha 0.5); K = 3 (slot 3
    stays empty).

    [1,1,1]: node_0 keeps T0: work 0.5, 2 conflicts.
    [2,2,2]: nodes 0,1 keep T1: work (0.5 + 2) * 2**-0.5, 1 conflict.
    [0,1,1]: node_1 keeps T0: +2.0, 1 conflict.
    [3,1,1]: node_0's pick is illegal (empty slot) and uses no capacity: node_1 keeps T0: +2.0,
             1 conflict, 1 illegal.
    """
    wl = make_workload([task(0, 30, target_work=NEVER_REACHED, cap=1),
                        task(0, 30, target_work=NEVER_REACHED, cap=2, alpha=0.5)],
                       speeds=[0.5, 2.0, 1.0])
    env = hand_env(3, 3, arrival_slots=1, shaping_beta=0.0, max_steps=4,
                   speed_choices=(0.5, 1.0, 2.0))  # speeds up to 2 are in range
    env.reset(seed=0, options={"workload": wl})
    obs, *_ = env.step(joint(env, [1, 1, 1]))
    np.testing.assert_allclose(_work(env)[:2], [0.5, 0.0], rtol=1e-6)
    assert column(env, obs, "nodes_last")[0] == pytest.approx(1 / 3)
    # last_slot = (slot trained last slot + 1) / K for the node that kept the task, else 0
    assert [_feature(env, obs, "last_slot", a) for a in env.possible_agents] == [
        pytest.approx(1 / 3), 0.0, 0.0]
    assert [_feature(env, obs, "idle_last", a) for a in env.possible_agents] == [0, 1, 1]
    obs, *_ = env.step(joint(env, [2, 2, 2]))
    t1 = 2.5 * 2 ** -0.5
    np.testing.assert_allclose(_work(env)[:2], [0.5, t1], rtol=1e-6)
    assert column(env, obs, "nodes_last")[1] == pytest.approx(2 / 3)
    obs, *_ = env.step(joint(env, [0, 1, 1]))
    np.testing.assert_allclose(_work(env)[:2], [2.5, t1], rtol=1e-6)
    obs, rew, term, trunc, infos = env.step(joint(env, [3, 1, 1]))
    np.testing.assert_allclose(_work(env)[:2], [4.5, t1], rtol=1e-6)
    assert all(trunc.values())
    ep = episode_keys(infos["node_0"]["episode"])
    assert ep["capacity_conflicts"] == 5
    assert ep["illegal_actions"] == 1
    # node_0 T0 -> T1 at step 2; node_1 T1 -> T0 at step 3; dropped nodes trained nothing
    assert ep["switches"] == 2
    assert ep["utilization"] == pytest.approx((1 + 2 + 1 + 1) / 12)


@pytest.mark.parametrize("alpha", [1.0, 0.7, 0.35])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_k_homogeneous_nodes_add_k_pow_alpha(k, alpha):
    """Loss 1/w with target work 30: the observed loss gap decodes the work exactly."""
    wl = make_workload([task(0, 30, target_work=30.0, cap=4, alpha=alpha)], [1.0] * 4)
    env = hand_env(4, 1, arrival_slots=1, shaping_beta=0.0)
    env.reset(seed=0, options={"workload": wl})
    acts = [1] * k + [0] * (4 - k)
    for step in (1, 2):
        obs, *_ = env.step(joint(env, acts))
        expected = step * k ** alpha
        assert _work(env)[0] == pytest.approx(expected, rel=1e-6)
        # ln(loss / target) / 4 = (ln 30 - ln w) / 4, inside the clip range
        gap = float(column(env, obs, "loss_gap")[0])
        assert 30.0 * math.exp(-4.0 * gap) == pytest.approx(expected, rel=1e-4)
        assert work_from_obs(env, obs)[0] == pytest.approx(expected, rel=1e-5)
        assert column(env, obs, "nodes_last")[0] == pytest.approx(k / 4)


def test_cap_limits_scaling():
    wl = make_workload([task(0, 30, target_work=1000.0, cap=2, alpha=0.7)], [1.0] * 4)
    env = hand_env(4, 1, arrival_slots=1, shaping_beta=0.0, max_steps=1)
    obs, _ = env.reset(seed=0, options={"workload": wl})
    assert env.layout.capacity(obs["node_0"]["observation"])[0] == 2
    obs, _, _, _, infos = env.step(joint(env, [1, 1, 1, 1]))
    assert _work(env)[0] == pytest.approx(2 ** 0.7, rel=1e-6)
    assert infos["node_0"]["episode"]["capacity_conflicts"] == 2


# ---------------------------------------------------------------- switching cost
@pytest.mark.parametrize("c", [0.0, 0.25])
def test_switching_cost_single_node(c):
    """1 node, two unreachable tasks. Actions T0, T1, T1, idle, T0, T0: T0 gets 1 and T1 gets
    1 (first slots restore nothing), then T1 gets 1 (the node holds it); idle; T0 gets 1 - c
    (the node holds T1: T0 is restored, although the node idled last slot), then 1. One
    switch (T0 -> T1), one restore."""
    wl = make_workload([task(0, 30, target_work=NEVER_REACHED),
                        task(0, 30, target_work=NEVER_REACHED)], [1.0])
    env = hand_env(1, 2, arrival_slots=1, shaping_beta=0.0, switch_cost=c, max_steps=6)
    env.reset(seed=0, options={"workload": wl})
    expected = [(1, 0), (1, 1), (1, 2), (1, 2), (2 - c, 2), (3 - c, 2)]
    for a, exp in zip([1, 2, 2, 0, 1, 1], expected, strict=False):
        obs, rew, term, trunc, infos = env.step(joint(env, [a]))
        np.testing.assert_allclose(_work(env), exp, rtol=1e-6)
    assert all(trunc.values())
    assert infos["node_0"]["episode"]["switches"] == 1
    assert infos["node_0"]["episode"]["restores"] == 1


def test_switching_cost_mixed_nodes_and_alpha():
    """switch_cost 0.5; T1 cap 2, alpha 0.5. Step 1: node_0 on T0, node_1 on T1.
    Step 2: both on T1: node_0 switched (delivers 0.5), node_1 did not (1.0):
    gain = (0.5 + 1.0) * 2**(0.5 - 1)."""
    wl = make_workload([task(0, 30, target_work=NEVER_REACHED),
                        task(0, 30, target_work=NEVER_REACHED, cap=2, alpha=0.5)], [1.0, 1.0])
    env = hand_env(2, 2, arrival_slots=1, shaping_beta=0.0, switch_cost=0.5, max_steps=2)
    env.reset(seed=0, options={"workload": wl})
    env.step(joint(env, [1, 2]))
    np.testing.assert_allclose(_work(env), [1.0, 1.0])
    *_, infos = env.step(joint(env, [2, 2]))
    np.testing.assert_allclose(_work(env), [1.0, 1.0 + 1.5 * 2 ** -0.5], rtol=1e-6)
    assert infos["node_0"]["episode"]["switches"] == 1


def test_a_first_slot_restores_nothing_and_a_return_restores():
    """The node trained T0 (which succeeded) and now trains T1 for the first time: nothing
    to restore. Then T2 starts, and T1 comes back to the node, which holds T2: a restore."""
    wl = make_workload([task(0, 30, target_work=0.9),
                        task(0, 30, target_work=NEVER_REACHED),
                        task(0, 30, target_work=NEVER_REACHED)], [1.0])
    env = hand_env(1, 3, arrival_slots=1, shaping_beta=0.0, switch_cost=0.5, max_steps=4)
    env.reset(seed=0, options={"workload": wl})
    obs, rew, *_ = env.step(joint(env, [1]))
    assert rew["node_0"] == 1.0
    assert list(column(env, obs, "present")) == [0, 1, 1]
    env.step(joint(env, [2]))
    assert _work(env)[1] == pytest.approx(1.0)
    env.step(joint(env, [3]))
    *_, infos = env.step(joint(env, [2]))
    assert _work(env)[1] == pytest.approx(1.5)
    assert (infos["node_0"]["episode"]["switches"], infos["node_0"]["episode"]["restores"]) \
        == (3, 1)


# ---------------------------------------------------------------- heterogeneous speeds
def test_node_speeds_override_hand_workload():
    env = hand_env(2, 1, arrival_slots=1, shaping_beta=0.0, node_speeds=(0.5, 2.0))
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(env.workload.speeds, [0.5, 2.0])
    assert _feature(env, obs, "speed", "node_0") == pytest.approx(0.25)
    assert _feature(env, obs, "speed", "node_1") == pytest.approx(1.0)
    wl = make_workload([task(0, 30, target_work=NEVER_REACHED, cap=2, alpha=0.6)],
                       env.workload.speeds)
    env.reset(seed=0, options={"workload": wl})
    env.step(joint(env, [1, 1]))
    w1 = 2.5 * 2 ** (0.6 - 1)  # sum of speeds * k**(alpha - 1)
    assert _work(env)[0] == pytest.approx(w1, rel=1e-6)
    env.step(joint(env, [0, 1]))
    assert _work(env)[0] == pytest.approx(w1 + 2.0, rel=1e-6)
    env.step(joint(env, [1, 0]))
    assert _work(env)[0] == pytest.approx(w1 + 2.5, rel=1e-6)


def test_node_speeds_override_generated_workload():
    """On drawn tasks: when both nodes train a task of cap >= 2, its work grows by
    (0.5 + 2.0) * 2**(alpha - 1), alpha read from the observation."""
    env = core_env.parallel_env(preset="CoRE-Small-v0", n_nodes=2, node_speeds=(0.5, 2.0),
                                load=3.0)
    checked = 0
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        while env.agents and checked < 12:
            cap = env.layout.capacity(obs["node_0"]["observation"])
            two = np.flatnonzero(cap >= 2)
            if two.size == 0:
                obs, *_ = env.step(joint(env, [0, 0]))
                continue
            k = int(two[0])
            alpha = float(column(env, obs, "alpha")[k])
            before = _work(env)[k]
            task_row = int(env.sim.slot_task[0, k])
            obs, *_ = env.step(joint(env, [k + 1, k + 1]))
            if env.agents and env.sim.slot_task[0, k] == task_row:  # still visible
                assert _work(env)[k] - before == pytest.approx(2.5 * 2 ** (alpha - 1), rel=1e-5)
                checked += 1
    assert checked >= 5


# ---------------------------------------------------------------- noise as a function of work
def test_observed_loss_is_the_noise_path_at_cumulative_work():
    """Common random numbers: the observed loss is the task's fixed observed path evaluated at
    its cumulative work (read via the loss_gap feature), whatever the policy did."""
    env = core_env.parallel_env(preset="CoRE-Small-v0", load=2.0)
    pol = masked_random_policy(np.random.default_rng(3))
    checked = 0
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        wl = env.workload
        while env.agents:
            obs, *_ = env.step(pol(env, obs))
            rows = env.sim.slot_task[0]
            work = _work(env)
            for k in np.flatnonzero((rows >= 0) & (work > 0)):
                j = int(rows[k])
                ll = interp_log_loss(wl.log_loss[j:j + 1], np.log(work[k:k + 1]))[0]
                expected = np.clip((ll - wl.log_target[j]) / 4, -1, 1)
                assert column(env, obs, "loss_gap")[k] == pytest.approx(expected, abs=2e-5)
                checked += 1
    assert checked > 50


def test_slope_feature_on_a_power_law():
    """Loss 3 * w**-1.5: d ln loss / d ln work = -1.5, so the slope feature (slope / 3) is
    0 after the first observation and -0.5 from the second on, whatever the work increments."""
    wl = make_workload([task(0, 30, target_work=NEVER_REACHED, cap=2, c=3.0, b=1.5)], [1.0, 1.0])
    env = hand_env(2, 1, arrival_slots=1, shaping_beta=0.0)
    env.reset(seed=0, options={"workload": wl})
    slopes = []
    for acts in ([1, 0], [1, 1], [0, 0], [1, 0], [1, 1], [1, 1], [1, 0]):
        obs, *_ = env.step(joint(env, acts))
        slopes.append(float(column(env, obs, "slope")[0]))
    np.testing.assert_allclose(slopes, [0.0] + [-0.5] * 6, atol=1e-4)


def test_success_threshold_is_sharp():
    """Observed loss <= target succeeds, with no tolerance: targets at work 1.9999 and 2.0001
    (log-loss 5e-5 either side of the loss at work 2) succeed at work 2 and work 3."""
    wl = make_workload([task(0, 30, target_work=1.9999), task(0, 30, target_work=2.0001)],
                       [1.0, 1.0])
    env = hand_env(2, 2, arrival_slots=1, shaping_beta=0.0)
    env.reset(seed=0, options={"workload": wl})
    rewards = []
    for _ in range(3):
        obs, rew, term, *_ = env.step(joint(env, [1, 2]))
        rewards.append(rew["node_0"])
        if all(term.values()):
            break
    assert rewards == [0.0, 1.0, 1.0]
