"""docs/live.md's examples run: the user job through the runtime, and every example that
starts worker processes saved as a script and run as ``python file.py``, as a user runs it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from core_env.live import JobSpec, LocalRuntime, SlotTask, load_pilots, run_serial

DOC = Path(__file__).resolve().parents[2] / "docs" / "live.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def block(marker: str) -> str:
    """The one code block of the docs that contains ``marker``."""
    (found,) = [b for b in BLOCKS if marker in b]
    return found


def _user_package(folder: Path) -> None:
    """``mypkg/jobs.py`` in ``folder``: the docs' own job (``Countdown``)."""
    pkg = folder / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jobs.py").write_text(block("class Countdown"))


def _ran(out) -> str:
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_the_user_job_of_the_docs_runs_on_the_runtime(tmp_path, monkeypatch, run_script):
    _user_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned workers inherit sys.path
    spec = JobSpec("mypkg.jobs:Countdown", {"rate": 2.0})
    with LocalRuntime(2, time_limit=30.0) as rt:
        a = rt.run_slot({"a": SlotTask(spec, None, 2, (0, 1))})["a"]
        b = rt.run_slot({"a": SlotTask(spec, a.state, 2, (1,))})["a"]
    assert a.error is None and b.error is None
    assert [a.loss, b.loss] == run_serial(spec, [(2, 2), (2, 1)]) == [0.25, 0.125]
    # and in the live env, through a pilot file, run by LARA
    if importlib.util.find_spec("torch") is None:
        pytest.skip("mara_agents (make_policy) needs torch")
    text = _ran(run_script(block("make_pilots(["), tmp_path, "schedule_my_jobs.py"))
    assert text.strip().endswith("alpha: [1. 1.]"), text
    rate, _, arrived = text.split()[:3]
    assert 0 <= float(rate) <= 1 and int(arrived) > 0
    pilots = load_pilots(tmp_path / "my_pilots.npz")
    assert {kind for kind, _ in pilots.specs} == {"mypkg.jobs:Countdown"}
    np.testing.assert_array_equal(pilots.alpha, [1.0, 1.0])


def test_the_runtime_example_runs_as_a_script(tmp_path, run_script):
    pytest.importorskip("sklearn")
    lines = _ran(run_script(block("LocalRuntime(2"), tmp_path)).splitlines()
    assert [line.split(")")[0] + ")" for line in lines] == ["(0,)", "(0, 1)", "(1,)"]
    assert all("bytes" in line and "restore" in line for line in lines)


def test_the_live_env_and_replay_examples_run(tmp_path, monkeypatch, run_script):
    pytest.importorskip("sklearn")
    text = _ran(run_script(block("env.record.save("), tmp_path))
    assert "overhead_fraction" in text and "migrations" in text
    assert (tmp_path / "episode.npz").is_file()
    monkeypatch.chdir(tmp_path)  # the replay starts no workers: it runs here
    scope = {"__name__": "docs_replay"}
    exec(compile(block("replay(LiveRecord.load"), str(DOC), "exec"), scope)
    assert scope["sim"].agents


def test_the_session_example_runs_a_never_piloted_job(tmp_path, run_script):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("mara_agents (make_policy) needs torch")
    _user_package(tmp_path)
    text = _ran(run_script(block("LiveSession(env, policy)"), tmp_path))
    jobs = {line.split()[0]: line.split() for line in text.splitlines()
            if line.split()[:1] in (["first"], ["second"])}
    # 0.5 x 4 nodes a slot reaches 2**-(w/4) <= 0.01 in time; 0.1 x 2 nodes cannot
    assert jobs["first"][1] == "completed" and float(jobs["first"][-1]) <= 0.01, text
    assert jobs["second"][1] == "expired", text
    assert "first completed at slot" in text


def test_every_example_that_starts_workers_has_its_main_guard():
    """Spawned workers import the script that started them: without the guard, each would
    start the example again (docs/live.md, docs/benchmarks.md, README.md)."""
    root = DOC.parents[1]
    starts = re.compile(r"LiveSchedulerEnv\(|LiveSessionEnv\(|LocalRuntime\(|RayRuntime\(|"
                        r"make_pilots\(|run_suite\(|LiveSession\(")
    unguarded = []
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            code = "\n".join(line for line in m.group(1).splitlines()
                             if not line.lstrip().startswith("#"))
            if starts.search(code) and 'if __name__ == "__main__":' not in code:
                unguarded.append(f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}")
    assert not unguarded, f"examples that start workers without a __main__ guard: {unguarded}"
