"""The peer schedulers: LAS (Tiresias), successive halving (ASHA), Optimus, SLAQ and LaiRA,
on hand-worked instances (mara_agents/baselines/{las,halving,optimus,slaq,laira,curvefit}.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mara_agents.baselines import (
    LaiRAPolicy,
    LASPolicy,
    ObservationDecoder,
    OptimusPolicy,
    SLAQPolicy,
    SlotTracker,
    SuccessiveHalvingPolicy,
)
from mara_agents.baselines.curvefit import fit_inverse_curve, nnls
from mara_agents.baselines.halving import rung_budgets
from mara_agents.baselines.laira import KalmanCurve
from mara_agents.baselines.las import las_queue
from mara_agents.baselines.optimus import greedy_marginal_gain
from mara_agents.baselines.slaq import greedy_by_table

from .helpers import counts_of, make_observations, small_env


def _task(arrival: int, t: int, deadline: int, cap: int, **kw) -> dict:
    """A task description for make_observations at slot t (same key every slot)."""
    return {"left": deadline - t, "age": t - arrival, "cap": cap, **kw}


def _act(pol, env, t, tasks, last_slot=None):
    pol_obs = make_observations(env, t, tasks, last_slot)
    return counts_of(pol.act(pol_obs), env.layout.n_slots)


# ------------------------------------------------------------------------- tracker
def test_slot_tracker_counts_attained_service_waiting_and_history():
    env = small_env()
    dec = ObservationDecoder.from_env(env)
    tr = SlotTracker(4, history=True)
    tr.update(dec.decode(make_observations(env, 0, {0: _task(0, 0, 20, 2)})))
    assert tr.attained[0] == 0 and tr.waiting[0] == 1
    tr.update(dec.decode(make_observations(env, 1, {0: _task(0, 1, 20, 2, nodes_last=2,
                                                             work=2.0, gap=1.5)})))
    tr.update(dec.decode(make_observations(env, 2, {0: _task(0, 2, 20, 2, nodes_last=1,
                                                             work=3.0, gap=1.0)})))
    tr.update(dec.decode(make_observations(env, 3, {0: _task(0, 3, 20, 2, work=3.0,
                                                             gap=1.0)})))
    assert tr.attained[0] == 3 and tr.count[0] == 2 and tr.waiting[0] == 1
    work, gap = tr.history(0)
    np.testing.assert_allclose(work, [2.0, 3.0], rtol=1e-5)
    np.testing.assert_allclose(gap, [1.5, 1.0], rtol=1e-6)
    # a new task in the slot starts from nothing
    tr.update(dec.decode(make_observations(env, 4, {0: _task(4, 4, 30, 1)})))
    assert tr.attained[0] == 0 and tr.history(0)[0].size == 0


def test_slot_tracker_keeps_history_only_when_asked():
    env = small_env()
    dec = ObservationDecoder.from_env(env)
    tr = SlotTracker(4)
    tr.update(dec.decode(make_observations(env, 1, {0: _task(0, 1, 20, 2, nodes_last=1,
                                                             work=1.0, gap=0.5)})))
    assert tr.count[0] == 1
    with pytest.raises(ValueError, match="history=True"):
        tr.history(0)


def test_decoded_log_gap_is_the_simulators_loss_over_target():
    import core_env

    env = core_env.parallel_env(preset="CoRE-Small-v0")
    dec = ObservationDecoder.from_env(env)
    obs, _ = env.reset(seed=2)
    rng = np.random.default_rng(0)
    seen = 0
    while env.agents:
        view, sim = dec.decode(obs), env.unwrapped.sim
        obs_ok = view.present & (sim.slot_n_obs[0] > 0)
        want = (sim.slot_log_loss[0] - sim.slot_log_target[0]).astype(np.float64)
        np.testing.assert_allclose(view.log_gap[obs_ok], want[obs_ok], atol=1e-5)
        assert np.all(view.log_gap[~obs_ok] == 0.0)
        seen += int(obs_ok.sum())
        obs, *_ = env.step({a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"])))
                            for a in env.agents})
    assert seen > 10


# ----------------------------------------------------------------------------- LAS
def test_las_queue_of_attained_service():
    assert las_queue(np.array([0.0, 3.9, 4.0, 15.0, 16.0, 100.0]),
                     np.array([4.0, 16.0])).tolist() == [0, 0, 1, 1, 2, 2]


def test_las_demotes_a_task_past_its_threshold_and_fifo_would_not():
    """2 nodes, 3 tasks. A (oldest, cap 2) has received 2 node-slots; B and C (cap 1) are
    new. LAS with threshold 2 demotes A: B and C get a node each. With threshold 64 every
    task is in the first queue and first come first served gives A both nodes."""
    env = small_env(n_nodes=2, k=4)
    for threshold, expected in ((2.0, [0, 1, 1, 0]), (64.0, [2, 0, 0, 0])):
        pol = LASPolicy(env, queues=2, threshold=threshold)
        pol.reset(0)
        assert _act(pol, env, 0, {0: _task(0, 0, 30, 2)}).tolist() == [2, 0, 0, 0]
        tasks = {0: _task(0, 1, 30, 2, nodes_last=2, work=2.0),
                 1: _task(1, 1, 30, 1), 2: _task(1, 1, 30, 1)}
        assert _act(pol, env, 1, tasks, last_slot=[0, 0]).tolist() == expected
        assert pol.queue[:3].tolist() == ([1, 0, 0] if threshold == 2.0 else [0, 0, 0])


def test_las_promotes_a_starved_task_and_restarts_its_clocks():
    """Tiresias's knob: A ran 1 slot (2 node-slots, demoted), then waited 1 slot; with
    starve_limit 1 it is back in the first queue and, being oldest, gets its nodes."""
    env = small_env(n_nodes=2, k=4)
    pol = LASPolicy(env, queues=2, threshold=2.0, starve_limit=1.0)
    pol.reset(0)
    _act(pol, env, 0, {0: _task(0, 0, 30, 2)})
    b, c = _task(1, 1, 30, 1), _task(1, 1, 30, 1)
    assert _act(pol, env, 1, {0: _task(0, 1, 30, 2, nodes_last=2, work=2.0), 1: b, 2: c},
                last_slot=[0, 0]).tolist() == [0, 1, 1, 0]
    tasks = {0: _task(0, 2, 30, 2, work=2.0),
             1: _task(1, 2, 30, 1, nodes_last=1, work=1.0),
             2: _task(1, 2, 30, 1, nodes_last=1, work=1.0)}
    assert _act(pol, env, 2, tasks, last_slot=[1, 2]).tolist() == [2, 0, 0, 0]
    assert pol.queue[0] == 0


def test_las_rejects_bad_parameters():
    env = small_env()
    for kw in ({"queues": 0}, {"threshold": -1.0}, {"growth": 0.5}, {"starve_limit": -1}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            LASPolicy(env, **kw)


# -------------------------------------------------------------- successive halving
def test_rung_budgets_grow_by_eta_up_to_work_max():
    b = rung_budgets(4.0, 4.0)
    assert b.tolist() == [4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0]


def test_successive_halving_promotes_the_best_of_a_rung_and_starves_the_rest():
    """r_min 2, eta 2. A reaches rung 0's budget with gap 0.5: one task in the rung, top
    floor(1/2) = 0, so it pauses. B then reaches it with gap 1.0: the rung has two, the best
    one (A) is promoted; B pauses. With 2 nodes: A (rung 1) first, then the new C; B gets
    none."""
    env = small_env(n_nodes=2, k=4, forecast=True)
    pol = SuccessiveHalvingPolicy(env, r_min=2.0, eta=2.0)
    pol.reset(0)
    a = lambda t, **kw: _task(0, t, 30, 1, **kw)  # noqa: E731
    b = lambda t, **kw: _task(0, t, 31, 1, **kw)  # noqa: E731
    _act(pol, env, 0, {0: a(0), 1: b(0)})
    # A has its rung-0 budget, B not yet
    out = _act(pol, env, 1, {0: a(1, nodes_last=1, work=2.0, gap=0.5),
                             1: b(1, nodes_last=1, work=1.0, gap=1.2)}, last_slot=[0, 1])
    assert pol.paused[:2].tolist() == [True, False] and pol.rung[:2].tolist() == [0, 0]
    assert out.tolist() == [1, 1, 0, 0]  # work conserving: the paused A still gets a node
    c = _task(2, 2, 35, 1)
    out = _act(pol, env, 2, {0: a(2, nodes_last=1, work=3.0, gap=0.4),
                             1: b(2, nodes_last=1, work=2.0, gap=1.0), 2: c},
               last_slot=[0, 1])
    assert pol.rung[:2].tolist() == [1, 0] and pol.paused[:3].tolist() == [False, True, False]
    assert out.tolist() == [1, 0, 1, 0]


def test_successive_halving_rejects_bad_parameters():
    env = small_env(forecast=True)
    for kw in ({"r_min": 0.0}, {"eta": 1.0}, {"metric": "loss"}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            SuccessiveHalvingPolicy(env, **kw)


# ------------------------------------------------------------------------ Optimus
def test_optimus_fit_recovers_an_exact_curve():
    k = np.arange(1.0, 30.0) * 2.0
    loss = 1.0 / (0.3 * k + 2.0) + 0.5
    curve = fit_inverse_curve(k, loss, degree=1)
    assert curve.ok
    np.testing.assert_allclose(curve(k), loss, rtol=5e-3)  # the floor is searched on a grid
    # l = 0.55 at k = (1 / 0.05 - 2) / 0.3 = 60
    assert curve.work_to(0.55) == pytest.approx(60.0, rel=0.01)
    assert curve.work_to(0.45) == math.inf  # below the floor: never
    assert not fit_inverse_curve(k[:1], loss[:1]).ok


def test_nnls_is_non_negative_and_exact_when_the_optimum_is_interior():
    x = np.linspace(0.1, 1.0, 8)
    cols = np.stack([x, np.ones(8)])
    np.testing.assert_allclose(nnls(cols, 3.0 * x + 2.0, np.ones(8))[0], [3.0, 2.0])
    # z falls with x: the best non-negative slope is 0, the intercept the mean
    coef = nnls(cols, 5.0 - x, np.ones(8))[0]
    assert coef[0] == 0.0 and coef[1] == pytest.approx(float(np.mean(5.0 - x)))


def test_optimus_allocation_by_hand():
    """3 tasks, 4 nodes, alpha 1: one node each first come first served (3 nodes), then the
    fourth to the largest drop R (1 - 1/2): 5, 20, 45 -> task 2."""
    out = greedy_marginal_gain(np.array([10.0, 40.0, 90.0]), np.ones(3), np.array([2, 2, 2]),
                               4, np.array([0, 1, 2]))
    assert out.tolist() == [1, 1, 2]
    # 2 nodes, 3 tasks: the two that came first
    out = greedy_marginal_gain(np.array([10.0, 40.0, 90.0]), np.ones(3), np.array([2, 2, 2]),
                               2, np.array([2, 0, 1]))
    assert out.tolist() == [1, 0, 1]


def test_optimus_predicts_remaining_work_from_its_fit():
    env = small_env(n_nodes=2, k=4)
    pol = OptimusPolicy(env, min_points=3, default_remaining=50.0)
    pol.reset(0)
    curve = lambda k: 1.0 / (0.1 * k + 0.5) + 0.5  # noqa: E731 (ratio 1 at k = 15)
    last = None
    for t, k in enumerate([0.0, 2.0, 4.0, 6.0, 8.0]):
        gap = math.log(curve(k)) if k else 0.0
        view_tasks = {0: _task(0, t, 28, 2, work=k, gap=gap, nodes_last=2 if k else 0)}
        _act(pol, env, t, view_tasks, last_slot=last)
        last = [0, 0]
        if t == 1:
            assert pol.remaining[0] == 50.0  # fewer than three points: the default
    assert pol.remaining[0] == pytest.approx(15.0 - 8.0, rel=0.02)


# --------------------------------------------------------------------------- SLAQ
def test_slaq_allocation_by_hand():
    """2 nodes, 3 tasks; normalised reduction with 0, 1, 2 nodes. Node 1: marginals 0.5,
    0.3, 0.4 -> task 0; node 2: 0.1 (task 0's second), 0.3, 0.4 -> task 2."""
    value = np.array([[0.0, 0.5, 0.6], [0.0, 0.3, 0.5], [0.0, 0.4, 0.45]])
    out = greedy_by_table(value, np.array([2, 2, 2]), 2, np.array([0, 1, 2]))
    assert out.tolist() == [1, 0, 1]


def test_slaq_serves_the_task_whose_loss_falls_fastest():
    """Two tasks with three observations each. A's loss still falls steadily; B fell a lot
    at first and is now flat, so its predicted drop is a small fraction of its largest one.
    With one node SLAQ trains A (deadlines play no part: B's is closer)."""
    env = small_env(n_nodes=1, k=4)
    pol = SLAQPolicy(env, min_points=3, decay=1.0)
    pol.reset(0)
    ratio = {0: [4.5, 3.8, 3.2], 1: [3.0, 1.25, 1.2]}
    for t in range(4):
        tasks = {j: _task(0, t, 35 - 15 * j, 1, work=float(t), nodes_last=1 if t else 0,
                          gap=math.log(ratio[j][t - 1]) if t else 0.0) for j in (0, 1)}
        out = _act(pol, env, t, tasks, last_slot=[0])
    assert out.tolist() == [1, 0, 0, 0]


# -------------------------------------------------------------------------- LaiRA
def test_kalman_look_ahead_on_a_known_curve():
    """y = 1 - 0.5 u (a power law: loss / target = e * work**-0.5) reaches the target at
    u = 2. From points at u in [0, 1], the look-ahead says "reachable" at u = 2.4 and not at
    u = 1.6, and its mean follows the line."""
    f = KalmanCurve(q=1e-4, r=0.01, prior_slope=-0.2, prior_slope_sd=1.0,
                    prior_curvature_sd=0.05)
    for u in np.linspace(0.0, 1.0, 8):
        f.update(float(u), float(1.0 - 0.5 * u))
    assert f.mean[1] == pytest.approx(-0.5, abs=0.05)
    for u_end, reachable in ((2.4, True), (1.6, False)):
        mean, sd = f.look_ahead(u_end - f.u)
        assert mean == pytest.approx(1.0 - 0.5 * u_end, abs=0.08)
        assert (mean + sd <= 0) == reachable and (mean - sd <= 0) == reachable


def test_kalman_look_ahead_holds_the_loss_flat_past_the_parabola_minimum():
    f = KalmanCurve(q=1e-6, r=0.01, prior_slope=-1.0, prior_slope_sd=1.0,
                    prior_curvature_sd=1.0)
    for u in np.linspace(0.0, 1.0, 10):
        f.update(float(u), float(1.0 - u + 0.5 * u * u))  # minimum 0.5 at u = 1
    far, _ = f.look_ahead(5.0)
    assert far == pytest.approx(0.5, abs=0.05)  # not 1 - 6 + 18


def test_laira_serves_feasible_tasks_before_infeasible_ones():
    """2 nodes, 3 tasks with two observations each. A's loss is flat far above its target
    (infeasible); B and C fall steadily and reach theirs in time. B and C get the nodes,
    although A's deadline is the earliest."""
    env = small_env(n_nodes=2, k=4, forecast=True)
    pol = LaiRAPolicy(env, z=1.0, beta=0.0, share="cap")
    pol.reset(0)
    hist = {0: [0.0, 2.0, 1.99], 1: [0.0, 1.0, 0.6], 2: [0.0, 1.1, 0.7]}
    for t in range(3):
        tasks = {j: _task(0, t, 20 + 5 * j, 1, work=float(t), gap=hist[j][t],
                          nodes_last=1 if t else 0, remaining=5.0 + 20 * (j == 0))
                 for j in range(3)}
        out = _act(pol, env, t, tasks, last_slot=[0, 1] if t else None)
    assert pol.feasible[:3].tolist() == [False, True, True]
    assert out.tolist() == [0, 1, 1, 0]


def test_laira_rejects_bad_parameters():
    env = small_env(forecast=True)
    for kw in ({"z": -1.0}, {"r": 0.0}, {"share": "half"}, {"deadline_margin": -1}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            LaiRAPolicy(env, **kw)
