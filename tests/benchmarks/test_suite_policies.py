"""Which policies a suite runs: MARA joins the suites that ask for it once shipped; your own
scheduler (a ``module:Factory`` spec defined here) runs in every suite, paired with the
built-in ones; bad arguments are refused before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import core_env
from benchmarks import suites
from mara_agents.mat import checkpoint
from mara_agents.policy import make_policy, run_episode

ROOT = Path(__file__).resolve().parents[2]
HERE = "tests.benchmarks.test_suite_policies"


class EarliestDeadline:
    """A user's scheduler: every node on the visible task with the earliest deadline that
    still has room (decoded from the observation layout by feature name)."""

    def __init__(self, env):
        self.agents = list(env.possible_agents)
        self.layout = env.layout
        self.ttd = self.layout.task_column("time_to_deadline")

    def reset(self, seed=None):
        pass

    def act(self, observations):
        obs = observations[self.agents[0]]["observation"]
        table = self.layout.task_table(obs)
        present = table[:, self.layout.task_column("present")] > 0.5
        cap = self.layout.capacity(obs)
        order = [int(k) for k in np.argsort(np.where(present, table[:, self.ttd], 9.0))
                 if present[k]]
        actions, used = {}, np.zeros_like(cap)
        for a in self.agents:
            slot = next((k for k in order if used[k] < cap[k]), None)
            actions[a] = 0 if slot is None else slot + 1
            if slot is not None:
                used[slot] += 1
        return actions


def wrapped_lara(env):
    """A factory that wraps the environment itself: returns (env, policy)."""
    return make_policy("lara", env, explore_obs=2)


def hooked(env):
    return EarliestDeadline(env)


hooked.make_env = lambda env: env  # the optional hook (here: no wrapper)


def test_mara_joins_the_suite_only_when_its_checkpoint_is_shipped(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "WEIGHTS_DIR", tmp_path)
    for suite in ("default", "schedule"):
        assert "mara" not in suites.suite_policies(suite)
    (tmp_path / checkpoint.DEFAULT_CHECKPOINT).write_bytes(b"x")
    for suite in ("default", "schedule"):
        names = suites.suite_policies(suite)
        assert names[names.index("lara") + 1] == "mara"


def test_the_shipped_checkpoint_puts_mara_in_make_demo():
    assert "mara" in suites.suite_policies("default")


@pytest.mark.parametrize("factory", ["EarliestDeadline", "wrapped_lara", "hooked"])
def test_make_policy_builds_a_user_policy_from_its_spec(factory):
    env, policy = make_policy(f"{HERE}:{factory}", core_env.parallel_env(preset="CoRE-Small-v0"))
    stats = run_episode(env, policy, seed=0)
    assert stats["capacity_conflicts"] == 0 and stats["illegal_actions"] == 0


def test_a_user_policy_runs_in_a_suite_paired_with_lara(tmp_path):
    table = suites.run_suite("default", tmp_path, policies=["lara", f"{HERE}:EarliestDeadline"],
                             presets=["CoRE-Small-v0"], seeds=3, workers=2, progress=False)
    row = next(line for line in table.splitlines() if f"{HERE}:EarliestDeadline" in line)
    assert "| 3 |" in row and "pts (" in row  # three episodes, paired against LARA
    direct = [run_episode(*make_policy(f"{HERE}:EarliestDeadline",
                                       core_env.parallel_env(preset="CoRE-Small-v0")), seed=s)
              for s in range(3)]
    mean = 100 * sum(d["completion_rate"] for d in direct) / 3
    assert f"| {mean:.1f}% (" in row
    assert (tmp_path / "episodes" / f"CoRE-Small-v0__{HERE}+EarliestDeadline__0.json").exists()


def test_the_command_line_takes_a_user_policy_and_refuses_bad_names(tmp_path, capsys):
    from benchmarks.cli import main

    out = tmp_path / "r"
    ok = subprocess.run([sys.executable, "-m", "benchmarks", "default", "--policies", "lara",
                         f"{HERE}:EarliestDeadline", "--presets", "CoRE-Small-v0", "--seeds",
                         "2", "--workers", "1", "--out", str(out)], cwd=ROOT, check=False,
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert f"{HERE}:EarliestDeadline" in ok.stdout
    for bad, says in ((["--policies", "lara", "sjf"], "expected a built-in name"),
                      (["--policies", f"{HERE}:Nope"], "has no 'Nope'"),
                      (["--presets", "CoRE-v9"], "expected a preset id, one of"),
                      (["--seeds", "0"], "expected an integer >= 1"),
                      (["--policies", "lara", "edf", "--reference", "fifo"],
                       "reference: expected one of the policies"),
                      (["--workers", "-3"], "expected an integer >= 1")):
        # in this process (the command above ran in its own): a usage error, exit status 2,
        # and no traceback (any other exception fails the test with its own)
        with pytest.raises(SystemExit) as exit_:
            main(["default", *bad, "--out", str(tmp_path / "bad")])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and says in err, (bad, err)
        assert not (tmp_path / "bad").exists()  # nothing written


def test_every_subcommand_documents_its_flags_and_defaults():
    from benchmarks.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "suite")
    for name, sp in sub.choices.items():
        assert sp.description, name
        for action in sp._actions:
            if action.dest != "help" and action.option_strings:
                assert action.help, (name, action.dest)


def test_ablation_suite_runs_mara_and_its_ablations_paired_against_the_control(tmp_path):
    assert suites.suite_policies("ablation") == suites.ABLATION_POLICIES
    control, wls = "mara_agents.ablations:mara_ft", "mara_agents.ablations:mara_wls"
    assert suites.SUITES["ablation"].reference == control
    table = suites.run_suite("ablation", tmp_path, policies=[control, wls],
                             presets=["CoRE-v0"], seeds=1, workers=1, progress=False)
    assert f"vs {control}, paired" in table
    wls_row = next(line for line in table.splitlines() if f"| {wls} |" in line)
    assert "pts" in wls_row  # paired against the control
    ft_row = next(line for line in table.splitlines() if f"| {control} |" in line)
    assert "| - |" in ft_row  # the reference itself has no difference


def test_reference_chooses_the_policy_the_others_are_paired_against(tmp_path):
    table = suites.run_suite("default", tmp_path, policies=["lara", "edf", "fifo"],
                             presets=["CoRE-Small-v0"], seeds=3, workers=1, progress=False,
                             reference="edf")
    assert "vs edf, paired" in table
    rows = {line.split("|")[2].strip(): line for line in table.splitlines()[2:]}
    assert "| - |" in rows["edf"] and "pts (" in rows["lara"] and "pts (" in rows["fifo"]
    with pytest.raises(ValueError, match="reference: expected one of the policies"):
        suites.run_suite("default", tmp_path / "x", policies=["lara"], presets=["CoRE-Small-v0"],
                         seeds=1, reference="edf")
    assert not (tmp_path / "x").exists()


class Fingerprinted(EarliestDeadline):
    """A user policy whose trained weights (here: a version string) the store follows."""

    fingerprint = "weights-v1"


def test_stored_episodes_follow_the_policy_fingerprint(tmp_path, monkeypatch):
    from mara_agents.policy import PolicySpec, file_fingerprint, policy_fingerprint

    spec = f"{HERE}:Fingerprinted"
    run = {"policies": ["lara", spec], "presets": ["CoRE-Small-v0"], "seeds": 2, "workers": 1,
           "progress": False}
    suites.run_suite("default", tmp_path, **run)
    stored = tmp_path / "episodes" / f"CoRE-Small-v0__{HERE}+Fingerprinted__0.json"
    assert '+weights-v1"' in stored.read_text()  # after the digest of this file's source
    suites.run_suite("default", tmp_path, **run)  # same weights: reused, no warning
    assert not list((tmp_path / "episodes").glob("*.corrupt"))
    # the class the spec resolves to (pytest may import this file under another name)
    monkeypatch.setattr(PolicySpec.parse(spec).factory(), "fingerprint", "weights-v2")
    with pytest.warns(UserWarning, match="stale: run with another version"):
        suites.run_suite("default", tmp_path, **run)
    assert '+weights-v2"' in stored.read_text()
    assert len(list((tmp_path / "episodes").glob("*.corrupt"))) == 2  # both seeds redone
    lara = tmp_path / "episodes" / "CoRE-Small-v0__lara__0.json"
    assert "policy_hash" not in lara.read_text()  # code-only policies carry none
    assert policy_fingerprint("mara") == file_fingerprint(checkpoint.shipped())
    assert policy_fingerprint("experiments.variants:mara_v0") != policy_fingerprint("mara")
