"""What a user iterating on their own scheduler meets (issue 74 items 1, 4, 5): stored episodes
follow the policy's source, reuse is announced and ``--fresh`` recomputes; illegal actions
warn and show in the table; errors during a benchmark name the policy, preset and seed."""

from __future__ import annotations

import sys
import textwrap

import pytest

from benchmarks import cli, suites
from benchmarks.report import format_table, summarise
from benchmarks.runner import EpisodeError, EpisodeSpec, run_episode_spec

PRESET = "CoRE-Small-v0"

FIRST_FREE = '''
import numpy as np


class Sched:
    """Every node on the first visible task with room (or, edited: {idle})."""

    def __init__(self, env):
        self.agents, self.layout = list(env.possible_agents), env.layout

    def reset(self, seed=None):
        self.seed = seed

    def act(self, observations):
        obs = observations[self.agents[0]]["observation"]
        present = self.layout.task_table(obs)[:, self.layout.task_column("present")] > 0.5
        room = self.layout.capacity(obs).copy()
        actions = {{}}
        for a in self.agents:
            free = [k for k in range(len(room)) if present[k] and room[k] > 0]
            actions[a] = 0 if {idle} or not free else free[0] + 1
            if actions[a]:
                room[free[0]] -= 1
        {act_end}
'''


def write_module(folder, name, idle=False, act_end="return actions", extra=""):
    """Write the user's scheduler ``<folder>/<name>.py`` and forget any imported copy (as a
    new command would)."""
    text = FIRST_FREE.format(idle=idle, act_end=act_end) + textwrap.dedent(extra)
    (folder / f"{name}.py").write_text(text)
    sys.modules.pop(name, None)


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    folder = tmp_path / "user"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def rates(table, policy):
    return [line for line in table.splitlines() if f"| {policy} |" in line]


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_an_edited_user_policy_is_recomputed_and_reuse_is_announced(user_dir, tmp_path, capsys):
    write_module(user_dir, "mysched_a")
    run = {"policies": ["edf", "mysched_a:Sched"], "presets": [PRESET], "seeds": 3,
           "workers": 1, "progress": True}
    out = tmp_path / "out"
    first = suites.run_suite("default", out, **run)
    assert "reusing" not in capsys.readouterr().err
    assert "| 0.0% (0.0, 0.0)" not in rates(first, "mysched_a:Sched")[0]
    again = suites.run_suite("default", out, **run)
    err = capsys.readouterr().err
    assert again == first
    assert "reusing 6 stored episodes" in err and "mysched_a:Sched: reusing 3" in err
    assert "key policy src." in err and "--fresh" in err
    write_module(user_dir, "mysched_a", idle=True)  # the user edits their scheduler
    with pytest.warns(UserWarning, match="3 stored results were invalid or stale"):
        edited = suites.run_suite("default", out, **run)
    assert "edf: reusing 3" in capsys.readouterr().err
    assert "| 0.0% (0.0, 0.0)" in rates(edited, "mysched_a:Sched")[0]  # the new numbers
    assert rates(edited, "edf") == rates(first, "edf")
    fresh = suites.run_suite("default", out, **run, fresh=True)
    assert "reusing" not in capsys.readouterr().err and fresh == edited


def test_fresh_is_a_flag_of_every_scheduling_suite():
    for name in suites.SUITES:
        args = cli.build_parser().parse_args([name, "--fresh"])
        assert args.fresh is True
        assert cli.build_parser().parse_args([name]).fresh is False


def test_illegal_actions_warn_once_per_policy_and_preset_and_show_in_the_table(user_dir,
                                                                              tmp_path):
    write_module(user_dir, "mysched_b", extra='''
        class SlotOne(Sched):
            def act(self, observations):
                return {a: 1 for a in observations}  # slot 0, whether there is a task or not
        ''')
    run = {"policies": ["edf", "mysched_b:SlotOne"], "presets": [PRESET], "seeds": 2,
           "workers": 1, "progress": False}
    with pytest.warns(UserWarning) as caught:
        table = suites.run_suite("default", tmp_path / "out", **run)
    said = [str(w.message) for w in caught if "illegal" in str(w.message)]
    assert len(said) == 1 and said[0].startswith(f"policy mysched_b:SlotOne on {PRESET}: ")
    header = table.splitlines()[0]
    assert "| illegal actions | capacity conflicts |" in header
    row, edf = cells(rates(table, "mysched_b:SlotOne")[0]), cells(rates(table, "edf")[0])
    at = cells(header).index("illegal actions")
    assert int(row[at]) > 0 and int(row[at + 1]) > 0  # 4 nodes on one task of cap < 4
    assert edf[at] == "0" and edf[at + 1] == "0"


def test_the_columns_appear_only_when_some_action_was_not_executed():
    rec = {"preset": PRESET, "policy": "edf", "seed": 0, "completion_rate": 0.5,
           "completed": 1, "arrived": 2, "utilization": 0.5, "illegal_actions": 0,
           "capacity_conflicts": 0}
    assert "illegal" not in format_table(summarise([rec]))
    assert "| capacity conflicts |" in format_table(summarise([{**rec, "capacity_conflicts": 3}]))


ERRORS = '''
    class OutOfRange(Sched):
        def act(self, observations):
            return {a: 13 for a in observations}

    class NotADict(Sched):
        def act(self, observations):
            return [0 for _ in observations]

    def two_arguments(env, weights):
        return Sched(env)

    class Raises(Sched):
        def act(self, observations):
            if self.seed == 1:
                raise RuntimeError("boom in act")
            return super().act(observations)
    '''


@pytest.mark.parametrize("factory, says, cause", [
    ("OutOfRange", "action of node_0: expected an int in [0, 8], got 13", ValueError),
    ("NotADict", "actions: expected a dict agent -> int, got list", ValueError),
    ("two_arguments", "the factory must take (env, **kwargs)", ValueError),
    ("Raises", "boom in act", RuntimeError),
])
def test_an_error_in_an_episode_names_the_policy_preset_and_seed(user_dir, factory, says,
                                                                  cause):
    write_module(user_dir, "mysched_c", extra=ERRORS)
    with pytest.raises(EpisodeError) as caught:
        run_episode_spec(EpisodeSpec(PRESET, f"mysched_c:{factory}", 1))
    assert str(caught.value) == f"policy mysched_c:{factory} on {PRESET}, seed 1: " + (
        str(caught.value.__cause__))
    assert says in str(caught.value) and type(caught.value.__cause__) is cause
    assert caught.value.origin.startswith(cause.__name__ + " in ")


def test_a_factory_with_the_wrong_signature_is_refused_before_anything_runs(user_dir,
                                                                             tmp_path):
    write_module(user_dir, "mysched_d", extra=ERRORS)
    with pytest.raises(ValueError, match=rf"policy 'mysched_d:two_arguments' cannot run on "
                                         rf"{PRESET}: .*the factory must take \(env"):
        suites.run_suite("default", tmp_path / "out", policies=["mysched_d:two_arguments"],
                         presets=[PRESET], seeds=1, workers=1, progress=False)
    assert not (tmp_path / "out" / "episodes").exists()


def test_the_error_reads_the_same_through_the_process_pool_and_on_the_command_line(
        user_dir, tmp_path, capsys):
    write_module(user_dir, "mysched_e", extra=ERRORS)
    with pytest.raises(EpisodeError) as caught:
        suites.run_suite("default", tmp_path / "pool", policies=["mysched_e:Raises"],
                         presets=[PRESET], seeds=2, workers=2, progress=False)
    assert str(caught.value) == f"policy mysched_e:Raises on {PRESET}, seed 1: boom in act"
    assert "RuntimeError: boom in act" in str(caught.value.__cause__)  # the worker's traceback
    assert caught.value.origin.startswith("RuntimeError in act, ")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["default", "--policies", "mysched_e:Raises", "--presets", PRESET,
                  "--seeds", "2", "--workers", "1", "--out", str(tmp_path / "cli")])
    err = capsys.readouterr().err
    assert exit_.value.code == 1
    assert f"error: policy mysched_e:Raises on {PRESET}, seed 1: boom in act\n" in err
    assert "(RuntimeError in act, " in err and "mysched_e.py, line" in err
    assert "Traceback" not in err
