"""The layout shows the architecture: three floors (``benchmarks`` -> ``mara_agents`` ->
``core_env``), inference that does not import training code, no import cycles, and modules
of a readable size."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core_env", "mara_agents", "benchmarks")
MAX_LINES = 400
"""Largest module of the three packages."""


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def imports(path: Path) -> set[str]:
    """Project modules ``path`` imports anywhere (module level or inside functions)."""
    found = set()
    pkg = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else \
        module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                                + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for n in names:
            while n and n not in MODULES:
                n = n.rpartition(".")[0]
            if n and n != module_name(path):
                found.add(n)
    return found


GRAPH = {m: imports(p) for m, p in MODULES.items()}


def test_no_import_cycles():
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(GRAPH[m]):
            # a package's __init__ re-exporting its submodules is not a cycle of concepts
            if MODULES[n].name == "__init__.py" and m.startswith(n + "."):
                continue
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("lower, upper", [("core_env", "mara_agents"),
                                          ("core_env", "benchmarks"),
                                          ("mara_agents", "benchmarks")])
def test_a_floor_never_imports_the_floors_above(lower, upper):
    bad = [(m, n) for m, deps in GRAPH.items() if m.split(".")[0] == lower
           for n in deps if n.split(".")[0] == upper]
    assert not bad, bad


MARA_FLOORS = {
    "mara_agents.safe_io": 0, "mara_agents.blas": 0,
    "mara_agents.forecast": 1, "mara_agents.baselines": 1, "mara_agents.marl": 1,
    "mara_agents.mat": 2,
    "mara_agents.policy_spec": 3,
    "mara_agents.policy": 4,
    "mara_agents.train": 5, "mara_agents.ablations": 5,
}
"""The floors inside ``mara_agents``, lowest first: generic file and BLAS helpers; the
forecaster, the rule-based schedulers and the MARL adapters; the MAT; the policy names
(the registry and PolicySpec); building policies from them; training and the shipped
variants. The package's ``__init__`` re-exports the registry."""


def _mara_unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_every_module_of_mara_agents_has_a_floor():
    units = {_mara_unit(m) for m in MODULES if m.startswith("mara_agents.")}
    assert units == set(MARA_FLOORS), sorted(units ^ set(MARA_FLOORS))


def test_no_upward_import_inside_mara_agents():
    bad = [(m, n) for m, deps in GRAPH.items() if m.startswith("mara_agents.")
           for n in deps if n.startswith("mara_agents.")
           and _mara_unit(n) != _mara_unit(m)
           and MARA_FLOORS[_mara_unit(n)] >= MARA_FLOORS[_mara_unit(m)]]
    assert not bad, bad


def test_inference_imports_no_training_code():
    inference = ["mara_agents.policy", "mara_agents.mat.mara_policy", "mara_agents.mat.checkpoint",
                 "mara_agents.forecast.forecaster"]
    seen, todo = set(), list(inference)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(GRAPH[m])
    assert not [m for m in seen if m.startswith("mara_agents.train")], sorted(seen)
    for m in seen:
        text = MODULES[m].read_text()
        assert "tensorboard" not in text and "SummaryWriter" not in text, m


def test_the_structure_checks_find_what_they_look_for():
    assert "core_env.forecast.protocol" in GRAPH["core_env.forecast.wrapper"]
    assert "mara_agents.mat.model" in GRAPH["mara_agents.mat.checkpoint"]
    assert "mara_agents.safe_io" in GRAPH["mara_agents.mat.checkpoint"]  # a floor below


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_readable(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines"
