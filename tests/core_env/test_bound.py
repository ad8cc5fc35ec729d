"""The clairvoyant completion bound (``core_env/bound.py``).

The bound must never be below what any schedule of the real simulator achieves. Three layers:

- brute force: on tiny instances every joint action sequence is run through
  :func:`core_env.dynamics.step` itself (states that agree on everything the future depends
  on are merged), so the optimum is the true optimum of the simulator; the bound equals it on
  instances where the relaxation is exact (alpha = 1, unit speeds, no switching cost, at most
  K tasks) and is at least it on random generated instances (noise, alpha < 1, heterogeneous
  speeds, switching costs, queues);
- every scheduler of ``mara_agents`` on many seeds completes at most the bound: checked in
  ``tests/mara_agents/test_bound_policies.py`` (this file needs core_env alone);
- properties: monotone in the number of nodes, deterministic per seed, LP >= MILP.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

import core_env
from core_env import bound as bound_module
from core_env import dynamics
from core_env.bound import (
    LOSS_TOL,
    WORK_RTOL,
    BoundResult,
    _gain_segments,
    clairvoyant_bound,
    required_work,
    solve_bound,
)
from core_env.state import BatchState, allocate, load_workload
from core_env.workload import generate_workload

from .helpers import hand_env, make_workload, task

SMALL = "CoRE-Small-v0"


# ------------------------------------------------------------------ brute force on the simulator
def _take(s: BatchState, idx: np.ndarray) -> BatchState:
    """Rows ``idx`` of a batch state (every field has the batch as its first axis)."""
    return BatchState(**{f.name: getattr(s, f.name)[idx] for f in dataclasses.fields(s)})


def _merge(s: BatchState, switch_cost: float) -> BatchState:
    """Drop states that agree on everything later successes depend on (task status, visible
    tasks and their work, completions so far, and each node's last task if switching costs)."""
    key = [s.status.astype(np.float64), s.slot_task.astype(np.float64),
           s.slot_work.astype(np.float64), s.completed[:, None].astype(np.float64)]
    if switch_cost > 0:
        key.append(s.last_task.astype(np.float64))
    _, first = np.unique(np.concatenate(key, axis=1), axis=0, return_index=True)
    return _take(s, np.sort(first))


def brute_force_optimum(wl: core_env.Workload, cfg: core_env.CoreConfig) -> int:
    """The most tasks any schedule completes: every joint action, every slot, real dynamics."""
    s = allocate(cfg, 1)
    load_workload(s, 0, wl)
    dynamics.arrive(s)
    params = dynamics.StepParams.from_config(cfg)
    n, k = cfg.cluster.n_nodes, cfg.cluster.max_visible_tasks
    joint = np.array(list(itertools.product(range(k + 1), repeat=n)), dtype=np.int64)
    horizon = min(int(wl.deadline.max()) if wl.n_tasks else 0, cfg.max_steps)
    for _ in range(horizon):
        b = s.batch_size
        s = _take(s, np.repeat(np.arange(b), len(joint)))
        dynamics.step(s, np.tile(joint, (b, 1)), params)
        s = _merge(s, cfg.cluster.switch_cost)
    return int(s.completed.max())


def _hand_cfg(n_nodes: int, k: int, arrival_slots: int = 4, **overrides) -> core_env.CoreConfig:
    return hand_env(n_nodes, k, arrival_slots, **overrides).unwrapped.config


def _random_exact_instance(rng: np.random.Generator, n_nodes: int, k: int
                           ) -> core_env.Workload:
    """At most K tasks, alpha = 1, unit speeds, targets halfway between whole works."""
    m = int(rng.integers(1, k + 1))
    tasks = []
    for a in np.sort(rng.integers(0, 3, size=m)):
        length = int(rng.integers(1, 5))
        tasks.append(task(int(a), int(a) + length, cap=int(rng.integers(1, n_nodes + 2)),
                          target_work=float(rng.integers(1, 2 * length + 1)) - 0.5))
    return make_workload(tasks, speeds=[1.0] * n_nodes)


@pytest.mark.parametrize("scaling", ["linear", "concave"])
def test_bound_equals_brute_force_optimum_on_exact_instances(scaling):
    """alpha = 1, unit speeds, no switching, <= K tasks: the relaxation is exact (the flow
    argument in docs/bound.md), so the MILP value is the simulator's true optimum."""
    rng = np.random.default_rng(9)
    cfg = _hand_cfg(2, 3)
    seen = set()
    for _ in range(12):
        wl = _random_exact_instance(rng, 2, 3)
        opt = brute_force_optimum(wl, cfg)
        res = solve_bound(wl, cfg, scaling=scaling)
        assert res.method == "milp"
        assert res.bound == opt, (wl, res)
        seen.add((opt, wl.n_tasks))
    assert any(opt < m for opt, m in seen)  # some instances are not all-feasible


def test_last_slot_before_the_deadline_and_max_steps():
    """Window [a, d): a cap-1 task needing 2 work in [0, 2) is feasible, needing 3 is not;
    a step limit cuts the window."""
    cfg = _hand_cfg(1, 2)
    feasible = make_workload([task(0, 2, target_work=1.5)], [1.0])
    infeasible = make_workload([task(0, 2, target_work=2.5)], [1.0])
    assert solve_bound(feasible, cfg).bound == brute_force_optimum(feasible, cfg) == 1
    assert solve_bound(infeasible, cfg).bound == brute_force_optimum(infeasible, cfg) == 0
    cut = _hand_cfg(1, 2, max_steps=1)
    assert solve_bound(feasible, cut).bound == brute_force_optimum(feasible, cut) == 0


def test_hand_instance_needs_the_time_indexed_capacity():
    """2 nodes: T0 [0, 2) needs 4 (both nodes, both slots); T1 [0, 4) needs 4 with cap 1.
    Total work 8 fits in 4 slots x 2 nodes, but T1 can only use slots 2, 3 once T0 is done
    and gets 2 < 4 there: the optimum is 1, and so is the bound."""
    cfg = _hand_cfg(2, 2)
    wl = make_workload([task(0, 2, target_work=3.5, cap=2), task(0, 4, target_work=3.5, cap=1)],
                       [1.0, 1.0])
    assert brute_force_optimum(wl, cfg) == 1
    res = solve_bound(wl, cfg)
    assert (res.bound, res.method) == (1, "milp")


TINY = dict(n_nodes=2, max_visible_tasks=2, arrival_slots=3, base_arrival_rate=0.8,
            required_work=(0.5, 4.0), window=(1, 3), parallelism_choices=(1, 2),
            alpha_range=(0.5, 1.0))


@pytest.mark.parametrize("extra", [{}, {"switch_cost": 0.4}, {"speed_choices": (0.5, 1.0, 1.7)},
                                   {"max_visible_tasks": 1, "alpha_range": (1.0, 1.0)}],
                         ids=["noisy", "switch-cost", "heterogeneous", "queue"])
def test_bound_never_below_brute_force_on_random_generated_instances(extra):
    """Generated workloads (noisy observed curves) on a tiny cluster: for every seed the
    bound is at least the simulator's true optimum, and reasonably often equal to it."""
    cfg = core_env.make_config(SMALL, **{**TINY, **extra})
    equal = 0
    for seed in range(12):
        wl = generate_workload(cfg, np.random.default_rng(seed))
        opt = brute_force_optimum(wl, cfg)
        for scaling in ("linear", "concave"):
            res = solve_bound(wl, cfg, scaling=scaling)
            assert res.bound >= opt, (seed, scaling, opt, res)
        equal += res.bound == opt
    assert equal >= 4


def test_integer_targets_are_never_cut_off_by_rounding():
    """Targets exactly at whole works (float32 may or may not reach them): the tolerances
    keep the bound at or above the optimum for every alpha."""
    for alpha in (1.0, 0.7):
        for target in (1.0, 2.0, 3.0, 4.0):
            cfg = _hand_cfg(2, 2)
            wl = make_workload([task(0, 2, target_work=target, cap=2, alpha=alpha),
                                task(0, 3, target_work=target, cap=1, alpha=alpha)], [1.0, 1.0])
            assert solve_bound(wl, cfg).bound >= brute_force_optimum(wl, cfg), (alpha, target)


# ------------------------------------------------------------------ least work
def test_required_work_of_a_power_law_and_rounding():
    """loss = 1/w reaches 1/2.5 at w = 2.5: rounded up to 3 when gains are whole node
    speeds (alpha = 1 or cap 1), kept at 2.5 (less the slack) otherwise."""
    wl = make_workload([task(0, 4, target_work=2.5, cap=2, alpha=1.0),
                        task(0, 4, target_work=2.5, cap=2, alpha=0.8),
                        task(0, 4, target_work=2.5, cap=1, alpha=0.8),
                        task(0, 4, target_work=1e6)], [1.0, 1.0])
    w = required_work(wl)
    assert w[0] == 3.0 and w[2] == 3.0
    assert 2.5 * (1 - 2 * WORK_RTOL) < w[1] < 2.5
    assert math.isinf(w[3])
    w_switch = required_work(wl, switch_cost=0.5)  # gains (1 - c) v are not whole speeds
    assert 2.4 < w_switch[0] < 2.5


def test_required_work_is_a_lower_bound_close_to_the_observed_crossing():
    cfg = core_env.make_config("CoRE-v0")
    wl = generate_workload(cfg, np.random.default_rng(3))
    w = required_work(wl)
    exact = wl.required_observed_work
    finite = np.isfinite(exact)
    whole = wl.cap == 1  # one node of speed 1 per slot: rounded up to a whole work
    ww, ew = w[whole & finite], exact[whole & finite]
    assert np.all(ww == np.round(ww)) and np.all(ww <= np.ceil(ew))
    assert np.all(ww >= np.ceil(ew * (1 - 1e-2)))
    frac = ~whole & finite
    assert frac.sum() > 10
    assert np.all(w[frac] <= exact[frac])
    assert np.all(w[frac] >= exact[frac] * (1 - 1e-2))  # slack is small (LOSS_TOL in log)
    assert LOSS_TOL < 1e-3


def test_flat_start_below_target_needs_any_work():
    wl = make_workload([task(0, 2, target_work=0.1)], [1.0])  # loss at the first grid point
    assert required_work(wl)[0] == 0.0  # already below: one slot of training succeeds
    cfg = _hand_cfg(1, 1)
    assert solve_bound(wl, cfg).bound == brute_force_optimum(wl, cfg) == 1


def test_gain_envelope():
    """k**alpha at whole k, interpolated; with a fast and a slow node at alpha = 0.5 two
    nodes give (4 + 0.1) / sqrt(2) < 4, so the envelope stops at one node."""
    slopes, lengths = _gain_segments(np.ones(4), 0.5, 4)
    np.testing.assert_allclose(np.cumsum(slopes * lengths), np.arange(1, 5) ** 0.5)
    slopes, lengths = _gain_segments(np.array([4.0, 0.1]), 0.5, 2)
    assert slopes.tolist() == [4.0] and lengths.tolist() == [1.0]
    cfg = core_env.make_config(SMALL, n_nodes=2, node_speeds=(4.0, 0.1))
    wl = make_workload([task(0, 2, target_work=7.5, cap=2, alpha=0.5)], [4.0, 0.1])
    assert solve_bound(wl, cfg).bound == brute_force_optimum(wl, cfg) == 1


# ------------------------------------------------------------------ properties
@pytest.mark.parametrize("scaling", ["linear", "concave"])
def test_monotone_in_the_number_of_nodes(scaling):
    wl = generate_workload(core_env.make_config(SMALL), np.random.default_rng(5))
    bounds = []
    for n in range(1, 7):
        cfg = core_env.make_config(SMALL, n_nodes=n)
        bounds.append(solve_bound(wl._replace(speeds=np.ones(n)), cfg, scaling=scaling).bound)
    assert bounds == sorted(bounds)
    assert bounds[0] < bounds[-1]


def test_deterministic_per_seed():
    a = clairvoyant_bound(SMALL, 11)
    b = clairvoyant_bound(SMALL, 11)
    assert (a.bound, a.lp_value, a.method, a.milp_primal) == (b.bound, b.lp_value, b.method,
                                                              b.milp_primal)
    others = {clairvoyant_bound(SMALL, s).lp_value for s in range(12, 16)}
    assert len(others) > 1


def test_workload_is_the_envs():
    """The bound's workload is the one ``reset(seed)`` draws."""
    env = core_env.parallel_env(preset=SMALL)
    env.reset(seed=7)
    wl = env.unwrapped.workload
    cfg = core_env.make_config(SMALL)
    assert solve_bound(wl, cfg).bound == clairvoyant_bound(SMALL, 7).bound
    assert clairvoyant_bound(cfg, 7).n_tasks == wl.n_tasks


def test_lp_and_concave_relations():
    """LP >= MILP bound; concave <= linear; both agree when alpha = 1."""
    for seed in range(3):
        milp = clairvoyant_bound("CoRE-v0", seed, scaling="linear")
        lp = clairvoyant_bound("CoRE-v0", seed, scaling="linear", use_milp=False)
        assert lp.method == "lp" and lp.milp_dual is None
        assert lp.bound >= milp.bound and lp.bound == math.floor(lp.lp_value + 1e-6)
        assert milp.milp_primal is not None and milp.milp_primal <= milp.bound
        concave = clairvoyant_bound("CoRE-v0", seed, scaling="concave", use_milp=False)
        assert concave.lp_value < lp.lp_value - 1
    a1 = clairvoyant_bound(SMALL, 2, alpha_range=(1.0, 1.0), scaling="linear")
    c1 = clairvoyant_bound(SMALL, 2, alpha_range=(1.0, 1.0), scaling="concave")
    assert a1.bound == c1.bound and a1.lp_value == pytest.approx(c1.lp_value, abs=1e-6)


def test_time_blocks_loosen_the_bound_but_keep_it_valid(monkeypatch):
    """One slot per block is the exact time-indexed relaxation; longer blocks aggregate its
    capacity rows (fewer variables, a looser LP, still above every policy)."""
    for seed in range(3):
        exact = clairvoyant_bound("CoRE-v0", seed, use_milp=False, block=1)
        auto = clairvoyant_bound("CoRE-v0", seed, use_milp=False)  # small: one slot a block
        assert (auto.block, auto.lp_value, auto.bound) == (1, exact.lp_value, exact.bound)
        values = [clairvoyant_bound("CoRE-v0", seed, use_milp=False, block=b).lp_value
                  for b in (1, 2, 4, 20)]  # each a coarsening of the one before
        assert values == sorted(values) and values[-1] > values[0]
    # (that no policy beats it: tests/mara_agents/test_bound_policies.py)
    monkeypatch.setattr(bound_module, "MAX_LP_VARIABLES", 5_000)
    auto = clairvoyant_bound("CoRE-v0", 0, use_milp=False)
    assert auto.block > 1 and auto.bound >= clairvoyant_bound("CoRE-v0", 0, block=1).bound


def test_time_limit_falls_back_to_a_valid_bound():
    full = clairvoyant_bound("CoRE-v0", 2)
    assert full.method == "milp"
    rushed = clairvoyant_bound("CoRE-v0", 2, time_limit=1e-3)
    assert rushed.method in ("lp", "milp_limit")
    assert rushed.bound >= full.bound
    assert rushed.bound <= math.floor(rushed.lp_value + 1e-6)


def test_result_fields():
    res = clairvoyant_bound(SMALL, 0)
    assert isinstance(res, BoundResult)
    assert 0 <= res.bound <= res.candidates <= res.n_tasks
    assert res.rate == res.bound / res.n_tasks
    assert res.milp_gap == 0.0 and res.method == "milp"
    assert res.lp_seconds > 0 and res.milp_seconds > 0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"scaling": "cubic"}, "scaling"),
    ({"time_limit": 0}, "time_limit"),
    ({"node_limit": 0}, "node_limit"),
    ({"seed": -1}, "seed"),
    ({"preset": "CoRE-v9"}, "preset"),
    ({"bogus": 1}, "bogus"),
    ({"block": 0}, "block"),
    ({"block": 2.0}, "block"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        clairvoyant_bound(**{"preset": SMALL, "seed": 0, **kwargs})


def test_bad_workload_and_config():
    cfg = core_env.make_config(SMALL)
    with pytest.raises(ValueError, match="overrides"):
        clairvoyant_bound(cfg, 0, n_nodes=3)
    with pytest.raises(ValueError, match="config"):
        solve_bound(generate_workload(cfg, np.random.default_rng(0)), "CoRE-v0")
    wl = make_workload([task(0, 2, target_work=2.0)], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="speeds"):
        solve_bound(wl, cfg)  # 3 speeds, 4 nodes
