"""Portable results: the golden fingerprints (``golden.py``) are the same at every SIMD level,
at every batch size, and equal to the checked-in file (docs/reliability.md, "Portable
results")."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import core_env
from core_env import pmath

from . import golden

ROOT = Path(__file__).resolve().parents[2]


SLOW_TEST = "test_fingerprints_are_the_same_with_simd_dispatch_turned_down"


@pytest.fixture(scope="module")
def turned_down(request, tmp_path_factory):
    """The subprocesses of the SIMD-level test, started at once (before ``here`` computes
    in-process) so that they run side by side on the machine's cores: level -> (process, out).
    Started only when that test is selected; killed if a test stops before waiting for one."""
    selected = {item.callspec.params["disabled"] for item in request.session.items
                if getattr(item, "originalname", "") == SLOW_TEST
                and hasattr(item, "callspec")}
    runs = {}
    for disabled in sorted(level for level in selected if level is not None):
        out = tmp_path_factory.mktemp("fingerprints") / "fingerprints.json"
        proc = subprocess.Popen([sys.executable, "-m", "tests.reliability.golden", "--out",
                                 str(out)], cwd=ROOT, env=turned_down_env(disabled))
        runs[disabled] = (proc, out)
    yield runs
    for proc, _ in runs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def here(turned_down) -> dict:
    return golden.compute()


def test_fingerprints_equal_the_checked_in_file(here):
    want = json.loads(golden.FILE.read_text())["fingerprints"]
    diff = golden.differences(here, want)
    assert not diff, (f"{len(diff)} fingerprints differ from {golden.FILE.name}; if the change "
                      "of numbers is deliberate, run `python -m tests.reliability.golden "
                      "--write` and review the diff\n" + "\n".join(diff[:20]))


def test_fingerprints_cover_every_preset():
    assert {c.preset for c in golden.CASES} == set(core_env.PRESETS)
    overrides = {k for c in golden.CASES for k in c.overrides}
    assert {"speed_choices", "switch_cost"} <= overrides


def test_batched_results_do_not_depend_on_the_batch_size(here):
    assert golden.batch_mismatches(here) == []


def test_batch_check_detects_a_difference(here):
    broken = json.loads(json.dumps(here))
    episodes = broken["batched"]["B=7"]["episodes"]
    episodes["3"]["completed"] += 1
    broken["batched"]["B=1"]["workloads"][0] = "0" * 64
    bad = golden.batch_mismatches(broken)
    assert any("seed 3" in b and "B=7" in b for b in bad)
    assert any("B=1" in b and "generate_workloads" in b for b in bad)


def dispatch_levels() -> list[str]:
    """``NPY_DISABLE_CPU_FEATURES`` values to test: every SIMD target this CPU dispatches to
    except the lowest (the machine one level down, e.g. AVX2 on an AVX-512 CPU), and all of
    them (the baseline build only)."""
    on = golden.machine()["dispatch_on"]
    levels = [" ".join(on[1:])] if len(on) > 1 else []
    return levels + ([" ".join(on)] if on else [])


def turned_down_env(disabled: str) -> dict:
    """The environment of a subprocess with ``NPY_DISABLE_CPU_FEATURES=disabled``."""
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled}
    if len(disabled.split()) == len(golden.machine()["dispatch_on"]):
        env["CORE_ENV_PMATH"] = "numpy"
        if platform.machine() in ("x86_64", "AMD64"):
            env["OPENBLAS_CORETYPE"] = "Prescott"  # SSE3 kernels, should any BLAS call run
    else:
        env["NUMBA_CPU_NAME"] = "generic"
    return env


@pytest.mark.slow
@pytest.mark.parametrize("disabled", dispatch_levels() or [None])
def test_fingerprints_are_the_same_with_simd_dispatch_turned_down(here, turned_down, disabled):
    """In a subprocess with numpy's SIMD dispatch turned down; at the lowest level also with
    the numpy kernels of core_env.pmath instead of the compiled ones and OpenBLAS's oldest
    x86 kernels, one level up with numba compiling for a generic CPU."""
    if disabled is None:
        pytest.skip("numpy dispatches to no SIMD target above its baseline on this CPU")
    proc, out = turned_down[disabled]
    try:
        rc = proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert rc == 0, f"fingerprints with NPY_DISABLE_CPU_FEATURES={disabled!r}: exit status {rc}"
    there = json.loads(out.read_text())
    assert not set(disabled.split()) & set(there["machine"]["dispatch_on"]), there["machine"]
    assert there["machine"]["pmath"] == ("numpy" if turned_down_env(disabled).get("CORE_ENV_PMATH")
                                         else pmath.BACKEND)
    diff = golden.differences(there["fingerprints"], here)
    assert not diff, (f"with NPY_DISABLE_CPU_FEATURES={disabled!r}:\n" + "\n".join(diff[:20]))
