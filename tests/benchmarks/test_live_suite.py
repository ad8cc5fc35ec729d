"""mara-bench live: live episodes beside the replayed simulator, written and resumable."""

from __future__ import annotations

import json

import pytest

from benchmarks import live
from benchmarks.cli import main

pytest.importorskip("sklearn")


def test_the_live_suite_writes_its_table_and_resumes(tmp_path, monkeypatch, capsys):
    assert main(["live", "--preset", "Live-Small-v0", "--policies", "edf", "--seeds", "1",
                 "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "| edf | 1 |" in table
    for name in ("live.json", "live.csv", "live.md", "live.png"):
        assert (tmp_path / name).is_file()
    (row,) = json.loads((tmp_path / "live.json").read_text())
    assert 0.0 <= row["live"] <= 1.0 and row["gap"] == pytest.approx(row["live"] - row["sim"])
    assert row["arrived"] > 0 and 0.0 <= row["decision_seconds"] < row["episode_seconds"]
    assert list((tmp_path / "records").glob("*.npz"))

    def fail(*a, **k):
        raise AssertionError("a finished episode was run again")

    monkeypatch.setattr(live, "run_pair", fail)
    assert live.run("Live-Small-v0", ["edf"], [0], tmp_path, progress=False) == [row]
