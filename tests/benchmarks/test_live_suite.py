"""mara-bench live: live episodes beside the replayed simulator, written and resumable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

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
    # the group audit's counts are stored with the row (SPEC §10)
    assert sum(c["arrived"] for c in row["groups"]["family"].values()) == row["arrived"]
    assert "worst group" in table
    assert list((tmp_path / "records").glob("*.npz"))

    def fail(*a, **k):
        raise AssertionError("a finished episode was run again")

    monkeypatch.setattr(live, "run_pair", fail)
    assert live.run("Live-Small-v0", ["edf"], [0], tmp_path, progress=False) == [row]


def test_a_folder_of_the_other_clock_is_refused(tmp_path):
    episodes = tmp_path / "episodes"
    episodes.mkdir()
    (episodes / "Live-Small-v0_edf_0.json").write_text(json.dumps({"slot_seconds": 2.0}))
    with pytest.raises(ValueError, match="slot_seconds 2.0, this run asks for None"):
        live.run("Live-Small-v0", ["edf"], [0], tmp_path, progress=False)
    with pytest.raises(SystemExit):
        main(["live", "--slot-seconds", "0", "--out", str(tmp_path)])


def test_the_live_suite_runs_on_your_own_pilots(tmp_path, capsys):
    from core_env.live import make_pilots

    counter = "tests.core_env.live.jobs_for_tests:CounterJob"
    path = make_pilots([(counter, {"rate": 0.5}), (counter, {"rate": 1.0})], seeds=2,
                       units=40, nodes=(2,)).save(tmp_path / "mine.npz")
    out = tmp_path / "out"
    assert main(["live", "--preset", "Live-Small-v0", "--policies", "edf", "--seeds", "1",
                 "--pilots", str(path), "--max-running", "2", "--out", str(out)]) == 0
    (row,) = json.loads((out / "live.json").read_text())
    assert row["pilots"] == str(path.resolve()) and row["arrived"] > 0
    record = next((out / "records").glob("*.npz"))
    from core_env.live import LiveRecord

    assert {j.kind for j in LiveRecord.load(record).jobs} == {counter}
    # the same folder with the shipped pilots is refused
    with pytest.raises(ValueError, match="run with the pilots"):
        live.run("Live-Small-v0", ["edf"], [0], out, progress=False)
    capsys.readouterr()
    for bad, says in ((tmp_path / "nope.npz", "file missing"),
                      (tmp_path / "mine", "ending in .npz")):
        with pytest.raises(SystemExit):
            main(["live", "--pilots", str(bad), "--out", str(tmp_path / "x")])
        assert says in capsys.readouterr().err


def test_max_running_is_checked():
    from core_env.live import make_runtime

    with pytest.raises(SystemExit):
        main(["live", "--max-running", "0"])
    with pytest.raises(ValueError, match="max_running: only the local backend"):
        make_runtime("ray", 2, 10.0, None, 2)
    with make_runtime("local", 3, 10.0, None, 2) as rt:
        assert rt.max_running == 2


HALVING_JOB = '''
import json


class Halving:
    def setup(self, seed):
        self.work = 0.0

    def train(self, units, nodes):
        self.work += units * nodes
        return 2.0 ** (-self.work / 4.0)

    def save(self):
        return json.dumps(self.work).encode()

    def load(self, blob):
        self.work = json.loads(blob)
'''


def _session_dir(tmp_path):
    """A folder with a job module of its own (``myjobs:Halving``) and one submission of it."""
    (tmp_path / "myjobs.py").write_text(HALVING_JOB)
    (tmp_path / "jobs.jsonl").write_text(json.dumps(
        {"kind": "myjobs:Halving", "target": 0.01, "deadline": 30, "max_nodes": 4}) + "\n")
    return tmp_path


def test_a_session_imports_job_classes_from_the_current_directory(tmp_path):
    """As installed (the console script: its own folder, not the current one, is first on the
    path), the workers import a job module that lies where the command was started."""
    script = Path(sys.executable).with_name("mara-bench")
    if not script.exists():
        pytest.skip("the mara-bench console script is not installed")
    cwd = _session_dir(tmp_path)
    out = subprocess.run([str(script), "session", "jobs.jsonl", "--until-idle", "--view",
                          "none", "--out", "report.json"], cwd=cwd, capture_output=True,
                         text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr
    report = json.loads((cwd / "report.json").read_text())
    assert report["rejected"] == [], report["rejected"]
    assert report["completed"] == 1


def test_sigterm_stops_a_session_and_writes_its_report(tmp_path):
    """SIGTERM (a container stopping, systemd, kill) is Ctrl-C: the report is written."""
    cwd = _session_dir(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks", "session", "jobs.jsonl",
                             "--view", "plain", "--out", "report.json"], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for line in proc.stdout:  # running: the job has arrived
            seen.append(line)
            if "arrived" in line:
                break
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, "".join(seen) + rest
    report = json.loads((cwd / "report.json").read_text())
    assert report["submitted"] == 1
    assert any("interrupted" in e["text"] for e in report["events"])
