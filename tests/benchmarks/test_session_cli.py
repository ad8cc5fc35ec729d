"""``mara-bench session``: a session of jobs read from a JSON-lines file and a folder, its
report and record, and its argument errors (the session itself:
tests/core_env/live/test_session.py)."""

from __future__ import annotations

import json

import pytest

from core_env.live import LiveRecord
from tests.core_env.live.test_session import COUNTER, sub


def test_mara_bench_session_reads_files_and_folders_and_writes_a_report(tmp_path,
                                                                      monkeypatch, capsys):
    from benchmarks.cli import main

    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps(sub(1.0, 0.1, 10, 2, name="a").to_dict()) + "\n"
                    + json.dumps({"kind": COUNTER, "target": 0.1}) + "\n")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "b.json").write_text(json.dumps(sub(0.001, 0.1, 3, 1, name="b").to_dict()))
    report = tmp_path / "report.json"
    assert main(["session", str(jobs), str(inbox), "--until-idle", "--view", "plain",
                 "--out", str(report), "--record", str(tmp_path / "rec.npz")]) == 0
    out = json.loads(report.read_text())
    assert {r["name"]: r["status"] for r in out["jobs"]} == {"a": "completed", "b": "expired"}
    assert out["policy"] == "lara" and len(out["rejected"]) == 1
    assert "missing key 'deadline'" not in out["rejected"][0]["error"]
    assert "deadline: give deadline" in out["rejected"][0]["error"]
    assert LiveRecord.load(tmp_path / "rec.npz").workload.n_tasks == 2
    assert '"completed": 1' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["session", str(tmp_path / "nothing.jsonl")])
    assert "is not a file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["session", str(jobs), "--preset", "Live-Small-v0:n_nodes=0"])
    assert "n_nodes: expected" in capsys.readouterr().err
