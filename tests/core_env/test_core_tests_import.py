"""The tests of ``core_env`` need ``core_env`` alone: no file under ``tests/core_env`` imports
torch, ``mara_agents`` or ``benchmarks`` (the floors above core_env), at module level or in a
function, with ``import``/``from``, ``importlib.import_module``, ``__import__`` or
``pytest.importorskip``. Tests that combine core_env with them live in ``tests/integrations``,
``tests/mara_agents`` or ``tests/benchmarks``. (core_env's own torch and SB3 job kinds are
still built through core_env's API, skipped without their extra.)"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from .test_heavy_imports import imported_roots

CORE_TESTS = Path(__file__).resolve().parent
FORBIDDEN = frozenset({"torch", "mara_agents", "benchmarks"})
TEST_FILES = sorted(CORE_TESTS.rglob("*.py"))


@pytest.mark.parametrize("path", TEST_FILES,
                         ids=[str(p.relative_to(CORE_TESTS)) for p in TEST_FILES])
def test_core_env_tests_import_neither_torch_nor_the_floors_above(path):
    found = imported_roots(path.read_text()) & FORBIDDEN
    assert not found, (f"tests/core_env/{path.relative_to(CORE_TESTS)} imports "
                       f"{sorted(found)}: move the test to tests/integrations, "
                       f"tests/mara_agents or tests/benchmarks, or use a core_env stand-in")


def test_the_scan_finds_every_form_of_import():
    source = textwrap.dedent("""
        import numpy as np
        from mara_agents.policy import make_policy

        def f():
            import torch.nn.functional as F
            torch = pytest.importorskip("torch")
            importlib.import_module("benchmarks.cli")

        class C:
            def g(self):
                text = "import torch"  # a string, not an import
        """)
    assert imported_roots(source) == {"numpy", "mara_agents", "torch", "benchmarks"}
    assert imported_roots("from . import helpers\nfrom .helpers import task") == set()
    assert len(TEST_FILES) > 20  # the scan sees the whole folder
