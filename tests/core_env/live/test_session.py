"""Live sessions: jobs submitted while a policy schedules them (core_env.live.session), their
submissions and sources, and the status views. Policies here are core_env-only stand-ins;
MARA's schedulers on a session: tests/integrations/test_live_session_policies.py, and
``mara-bench session``: tests/benchmarks/test_session_cli.py."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from core_env.live import JobSpec, LiveRecord, make_pilots, replay, run_serial
from core_env.live.session import DEFAULT_ALPHA, LiveSession, LiveSessionEnv
from core_env.live.status import RichView, make_view
from core_env.live.submissions import FolderSource, JsonLinesSource, Submission

JOBS = "tests.core_env.live.jobs_for_tests"
COUNTER = f"{JOBS}:CounterJob"
SMALL = {"preset": "Live-Small-v0", "n_nodes": 8, "max_visible_tasks": 16}
"""A layout both LARA and the shipped MARA (8-64 nodes) run on (schedule_user_jobs)."""


def sub(rate: float = 0.5, target: float = 0.05, deadline: int = 20, max_nodes: int = 4,
        **kw) -> Submission:
    return Submission(JobSpec(COUNTER, {"rate": rate}, kw.pop("seed", 0)), target,
                      deadline, max_nodes=max_nodes, **kw)


def check_outcomes_follow_losses(session: LiveSession) -> dict[str, dict]:
    """Every job's losses are its serial run's on the nodes it got, and it completed iff a
    loss reached its target (at that slot) and expired at its deadline otherwise."""
    rows = {r["name"]: r for r in session.report()["jobs"]}
    for m, s in enumerate(session.base.submissions):
        obs = [o for o in session.base.record.obs if o[0] == m]
        losses = [o[4] for o in obs]
        assert losses == run_serial(s.job, [(1, o[2]) for o in obs])
        row = rows[session.base.task_info[m]["name"]]
        hit = [i for i, loss in enumerate(losses) if loss <= s.target]
        if hit:
            assert hit == [len(losses) - 1] and row["status"] == "completed"
            assert row["finished_slot"] == obs[-1][1] + 1 <= row["deadline"]
        else:
            assert row["status"] == "expired" and row["finished_slot"] == row["deadline"]
            assert all(o[1] < row["deadline"] for o in obs)
    return rows


class Spread:
    """Node i trains the (i mod m)-th of the m tasks its mask allows (idle when none): a
    core_env-only stand-in for a scheduler that spreads the nodes over the visible tasks."""

    def reset(self, seed=None):
        pass

    def act(self, observations):
        actions = {}
        for i, (agent, o) in enumerate(observations.items()):
            legal = np.flatnonzero(o["action_mask"][1:]) + 1
            actions[agent] = int(legal[i % legal.size]) if legal.size else 0
        return actions


def spread(env: LiveSessionEnv) -> tuple[LiveSessionEnv, Spread]:
    """The env and a :class:`Spread` policy (``schedule_user_jobs``' ``make``)."""
    return env, Spread()


def schedule_user_jobs(make: Callable[[LiveSessionEnv], tuple[Any, Any]], **env_kw
                       ) -> tuple[dict[str, dict], set]:
    """Two jobs at the start and one submitted at slot 3 of a running session, scheduled
    by the policy of ``make(env)`` (the env it returns may wrap ``env``) until nothing is
    pending; returns the report's rows by name and the machines the runtime's workers ran on
    (Ray's node ids)."""
    env, policy = make(LiveSessionEnv(**SMALL, **env_kw))
    with LiveSession(env, policy, seed=0) as session:
        session.submit(sub(0.5, 0.05, 20, 4, name="reachable"))
        session.submit(sub(0.01, 0.05, 10, 2, name="unreachable"))

        def later(s: LiveSession) -> None:
            if s.slot == 3:
                s.submit(sub(1.0, 0.1, 8, 2, seed=1, name="late"))

        session.run(until_idle=True, on_slot=later)
        assert session.base.pending() == 0
        rows = check_outcomes_follow_losses(session)
        machines = set(getattr(session.base.runtime, "node_ids", ["here"]))
    assert rows["late"]["submitted_slot"] == 3 and rows["late"]["arrival"] == 4
    assert rows["late"]["deadline"] == 12
    assert rows["reachable"]["status"] == "completed"
    assert rows["unreachable"]["status"] == "expired"
    assert all(r["alpha_source"] == "default" for r in rows.values())
    return rows, machines


def test_a_never_piloted_user_job_submitted_to_a_running_session_is_scheduled():
    rows, _ = schedule_user_jobs(spread)
    assert rows["late"]["status"] == "completed"  # 2 nodes x 8 slots x rate 1 reach 0.1


def test_submissions_are_checked_naming_the_field():
    job = JobSpec(COUNTER)
    for kwargs, match in [({"target": 0.0, "deadline": 5}, "target"),
                          ({"target": 0.1}, "deadline: give deadline"),
                          ({"target": 0.1, "deadline": 5, "deadline_seconds": 2.0},
                           "exactly one"),
                          ({"target": 0.1, "deadline": 0}, "deadline: expected"),
                          ({"target": 0.1, "deadline_seconds": -1.0}, "deadline_seconds"),
                          ({"target": 0.1, "deadline": 5, "max_nodes": 0}, "max_nodes"),
                          ({"target": 0.1, "deadline": 5, "alpha": 1.5}, "alpha"),
                          ({"target": 0.1, "deadline": 5, "name": 3}, "name")]:
        with pytest.raises(ValueError, match=match):
            Submission(job, **kwargs)
    with pytest.raises(ValueError, match="job: expected a JobSpec"):
        Submission("mlp-digits", 0.1, 5)
    for d, match in [({"kind": COUNTER, "target": 0.1, "deadline": 5, "nodes": 2},
                      "unknown key 'nodes'"),
                     ({"target": 0.1, "deadline": 5}, "missing key 'kind'"),
                     ({"kind": COUNTER, "deadline": 5}, "missing key 'target'"),
                     ({"kind": COUNTER, "target": 0.1, "deadline": 5, "seed": -1}, "seed"),
                     ([1], "expected a JSON object")]:
        with pytest.raises(ValueError, match=match):
            Submission.from_dict(d)
    s = sub(max_nodes=2, name="x", alpha=0.7)
    assert Submission.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_sources_read_whole_lines_and_new_files_once(tmp_path):
    with pytest.raises(ValueError, match="is not a file"):
        JsonLinesSource(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="is not a folder"):
        FolderSource(tmp_path / "missing")
    path = tmp_path / "jobs.jsonl"
    path.write_text("")
    src = JsonLinesSource(path)
    good = json.dumps(sub().to_dict())
    with open(path, "a") as f:
        f.write(f"{good}\n# a comment\n\n{{not json\n")
        f.write(good[:10])  # half a line: waits
    got = src.poll()
    assert [w for w, _ in got] == ["jobs.jsonl:1", "jobs.jsonl:4"]
    assert got[0][1] == sub() and isinstance(got[1][1], ValueError)
    assert src.poll() == []
    with open(path, "a") as f:
        f.write(good[10:] + "\n")
    assert src.poll() == [("jobs.jsonl:5", sub())]
    folder = tmp_path / "inbox"
    folder.mkdir()
    src = FolderSource(folder)
    (folder / "a.json").write_text(json.dumps([sub().to_dict(), {"kind": COUNTER}]))
    (folder / "b.json.tmp").write_text(good)  # not yet renamed: not read
    got = src.poll()
    assert [w for w, _ in got] == ["a.json[0]", "a.json[1]"]
    assert got[0][1] == sub() and "missing key 'target'" in str(got[1][1])
    (folder / "b.json.tmp").rename(folder / "b.json")
    assert src.poll() == [("b.json", sub())] and src.poll() == []


def test_bad_submissions_are_refused_and_the_session_goes_on(tmp_path):
    env = LiveSessionEnv(preset="Live-Small-v0", pilots=None, capacity=3)
    with pytest.raises(RuntimeError, match="call reset first"):
        env.submit(sub())
    session = LiveSession(env, _Idle(), seed=0)
    try:
        with pytest.raises(ValueError, match="max_nodes: expected at most the cluster's 4"):
            session.submit(sub(max_nodes=5))
        with pytest.raises(ValueError, match=r"window\[1\] = 40 slots, got 41") as e:
            session.submit(sub(deadline=41))
        assert '--preset "Live-Small-v0:window=(4,41)"' in str(e.value)  # the CLI's form
        with pytest.raises(ValueError, match="deadline_seconds: needs the wall clock"):
            session.submit(Submission(JobSpec(COUNTER), 0.1, deadline_seconds=3.0))
        with pytest.raises(ValueError, match=r"job 'ghost': refused, node 0: job "
                                             r"'no_such_module:Job'.*cannot be built"):
            session.submit(Submission(JobSpec("no_such_module:Job"), 0.1, 5, name="ghost"))
        with pytest.raises(ValueError, match="submission: expected a Submission"):
            session.submit({"kind": COUNTER})
        path = tmp_path / "jobs.jsonl"
        path.write_text(json.dumps({"kind": "no_such_module:Job", "target": 0.1,
                                    "deadline": 5}) + "\n" + "{\n")
        assert session.poll([JsonLinesSource(path)]) == 0
        assert [w for w, _ in session.rejected] == ["jobs.jsonl:1", "jobs.jsonl:2"]
        assert "cannot be built" in session.rejected[0][1]
        assert "not JSON" in session.rejected[1][1]
        for _ in range(3):
            session.submit(sub(deadline=2))
        with pytest.raises(ValueError, match="the session is full"):
            session.submit(sub())
        session.close_submissions()
        with pytest.raises(RuntimeError, match="submissions are closed"):
            session.submit(sub())
        session.run()  # idle policy: every job expires, then the episode ends
        assert session.finished and session.base.pending() == 0
        report = session.report()
        assert (report["submitted"], report["expired"]) == (3, 3)
        assert [r["finished_slot"] for r in report["jobs"]] == [3, 3, 3]
        assert any("refused jobs.jsonl:1" in e["text"] for e in report["events"])
    finally:
        session.close()


class _Idle:
    """A policy that never trains anything."""

    def reset(self, seed=None):
        pass

    def act(self, observations):
        return {a: 0 for a in observations}


class _Greedy:
    """Every node trains the first visible task."""

    def reset(self, seed=None):
        pass

    def act(self, observations):
        return {a: int(np.flatnonzero(o["action_mask"])[min(1, int(o["action_mask"].sum()) - 1)])
                for a, o in observations.items()}


def test_a_failing_job_fails_alone_and_the_record_replays(tmp_path):
    env = LiveSessionEnv(preset="Live-Small-v0", pilots=None)
    with LiveSession(env, _Greedy(), seed=0) as session:
        bad = session.submit(Submission(JobSpec(f"{JOBS}:RaisingJob"), 0.1, 5, name="bad"))
        good = session.submit(sub(1.0, 0.1, 10, 4, name="good"))
        session.run(until_idle=True)
        report = session.report()
        assert report["jobs"][bad]["status"] == "failed"
        assert "diverged" in report["jobs"][bad]["error"]
        assert report["jobs"][bad]["finished_slot"] == 2
        assert report["jobs"][good]["status"] == "completed"
        assert any(e["text"].startswith("bad failed: job raised RuntimeError")
                   for e in report["events"])
        session.close_submissions()
        session.run()
        assert session.finished
        stats = env.record.stats
        assert (stats["arrived"], stats["completed"], stats["failed"]) == (2, 1, 1)
        path = env.save_record(tmp_path / "session.npz")
    record = LiveRecord.load(path)
    assert record.workload.n_tasks == 2 and record.pilot_run.tolist() == [-1, -1]
    _, wl = replay(record, curves="recorded")
    assert wl.log_target[good] == pytest.approx(math.log(0.1), rel=1e-6)


def test_priors_come_from_the_submission_the_pilots_the_kind_or_the_default():
    pilots = make_pilots([(COUNTER, {"rate": 0.5}), (COUNTER, {"rate": 1.0})], seeds=1,
                         units=40, nodes=(2,))
    env = LiveSessionEnv(preset="Live-Small-v0", pilots=pilots)
    assert env.prior_alpha(sub(0.5, alpha=0.3)) == (0.3, "submitted")
    assert env.prior_alpha(sub(0.5)) == (float(pilots.alpha[0]), "pilots")
    assert env.prior_alpha(sub(0.7)) == (float(np.median(pilots.alpha)), "kind pilots")
    other = Submission(JobSpec(f"{JOBS}:ScaledCounterJob"), 0.1, 5)
    assert env.prior_alpha(other) == (0.8, "kind default")
    nothing = Submission(JobSpec(f"{JOBS}:SleepJob"), 0.1, 5)
    assert env.prior_alpha(nothing) == (DEFAULT_ALPHA, "default")
    env.close()


def test_the_wall_clock_takes_deadlines_in_seconds_and_the_views_show_the_jobs():
    pytest.importorskip("rich")
    env = LiveSessionEnv(preset="Live-Small-v0", pilots=None, clock="wall",
                         slot_seconds=0.05)
    from rich.console import Console

    out = io.StringIO()
    view = RichView(Console(file=out, width=120))
    with LiveSession(env, _Greedy(), seed=0, view=view) as session:
        m = session.submit(Submission(JobSpec(COUNTER, {"rate": 0.01}), 1e-12,
                                      deadline_seconds=0.12, max_nodes=4, name="secs"))
        assert session.base.task_info[m]["deadline_slots"] == 3  # 0.12 / 0.05, rounded up
        session.run(max_slots=2)
        assert session.report()["jobs"][m]["observations"] == 1  # slot 1 (it arrived at 1)
    text = out.getvalue()  # the events, and the table as the view left it
    assert "[slot 1] secs arrived" in text
    assert "slot 2 (0.05 s slots) | nodes busy 4/4 | running 1" in text
    table = text.split("running 1")[1].splitlines()
    head = [line for line in table if "name" in line][0].split()
    assert head == ["id", "name", "status", "nodes", "loss", "target", "done", "due", "in",
                    "eta", "alpha"]
    cells = [line for line in table if "secs" in line][0].split()
    assert cells[:4] == ["0", "secs", "running", "4"]  # id, name, status, nodes
    assert cells[5:] == ["1e-12", "0%", "2", "-", "0.50"]  # target .. deadline (4) - slot 2
    plain = io.StringIO()
    view = make_view("plain", file=plain)
    view.event(4, "x completed")
    assert plain.getvalue() == "[slot 4] x completed\n"
    assert make_view("none") is None
    with pytest.raises(ValueError, match="view: expected one of"):
        make_view("fancy")


def test_a_line_appended_while_the_session_runs_is_scheduled(tmp_path):
    path = tmp_path / "jobs.jsonl"
    path.write_text(json.dumps(sub(1.0, 0.2, 10, 2, name="first").to_dict()) + "\n")
    env = LiveSessionEnv(preset="Live-Small-v0", pilots=None)

    def append(s: LiveSession) -> None:
        if s.slot == 2:
            with open(path, "a") as f:
                f.write(json.dumps(sub(1.0, 0.1, 10, 4, name="appended").to_dict()) + "\n")

    with LiveSession(env, _Greedy(), seed=0) as session:
        session.run([JsonLinesSource(path)], until_idle=True, on_slot=append)
        rows = {r["name"]: r for r in session.report()["jobs"]}
    assert rows["appended"]["submitted_slot"] == 2 and rows["appended"]["arrival"] == 3
    assert rows["first"]["status"] == rows["appended"]["status"] == "completed"
    assert rows["appended"]["finished_slot"] == 6  # 4 nodes from slot 3: loss 1/13 at 6


def test_the_rich_view_keeps_long_names_apart_in_80_columns():
    pytest.importorskip("rich")
    from rich.console import Console

    from core_env.live.status import shorten

    assert shorten("abcdefghij", 10) == "abcdefghij"
    assert shorten("abcdefghijk", 7) == "abc\u2026ijk"
    with pytest.raises(ValueError, match="width: expected at least 3"):
        shorten("abc", 2)
    env = LiveSessionEnv(preset="Live-Small-v0", pilots=None)
    out = io.StringIO()
    names = [f"resnet50-imagenet-sweep-learning-rate-0.003-seed-{s}" for s in (1, 2)]
    with LiveSession(env, _Greedy(), seed=0, view=RichView(Console(file=out, width=80))
                     ) as session:
        for name in names:
            session.submit(Submission(JobSpec(COUNTER, {"rate": 0.01}), 1e-12, deadline=9,
                                      max_nodes=2, name=name))
        session.run(max_slots=2)
    table = out.getvalue().split("running 2")[-1].splitlines()
    assert max(map(len, table)) <= 80
    head = [line for line in table if "name" in line][0].split()
    assert head[-2:] == ["eta", "alpha"]  # no column dropped
    shown = [line.split()[1] for line in table if line.split()[:1] in (["0"], ["1"])]
    assert len(shown) == 2 and shown[0] != shown[1]  # the ends survive
    assert all(s.endswith(n[-6:]) and s.startswith(n[:4]) for s, n in zip(shown, names,
                                                                             strict=True))
