"""The ablations ship with the package: their checkpoints are what they claim to be, and the
``ablation`` suite's policy specs resolve from an installed package outside the repository."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mara_agents import ablations
from mara_agents.mat.checkpoint import load_checkpoint

pytest.importorskip("torch")


@pytest.mark.parametrize("name,forecaster,beta,autoregressive", [
    ("mara_ft", "fm", 1.0, True), ("mara_wls", "wls", 1.0, True),
    ("mara_noshaping", "fm", 0.0, True), ("mat_dec", "fm", 1.0, False)])
def test_each_ablation_differs_from_the_control_in_one_thing(name, forecaster, beta,
                                                             autoregressive):
    blob = load_checkpoint(ablations.ABLATION_DIR / f"{name}.pt")
    control = load_checkpoint(ablations.ABLATION_DIR / "mara_ft.pt")
    assert blob["train_config"]["forecaster"] == forecaster
    assert blob["train_config"]["shaping_beta"] == beta
    assert blob["mat_config"]["autoregressive"] is autoregressive
    assert blob["layout"] == control["layout"]
    assert blob["env_steps"] == control["env_steps"]  # the same budget


def test_the_ablation_suite_names_the_shipped_ablations_control_first():
    from benchmarks.suites import SUITES

    specs = tuple(f"mara_agents.ablations:{n}" for n in ablations.ABLATIONS)
    assert SUITES["ablation"].policies[2:] == specs
    assert SUITES["ablation"].reference == specs[0]


def test_the_ablation_specs_resolve_outside_the_repository(tmp_path):
    """From a folder that is not the repository's root (where ``experiments`` would not
    import), every policy of the ablation suite resolves and is checked as the CLI checks it."""
    code = ("from benchmarks.suites import SUITES, check_suite_args\n"
            "from mara_agents.policy import resolve_factory\n"
            "check_suite_args('ablation')\n"
            "for spec in SUITES['ablation'].policies[2:]:\n"
            "    assert callable(resolve_factory(spec)), spec\n"
            "    assert all(p.is_file() for p in resolve_factory(spec).paths), spec\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
