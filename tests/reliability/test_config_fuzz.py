"""Configuration fuzzing (SPEC §3 "Configuration" and "Bad input").

Every random valid configuration builds every entry point and runs an episode; every
invalid one raises ``ValueError`` whose message names the offending field: no other
exception type, and no hang (each attempt runs under a 10-second alarm).
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core_env
from core_env.config import (
    ClusterConfig,
    CoreConfig,
    EpisodeConfig,
    RewardConfig,
    WorkloadConfig,
    override_names,
)
from core_env.curves import MIXES

from .strategies import PROPERTY, actions_for, configs

SECTIONS = {"cluster": ClusterConfig, "workload": WorkloadConfig, "reward": RewardConfig,
            "episode": EpisodeConfig}
FIELD_SECTION = {f.name: name for name, cls in SECTIONS.items()
                 for f in dataclasses.fields(cls)}

# Values no field accepts (the two None-able fields are excluded from None below).
GENERIC_BAD = [None, "x", "", {}, float("nan"), float("inf"), -float("inf"), True, False,
               10**400, -(10**400), 1j, object(), b"1", np.float32("nan"), {1, 2},
               np.array([1, 2]), (float("nan"), 1.0), (10**400, 1.0), ("a", "b")]

# Field-specific out-of-range values (each invalid for CoRE-Small-v0, n_nodes = 4).
SPECIFIC_BAD: dict[str, list[Any]] = {
    "n_nodes": [0, -1, 1025, 1.5, np.float64(2.0)],
    "max_visible_tasks": [0, 513, 2.0],
    "node_speeds": [(1.0,) * 3, (1.0,) * 5, (1.0, 1.0, 1.0, 0.0), (1.0, 1.0, 1.0, -1.0),
                    (1.0, 1.0, 1.0, 4.5), (1.0, 1.0, 1.0, "1"), "1111", (),
                    (1.0, 1.0, 1.0, 10**400)],
    "speed_choices": [(), (0.0,), (5.0,), (-1.0, 1.0), "ab", (1.0, None)],
    "switch_cost": [1.0, 0.96, -0.1, 1.5],
    "switch_cost_spread": [(0.0, 1.0), (2.0, 1.0), (1.0, 21.0), (1.0,), "ab", (1.0, None)],
    "switch_cost_choices": [(), (0.96,), (-0.1, 0.2), "ab", (0.1, None)],
    "mix": ["nope", "Train", ["train"], ("train",), 3],
    "arrivals": ["nope", "Poisson", ["poisson"], None, 1],
    "load": [0.0, -1.0, 20.5],
    "base_arrival_rate": [0.0, 64.5, -2.0],
    "arrival_slots": [0, 100_001, 2.0, -5],
    "required_work": [(1.0,), (5.0, 1.0), (0.1, 1.0), (1.0, 3000.0), (1.0, 2.0, 3.0)],
    "deadline_slack": [(0.0, 1.0), (1.0, 21.0), (2.0, 1.0)],
    "window": [(0, 5), (5, 4), (1, 10_001), (1.0, 2), (1,), (np.float64(1), 3)],
    "parallelism_choices": [(), (0,), (1025,), (1.5,), (1, -2), ("1",)],
    "alpha_range": [(0.0, 1.0), (0.5, 1.1), (0.9, 0.5)],
    "tenant_shares": [(1.0,), (0.5, 0.6), (1.0, 0.0), (0.5, -0.5, 1.0), (0.5, "0.5"),
                      (0.5,) * 2 + (0.0,) * 63],
    # (CoRE-Small-v0 has no tenants: one entry for a tenant that does not exist)
    "tenant_required_work": [((4.0, 20.0),), ((4.0, 20.0), (4.0, 20.0))],
    "tenant_deadline_slack": [((1.0, 2.0),)],
    "tenant_parallelism": [((1, 2),)],
    "shaping_beta": [-1.0, 100.5],
    "max_steps": [0, 1_000_001, 1.5, -3],
}


@contextmanager
def no_hang(seconds: int = 10) -> Iterator[None]:
    """Fail instead of hanging (SIGALRM; the tests run on Linux)."""
    def boom(signum, frame):
        raise TimeoutError(f"took more than {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def assert_rejected(field: str, value: Any) -> None:
    """Both ways of setting the field (flat override, section constructor) must raise a
    ValueError naming it."""
    base = core_env.make_config("CoRE-Small-v0")
    section = FIELD_SECTION[field]
    attempts = {
        "replace": lambda: base.replace(**{field: value}),
        "constructor": lambda: dataclasses.replace(getattr(base, section), **{field: value}),
        "parallel_env": lambda: core_env.parallel_env(preset="CoRE-Small-v0", **{field: value}),
    }
    for how, attempt in attempts.items():
        with no_hang():
            with pytest.raises(ValueError) as err:
                attempt()
        assert field in str(err.value), f"{how}: {field}={value!r}: message {err.value}"


# ------------------------------------------------------------------------------ valid
@PROPERTY
@given(cfg=configs(), seed=st.integers(0, 2**31 - 1))
def test_every_random_valid_configuration_runs_an_episode_through_every_entry_point(cfg, seed):
    with no_hang(60):
        env = core_env.CoreSchedulerEnv(cfg)
        obs, _ = env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        steps = 0
        while env.agents:
            mask = np.stack([obs[a]["action_mask"] for a in env.possible_agents])
            act = actions_for("masked", rng, mask, None)
            obs, _, _, _, infos = env.step(dict(zip(env.possible_agents, act.tolist(), strict=False)))
            steps += 1
        assert steps <= cfg.max_steps
        assert infos["node_0"]["episode"]["length"] == steps
        # the same configuration through the flat overrides and the other entry points
        flat = {f.name: getattr(getattr(cfg, s), f.name)
                for s in SECTIONS for f in dataclasses.fields(getattr(cfg, s))}
        assert CoreConfig().replace(**flat) == cfg
        batched = core_env.BatchedCoreEnv(cfg, num_envs=2, seed=seed)
        o, m = batched.reset()
        batched.step(np.zeros((2, cfg.cluster.n_nodes), dtype=np.int64))
        central = core_env.CentralCoreEnv(cfg)
        central.reset(seed=seed)
        central.step(np.zeros(cfg.cluster.n_nodes, dtype=np.int64))


@PROPERTY
@given(n=st.integers(1, 1024), k=st.integers(1, 512), rate=st.floats(1e-6, 64.0),
       load=st.floats(1e-6, 20.0), slots=st.integers(1, 100_000),
       w=st.tuples(st.integers(1, 10_000), st.integers(1, 10_000)).map(sorted),
       beta=st.floats(0.0, 100.0), cost=st.floats(0.0, 0.95))
def test_the_whole_valid_range_is_accepted(n, k, rate, load, slots, w, beta, cost):
    """Construction only (episodes at the top of the ranges need gigabytes)."""
    cfg = core_env.make_config("CoRE-v0", n_nodes=n, max_visible_tasks=k,
                               base_arrival_rate=rate, load=load, arrival_slots=slots,
                               window=tuple(w), shaping_beta=beta, switch_cost=cost)
    assert cfg.cluster.n_nodes == n and cfg.workload.window == tuple(w)
    assert cfg.workload.max_tasks >= cfg.workload.arrival_rate * slots
    assert cfg.max_steps > slots


# ---------------------------------------------------------------------------- invalid
def _cases() -> list[tuple[str, Any]]:
    cases = []
    for field in sorted(SPECIFIC_BAD):
        cases += [(field, v) for v in SPECIFIC_BAD[field]]
        cases += [(field, v) for v in GENERIC_BAD
                  if not (v is None and field in ("node_speeds", "speed_choices", "max_steps",
                                                  "switch_cost_choices"))]
    return cases


@pytest.mark.parametrize("field", sorted(SPECIFIC_BAD))
def test_every_invalid_value_raises_a_value_error_naming_the_field(field):
    for f, value in _cases():
        if f == field:
            assert_rejected(field, value)


def test_every_configuration_field_is_fuzzed():
    assert set(SPECIFIC_BAD) == override_names() - set(SECTIONS)


@PROPERTY
@given(field=st.sampled_from(sorted(SPECIFIC_BAD)), data=st.data())
def test_random_garbage_in_any_field_raises_value_error(field, data):
    """Random values that no field accepts: text, NaN/inf, huge or negative integers, lists
    of text, tuples holding text (hypothesis-drawn)."""
    garbage = data.draw(st.one_of(
        st.text(max_size=6).filter(lambda x: x not in MIXES),
        st.sampled_from([float("nan"), float("inf"), -float("inf")]),
        st.integers(min_value=10**7), st.integers(max_value=-1),
        st.lists(st.text(max_size=2), min_size=1, max_size=3),
        st.tuples(st.floats(allow_nan=True), st.text(max_size=1))))
    base = core_env.make_config("CoRE-Small-v0")
    with no_hang():
        with pytest.raises(ValueError) as err:
            base.replace(**{field: garbage})
    assert field in str(err.value)


def test_whole_sections_and_unknown_names_are_rejected():
    base = core_env.make_config("CoRE-Small-v0")
    for section in SECTIONS:
        for bad in (None, "x", 3, base):
            with pytest.raises(ValueError, match=section):
                dataclasses.replace(base, **{section: bad})
    with pytest.raises(ValueError, match="n_node"):
        base.replace(n_node=4)
    with pytest.raises(ValueError, match="preset"):
        core_env.make_config("CoRE-v9")
    with pytest.raises(ValueError, match="render_mode"):
        core_env.parallel_env(preset="CoRE-Small-v0", render_mode="human")
    for bad in (0, -1, True, 1.5, 70_000):
        with pytest.raises(ValueError, match="num_envs"):
            core_env.BatchedCoreEnv(base, num_envs=bad)
    envs = core_env.BatchedCoreEnv(base, num_envs=2)
    with pytest.raises(ValueError, match="seed"):
        envs.reset(seed=[1, 2, 3])


# --------------------------------------------------------------- regressions (bugs found)
def test_regression_an_int_too_large_for_a_float_is_a_value_error():
    """Found by this fuzzing: ``math.isfinite(10**400)`` raised OverflowError."""
    for field in ("load", "switch_cost", "shaping_beta", "base_arrival_rate"):
        with pytest.raises(ValueError, match=field):
            core_env.make_config("CoRE-Small-v0", **{field: 10**400})
    with pytest.raises(ValueError, match="node_speeds"):
        ClusterConfig(n_nodes=2, node_speeds=(1.0, 10**400))
    with pytest.raises(ValueError, match="required_work"):
        WorkloadConfig(required_work=(1.0, 10**400))


def test_regression_an_unhashable_mix_is_a_value_error():
    """Found by this fuzzing: ``mix=["train"]`` raised TypeError (unhashable)."""
    for bad in (["train"], {"train": 1}, {"train"}, np.array(["train"])):
        with pytest.raises(ValueError, match="mix"):
            WorkloadConfig(mix=bad)
