"""Which policies a suite runs: MARA joins the suites that ask for it once shipped."""

from __future__ import annotations

from benchmarks import suites


def test_mara_joins_the_schedule_suite_only_when_its_checkpoint_is_shipped(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(suites.resources, "files", lambda pkg: tmp_path)
    assert "mara" not in suites.suite_policies("schedule")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "mara_default.pt").write_bytes(b"x")
    names = suites.suite_policies("schedule")
    assert names[names.index("lara") + 1] == "mara"
    assert "mara" not in suites.suite_policies("default")
