"""Which policies a suite runs: MARA joins the suites that ask for it once shipped."""

from __future__ import annotations

import pytest

from benchmarks import suites


@pytest.mark.parametrize("suite", ["default", "schedule"])
def test_mara_joins_the_suite_only_when_its_checkpoint_is_shipped(tmp_path, monkeypatch, suite):
    monkeypatch.setattr(suites.resources, "files", lambda pkg: tmp_path)
    assert "mara" not in suites.suite_policies(suite)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "mara_default.pt").write_bytes(b"x")
    names = suites.suite_policies(suite)
    assert names[names.index("lara") + 1] == "mara"


def test_the_shipped_checkpoint_puts_mara_in_make_demo():
    assert "mara" in suites.suite_policies("default")


def test_ablation_suite_runs_mara_and_its_ablations_paired_against_the_control(tmp_path):
    assert suites.suite_policies("ablation") == suites.ABLATION_POLICIES
    assert suites.SUITES["ablation"]["reference"] in suites.ABLATION_POLICIES
    table = suites.run_suite("ablation", tmp_path, policies=["mara-ft", "mara-wls"],
                             presets=["CoRE-v0"], seeds=1, workers=1, progress=False)
    assert "vs mara-ft, paired" in table
    wls_row = next(line for line in table.splitlines() if "| mara-wls |" in line)
    assert "pts" in wls_row  # paired against the control
    ft_row = next(line for line in table.splitlines() if "| mara-ft |" in line)
    assert "| - |" in ft_row  # the reference itself has no difference
