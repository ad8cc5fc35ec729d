"""``core_env`` promises no torch: no module of it imports torch, Stable-Baselines3,
sb3-contrib, TensorBoard or ``mara_agents`` (at module level or inside a function), except the
live mode's torch and SB3 job kinds, which ``core_env.live`` imports only when their kind is
asked for and which name their extra when the library is missing."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = frozenset({"torch", "stable_baselines3", "sb3_contrib", "tensorboard", "mara_agents"})
ALLOWED = {"core_env.live.torch_jobs": {"torch"},
           "core_env.live.sb3_jobs": {"torch", "stable_baselines3"}}
"""The only modules of ``core_env`` that may import a heavy library, and what they import."""


IMPORTING_CALLS = ("import_module", "__import__", "importorskip")
"""Calls that import the package their literal first argument names."""


def imported_roots(source: str) -> set[str]:
    """Top-level names of every package ``source`` imports anywhere: ``import``/``from``
    statements at any depth, and the calls of :data:`IMPORTING_CALLS` on a literal name."""
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None))
              in IMPORTING_CALLS):
            roots.add(node.args[0].value.split(".")[0])
    return roots


def heavy_imports() -> dict[str, set[str]]:
    """Module name -> the heavy packages it imports, for every module of ``core_env``."""
    found = {}
    for path in sorted((REPO / "core_env").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        heavy = imported_roots(path.read_text()) & HEAVY
        if heavy:
            found[module.removesuffix(".__init__")] = heavy
    return found


BLOCK = """
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):  # as if {blocked} were not installed
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {blocked}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Missing())
"""


def run(code: str, blocked: set[str]) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter at the repository root in which importing any of
    ``blocked`` fails as if the package were not installed."""
    script = BLOCK.format(blocked=sorted(blocked)) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_only_the_torch_and_sb3_job_kinds_import_heavy_libraries():
    assert heavy_imports() == ALLOWED


def test_the_scan_finds_imports_at_any_depth():
    source = textwrap.dedent("""
        import numpy as np

        def f():
            import torch.nn.functional as F
            from mara_agents.policy import MARAPolicy
            importlib.import_module("tensorboard.summary")

        class C:
            def g(self):
                from sb3_contrib import MaskablePPO
        """)
    assert imported_roots(source) & HEAVY == {"torch", "mara_agents", "tensorboard",
                                              "sb3_contrib"}
    assert imported_roots("from . import jobs\nfrom .jobs import JobSpec") == set()


def test_core_env_live_runs_an_mlp_job_with_torch_and_sb3_blocked():
    pytest.importorskip("sklearn", reason="the live extra is not installed")
    out = run("""
        from core_env.live import JOB_KINDS, JobSpec, make_job
        job = make_job(JobSpec("mlp-digits", {"hidden": 8}, seed=0))
        loss = job.train(1, 2)
        assert 0 < loss < 2.4, loss
        assert "cnn-digits" in JOB_KINDS and "sb3-classic" in JOB_KINDS
        assert not {"core_env.live.torch_jobs", "core_env.live.sb3_jobs"} & set(sys.modules)
        print("ok")
        """, HEAVY)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("module, kind, blocked, extra", [
    ("core_env.live.torch_jobs", "cnn-digits", "torch", "jobs-torch"),
    ("core_env.live.sb3_jobs", "sb3-classic", "stable_baselines3", "jobs-sb3"),
])
def test_a_job_kind_without_its_library_names_its_extra(module, kind, blocked, extra):
    out = run(f"""
        from core_env.live import JobSpec, make_job
        for attempt in (lambda: __import__({module!r}), lambda: make_job(JobSpec({kind!r}))):
            try:
                attempt()
            except ImportError as e:
                print(e)
            else:
                raise SystemExit("no ImportError")
        """, {blocked})
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and len(lines) == 2, out.stderr
    assert all(f"pip install -e '.[{extra}]'" in line for line in lines), lines
