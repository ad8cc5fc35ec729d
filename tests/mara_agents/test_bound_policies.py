"""The clairvoyant completion bound (``core_env/bound.py``) against the schedulers of
``mara_agents``: every policy of :data:`POLICIES_TO_CHECK` on many seeds completes at most the
bound, also with coarse time blocks (the bound's own checks, brute force on the simulator
included, are ``tests/core_env/test_bound.py``, which needs core_env alone)."""

from __future__ import annotations

import functools

import pytest

import core_env
from core_env.bound import BoundResult, clairvoyant_bound
from mara_agents.policy import BASELINES as POLICY_NAMES
from mara_agents.policy import make_policy, run_episode

POLICIES_TO_CHECK: list[str] = list(POLICY_NAMES)
"""Policies whose completions must never exceed the bound (MARA has its own, slow test)."""

SMALL = "CoRE-Small-v0"

CHECK_TIME_LIMIT = 3.0
"""The MILP's time limit in the policy checks: where it stops early, its bound is the MILP's
dual bound at that moment, valid but at most a task or two looser (on the 16-node presets,
the LP itself is within two tasks of the MILP) than the suites' (10 s)."""


@functools.lru_cache(maxsize=None)
def _checked_bound(preset: str, seed: int, overrides: tuple) -> BoundResult:
    """The bound of the policy checks (computed once per preset, seed and overrides)."""
    return clairvoyant_bound(preset, seed, time_limit=CHECK_TIME_LIMIT, **dict(overrides))


def _check_policies(policies: list[str], preset: str, seeds: range, **overrides) -> list[float]:
    """Run every policy on every seed; assert completed <= bound; return completed / bound."""
    ratios = []
    for seed in seeds:
        res = _checked_bound(preset, seed, tuple(sorted(overrides.items())))
        for name in policies:
            env, policy = make_policy(name, core_env.parallel_env(preset=preset, **overrides))
            stats = run_episode(env, policy, seed=seed)
            assert stats["arrived"] == res.n_tasks
            assert stats["completed"] <= res.bound, (name, preset, seed, stats, res)
            if res.bound:
                ratios.append(stats["completed"] / res.bound)
    return ratios


@pytest.mark.parametrize("overrides", [{}, {"switch_cost": 0.3, "n_nodes": 3},
                                       {"speed_choices": (0.5, 1.0, 2.0)}],
                         ids=["small", "switch-cost", "heterogeneous"])
def test_no_policy_beats_the_bound_small(overrides):
    ratios = _check_policies(POLICIES_TO_CHECK, SMALL, range(4), **overrides)
    assert max(ratios) > 0.8  # the check is not vacuous: some policy gets close


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0",
                                    "CoRE-HeldOut-v0"])
def test_no_policy_beats_the_bound(preset):
    # one seed per preset keeps the suite fast; docs/bound.md reports 720 more episodes
    _check_policies(POLICIES_TO_CHECK, preset, range(1))


@pytest.mark.slow
def test_mara_does_not_beat_the_bound():
    """The shipped MARA checkpoint (trained for CoRE-v0) on two seeds."""
    from mara_agents.mat.checkpoint import shipped
    if not shipped().is_file():
        pytest.skip("no shipped MARA checkpoint")
    _check_policies(["mara"], "CoRE-v0", range(2))


@pytest.mark.slow
def test_no_policy_beats_the_bound_many_small_seeds():
    _check_policies(POLICIES_TO_CHECK, SMALL, range(4, 28))


def test_coarse_time_blocks_keep_the_bound_above_every_policy():
    """Longer time blocks loosen the bound (tests/core_env/test_bound.py); it stays valid."""
    for seed in range(4):
        res = clairvoyant_bound(SMALL, seed, use_milp=False, block=4)
        assert res.block == 4
        for name in ("oracle_greedy", "lara", "edf"):
            env, policy = make_policy(name, core_env.parallel_env(preset=SMALL))
            assert run_episode(env, policy, seed=seed)["completed"] <= res.bound
