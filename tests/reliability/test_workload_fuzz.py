"""User-supplied workloads (``reset(options={"workload": w})``, SPEC §3 "Bad input"):
random corruptions of a valid workload raise ``ValueError`` naming the field, never another
exception, and never reach the simulator state; valid ones replay exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core_env
from core_env.workload import Workload, generate_workload

from .strategies import PROPERTY

CFG = core_env.make_config("CoRE-Small-v0")
FIELDS = tuple(f for f in Workload._fields
               if f not in ("episode_switch_cost", "tenant"))  # arrays (tenant: below)
KINDS = ("nan", "inf", "text", "object", "complex", "bool", "short", "extra_dim")


def corrupt(wl: Workload, field: str, kind: str, rng: np.random.Generator) -> Workload:
    arr = np.asarray(getattr(wl, field))
    i = int(rng.integers(arr.shape[0]))
    if kind == "nan":
        bad = arr.astype(np.float64)
        bad.flat[i] = np.nan
    elif kind == "inf":
        bad = arr.astype(np.float64)
        bad.flat[i] = -np.inf
    elif kind == "text":
        bad = arr.astype(str)
    elif kind == "object":
        bad = arr.astype(object)
        bad.flat[i] = None
    elif kind == "complex":
        bad = arr.astype(np.complex128)
    elif kind == "bool":
        bad = arr.astype(bool)
    elif kind == "short":
        bad = arr[:-1]
    elif kind == "extra_dim":
        bad = arr[None]
    else:
        raise AssertionError(kind)
    return wl._replace(**{field: bad})


@PROPERTY
@given(field=st.sampled_from(FIELDS), seed=st.integers(0, 2**31 - 1),
       kind=st.sampled_from(("nan", "inf", "text", "object", "complex", "bool", "short",
                             "extra_dim")))
def test_a_corrupted_workload_is_refused_naming_the_field(field, seed, kind):
    rng = np.random.default_rng(seed)
    wl = generate_workload(CFG, rng)
    if wl.n_tasks == 0 and field not in ("speeds",):
        return
    env = core_env.CoreSchedulerEnv(CFG)
    env.reset(seed=1)
    before = {f.name: getattr(env.sim, f.name).copy() for f in dataclasses.fields(env.sim)}
    # a shorter arrival array changes the task count: the next field is then the wrong one
    named = r"workload\.\w+" if (field, kind) == ("arrival", "short") else f"workload.{field}"
    with pytest.raises(ValueError, match=named):
        env.reset(options={"workload": corrupt(wl, field, kind, rng)})
    for name, arr in before.items():
        assert np.array_equal(arr, getattr(env.sim, name)), name


@pytest.mark.parametrize("field, value, match", [
    ("arrival", lambda wl: wl.arrival[::-1].copy(), "non-decreasing"),
    ("deadline", lambda wl: wl.arrival.copy(), r"deadline - arrival in \[1"),
    ("cap", lambda wl: np.zeros_like(wl.cap), "cap"),
    ("alpha", lambda wl: wl.alpha + 1.0, "alpha"),
    ("family", lambda wl: wl.family + 0.5, "integers"),
    ("speeds", lambda wl: wl.speeds * 10.0, "speeds"),
])
def test_out_of_range_values_are_refused(field, value, match):
    wl = generate_workload(CFG, np.random.default_rng(3))
    assert wl.n_tasks >= 2 and not np.all(wl.arrival == wl.arrival[0])
    with pytest.raises(ValueError, match=match):
        core_env.CoreSchedulerEnv(CFG).reset(options={"workload": wl._replace(
            **{field: value(wl)})})


def test_regression_non_numeric_and_complex_arrays_are_value_errors():
    """Found by this fuzzing: text/object arrays raised TypeError from np.isfinite, and
    complex, bool and fractional family arrays were accepted (imaginary parts dropped)."""
    wl = generate_workload(CFG, np.random.default_rng(0))
    for field, bad in (("arrival", wl.arrival.astype(str)),
                       ("arrival", wl.arrival.astype(object)),
                       ("alpha", wl.alpha.astype(complex)), ("cap", wl.cap.astype(bool)),
                       ("family", wl.family + 0.5)):
        with pytest.raises(ValueError, match=f"workload.{field}"):
            core_env.CoreSchedulerEnv(CFG).reset(options={"workload": wl._replace(
                **{field: bad})})


def test_a_valid_workload_replays_the_seeded_episode():
    env = core_env.CoreSchedulerEnv(CFG)
    env.reset(seed=4)
    wl = env.workload
    replay = core_env.CoreSchedulerEnv(CFG)
    replay.reset(options={"workload": wl})
    for _ in range(30):
        if not env.agents:
            break
        act = {a: 1 for a in env.agents}
        assert env.step(act)[1] == replay.step(act)[1]
        assert np.array_equal(env.state(), replay.state())


@pytest.mark.parametrize("value", [1.0, -0.1, np.nan, "0.1", True])
def test_a_bad_episode_switch_cost_is_refused(value):
    wl = generate_workload(CFG, np.random.default_rng(3))
    with pytest.raises(ValueError, match="workload.episode_switch_cost"):
        core_env.CoreSchedulerEnv(CFG).reset(options={"workload": wl._replace(
            episode_switch_cost=value)})


@pytest.mark.parametrize("kind", KINDS)
def test_a_corrupted_tenant_array_is_refused_naming_it(kind):
    cfg = core_env.make_config("CoRE-Tenants-v0", arrival_slots=20)
    wl = generate_workload(cfg, np.random.default_rng(0))
    env = core_env.CoreSchedulerEnv(cfg)
    with pytest.raises(ValueError, match="workload.tenant"):
        env.reset(options={"workload": corrupt(wl, "tenant", kind, np.random.default_rng(1))})
