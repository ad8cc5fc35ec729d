"""docs/live.md's examples run: the user job through the runtime, and the runtime example."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from core_env.live import JobSpec, LocalRuntime, SlotTask, run_serial

DOC = Path(__file__).resolve().parents[3] / "docs" / "live.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def block(marker: str) -> str:
    """The one code block of the docs that contains ``marker``."""
    (found,) = [b for b in BLOCKS if marker in b]
    return found


def test_the_user_job_of_the_docs_runs_on_the_runtime(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jobs.py").write_text(block("class Countdown"))
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned workers inherit sys.path
    spec = JobSpec("mypkg.jobs:Countdown", {"rate": 2.0})
    with LocalRuntime(2, time_limit=30.0) as rt:
        a = rt.run_slot({"a": SlotTask(spec, None, 2, (0, 1))})["a"]
        b = rt.run_slot({"a": SlotTask(spec, a.state, 2, (1,))})["a"]
    assert a.error is None and b.error is None
    assert [a.loss, b.loss] == run_serial(spec, [(2, 2), (2, 1)]) == [0.25, 0.125]
    monkeypatch.chdir(tmp_path)  # and in the live env, through a pilot file, run by LARA
    scope = {"__name__": "__main__"}
    exec(compile(block("make_pilots(["), str(DOC), "exec"), scope)
    assert scope["pilots"].alpha.tolist() == [1.0, 1.0]
    assert (tmp_path / "my_pilots.npz").is_file()
    assert all(j.kind == "mypkg.jobs:Countdown" for j in scope["live"].live.jobs)
    assert scope["stats"]["arrived"] > 0 and scope["stats"]["failed"] == 0
    sys.modules.pop("mypkg.jobs", None)
    sys.modules.pop("mypkg", None)


def test_the_runtime_example_runs():
    pytest.importorskip("sklearn")
    exec(compile(block("LocalRuntime(2"), str(DOC), "exec"), {"__name__": "docs_live"})


def test_the_live_env_and_replay_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    monkeypatch.chdir(tmp_path)
    exec(compile(block("env.record.save("), str(DOC), "exec"), {"__name__": "docs_env"})
    assert (tmp_path / "episode.npz").is_file()
    scope = {"__name__": "docs_replay"}
    exec(compile(block("replay(LiveRecord.load"), str(DOC), "exec"), scope)
    assert scope["sim"].agents


def test_the_session_example_runs_a_never_piloted_job(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")  # mara_agents (make_policy) needs it
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jobs.py").write_text(block("class Countdown"))
    monkeypatch.syspath_prepend(str(tmp_path))
    scope = {"__name__": "__main__"}
    exec(compile(block("LiveSession(env, policy)"), str(DOC), "exec"), scope)
    jobs = {j["name"]: j for j in scope["report"]["jobs"]}
    # 0.5 x 4 nodes a slot reaches 2**-(w/4) <= 0.01 in time; 0.1 x 2 nodes cannot
    assert jobs["first"]["status"] == "completed" and jobs["first"]["loss"] <= 0.01
    assert jobs["second"]["status"] == "expired" and jobs["second"]["submitted_slot"] == 5
    assert jobs["first"]["alpha_source"] == "default"
    assert "first completed at slot" in capsys.readouterr().out
    sys.modules.pop("mypkg.jobs", None)
    sys.modules.pop("mypkg", None)
