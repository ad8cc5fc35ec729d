"""docs/live.md's examples run: the user job through the runtime, and the runtime example."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from core_env.live import JobSpec, LocalRuntime, SlotTask, run_serial

DOC = Path(__file__).resolve().parents[3] / "docs" / "live.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_user_job_of_the_docs_runs_on_the_runtime(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jobs.py").write_text(BLOCKS[0])
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned workers inherit sys.path
    spec = JobSpec("mypkg.jobs:Countdown", {"rate": 2.0})
    with LocalRuntime(2, time_limit=30.0) as rt:
        a = rt.run_slot({"a": SlotTask(spec, None, 2, (0, 1))})["a"]
        b = rt.run_slot({"a": SlotTask(spec, a.state, 2, (1,))})["a"]
    assert a.error is None and b.error is None
    assert [a.loss, b.loss] == run_serial(spec, [(2, 2), (2, 1)]) == [0.25, 0.125]
    sys.modules.pop("mypkg.jobs", None)
    sys.modules.pop("mypkg", None)


def test_the_runtime_example_runs():
    pytest.importorskip("sklearn")
    exec(compile(BLOCKS[1], str(DOC), "exec"), {"__name__": "docs_live"})
