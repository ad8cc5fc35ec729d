"""mara-bench's command line: one subcommand per registered suite, the common flags spelt,
typed and checked alike in every suite, and every bad value reported once (exit status 2)
before anything runs."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import cli, compare_checkpoints, marl, suites

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("demo", "default", "schedule", "baselines", "ablation", "fairness", "forecast", "speed",
          "policy-time", "checkpoints", "live", "session", "marl", "soak")
REQUIRED = {"checkpoints": ["a.pt"], "session": ["jobs.jsonl"]}
"""Positional arguments a suite needs to parse."""
WITH_SEEDS = {"default", "schedule", "baselines", "ablation", "fairness", "policy-time",
              "checkpoints", "live", "marl"}
ONE_PRESET = {"speed", "policy-time", "checkpoints", "live", "session", "soak"}
MANY_PRESETS = {"default", "schedule", "baselines", "ablation", "fairness", "marl"}
WITH_WORKERS = {"default", "schedule", "baselines", "ablation", "fairness", "checkpoints",
                "marl"}


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    return next(a for a in parser._actions if a.dest == "suite").choices


def options(sp: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {o: a for a in sp._actions for o in a.option_strings}


def parse(suite: str, *argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args([suite, *REQUIRED.get(suite, []), *argv])


def test_every_suite_is_a_subcommand_listed_by_help():
    assert tuple(subparsers()) == SUITES
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert all(f"    {name}" in out.stdout for name in SUITES)


def test_the_common_flags_are_the_same_in_every_suite():
    for name, sp in subparsers().items():
        opts = options(sp)
        assert ("--preset" in opts) == (name in ONE_PRESET), name  # singular: one value
        assert ("--seeds" in opts) == (name in WITH_SEEDS), name
        assert ("--seed-offset" in opts) == (name in WITH_SEEDS), name
        assert ("--presets" in opts) == (name in ONE_PRESET | MANY_PRESETS), name
        assert ("--workers" in opts) == (name in WITH_WORKERS), name
        assert ("--out" in opts) == (name != "demo"), name
        if "--presets" in opts:
            assert opts["--presets"].nargs == "+" and opts["--presets"].metavar == "PRESET"
        for flag in ("--policies", "--reference"):
            if flag in opts:
                assert opts[flag].metavar == "POLICY", (name, flag)


@pytest.mark.parametrize("suite", sorted(WITH_SEEDS))
def test_seeds_and_seed_offset_parse_alike(suite):
    args = parse(suite, "--seeds", "1", "--seed-offset", "7")
    assert (args.seeds, args.seed_offset) == (1, 7)


@pytest.mark.parametrize("suite", sorted(ONE_PRESET | MANY_PRESETS))
def test_presets_parse_alike(suite):
    preset = "Live-v0" if suite in ("live", "session") else "CoRE-Small-v0"
    if suite in ONE_PRESET:
        assert parse(suite, "--preset", preset).presets == [preset]
        with pytest.warns(FutureWarning, match="the flag is --preset now"):
            assert parse(suite, "--presets", preset).presets == [preset]  # its old name
        with pytest.raises(SystemExit):
            parse(suite, "--preset", preset, preset)
    else:
        assert parse(suite, "--presets", preset).presets == [preset]
    if suite in MANY_PRESETS:
        two = ["CoRE-Small-v0", "CoRE-v0"]
        assert parse(suite, "--presets", *two).presets == two


@pytest.mark.parametrize("suite", sorted((ONE_PRESET | MANY_PRESETS)
                                         - {"live", "session", "marl"}))
def test_a_preset_with_overrides_parses_where_episodes_are_simulated(suite):
    spec = "CoRE-Small-v0:switch_cost=0.3,speed_choices=(0.5, 1, 2)"
    flag = "--preset" if suite in ONE_PRESET else "--presets"
    assert parse(suite, flag, spec).presets == [spec]
    for bad, _says in (("CoRE-Small-v0:switch_cost=3", "switch_cost: expected a finite"),
                      ("CoRE-Small-v0:nope=1", "unknown configuration override 'nope'"),
                      ("CoRE-Small-v0:switch_cost", "expected ID:name=value")):
        with pytest.raises(SystemExit):
            parse(suite, flag, bad)


def test_marl_takes_plain_ids_only(capsys):
    with pytest.raises(SystemExit):
        parse("marl", "--presets", "CoRE-Small-v0:switch_cost=0.3")
    assert "expected a preset id, one of" in capsys.readouterr().err


def test_live_takes_its_own_presets_with_overrides(capsys):
    assert parse("live", "--preset", "Live-v0:load=3").presets == ["Live-v0:load=3"]
    for bad, says in (("CoRE-Small-v0:switch_cost=0.3", "expected a preset id, one of"),
                      ("Live-v0:load=-1", "load")):
        with pytest.raises(SystemExit):
            parse("live", "--preset", bad)
        assert says in capsys.readouterr().err


@pytest.mark.parametrize("suite", sorted(WITH_WORKERS))
def test_workers_parse_alike(suite):
    assert parse(suite, "--workers", "1").workers == 1


@pytest.mark.parametrize("suite, bad, says", [
    *[(s, ["--seeds", "0"], "argument --seeds: expected an integer >= 1, got 0")
      for s in sorted(WITH_SEEDS)],
    *[(s, ["--seed-offset", "-1"], "argument --seed-offset: expected an integer >= 0, got -1")
      for s in sorted(WITH_SEEDS)],
    *[(s, ["--workers", "x"], "argument --workers: expected an integer >= 1, got 'x'")
      for s in sorted(WITH_WORKERS)],
    *[(s, ["--presets", "CoRE-v9"], "argument --presets: expected a preset id, one of")
      for s in sorted(MANY_PRESETS)],
    *[(s, ["--preset", "CoRE-v9"], "argument --preset/--presets: expected a preset id, one of")
      for s in sorted(ONE_PRESET)],
    *[(s, ["--preset", "CoRE-v0", "CoRE-Heavy-v0"], "this suite runs one preset")
      for s in sorted(ONE_PRESET - {"live", "session"})],
    *[(s, ["--preset", "CoRE-v0"], "expected a preset id, one of Live-Small-v0, Live-v0")
      for s in ("live", "session")],
    ("speed", ["--seconds", "inf"], "argument --seconds: expected a positive finite number"),
    ("speed", ["--backends", "cuda"], "argument --backends: expected one of numba, numpy"),
    ("default", ["--policies", "sjf"], "expected a built-in name"),
    ("marl", ["--algorithms", "qmix"], "invalid choice: 'qmix'"),
])
def test_a_bad_value_is_reported_once_with_exit_status_2(suite, bad, says, capsys, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        cli.main([suite, *REQUIRED.get(suite, []), *bad, "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert err.count(says) == 1 and err.count("error:") == 1, err
    assert not out.exists()


def test_what_argparse_cannot_check_is_checked_once(monkeypatch, capsys, tmp_path):
    calls = []
    real = suites.resolve_policies
    monkeypatch.setattr(suites, "resolve_policies",
                        lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(suites, "check_suite_args", lambda *a, **k: pytest.fail("twice"))
    ran = []
    monkeypatch.setattr(suites, "_run_checked", lambda *a, **k: ran.append(a) or "table")
    assert cli.main(["default", "--policies", "lara", "edf", "--presets", "CoRE-Small-v0",
                     "--seeds", "2", "--seed-offset", "4", "--out", str(tmp_path)]) == 0
    assert len(calls) == 1 and ran[0][3:5] == (("CoRE-Small-v0",), 2)
    assert [p.text for p in ran[0][2]] == ["lara", "edf"]  # parsed once, by argparse
    assert ran[0][5] == 4
    with pytest.raises(SystemExit) as exit_:
        cli.main(["default", "--policies", "lara", "edf", "--reference", "fifo"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(calls) == 2 and len(ran) == 1
    assert err.count("reference: expected one of the policies ['lara', 'edf'], "
                     "got 'fifo'") == 1
    with pytest.raises(SystemExit):
        cli.main(["default", "--policies", "lara", "lara"])
    assert "policies: each at most once" in capsys.readouterr().err and len(ran) == 1


def test_every_checkpoint_file_is_loaded_once_before_the_run(monkeypatch, capsys):
    import mara_agents.mat.checkpoint as ck_format

    loaded = []
    monkeypatch.setattr(ck_format, "load_checkpoint", loaded.append)
    ran = []
    monkeypatch.setattr(compare_checkpoints, "_compare",
                        lambda *a, **k: ran.append((*a, *k.values())) or {})
    monkeypatch.setattr(compare_checkpoints, "format_table", lambda res: "table")
    assert cli.main(["checkpoints", "a.pt", "b.pt,c.pt", "--seeds", "1"]) == 0
    assert loaded == ["a.pt", "b.pt", "c.pt"]
    assert ran == [(["a.pt", "b.pt,c.pt"], "CoRE-v0", 1, 100, 2, True)]

    def missing(name):
        raise ValueError(f"no such MARA checkpoint file: {name}")

    monkeypatch.setattr(ck_format, "load_checkpoint", missing)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["checkpoints", "a.pt"])
    assert exit_.value.code == 2 and len(ran) == 1
    assert capsys.readouterr().err.count("no such MARA checkpoint file: a.pt") == 1


def test_marl_takes_a_seed_offset(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(marl, "_run", lambda *a, **k: ran.append(a) or "table")
    assert cli.main(["marl", "--presets", "CoRE-Small-v0", "--algorithms", "ippo",
                     "--seeds", "1", "--seed-offset", "50", "--out", str(tmp_path)]) == 0
    (_, presets, algorithms, _, seeds, offset, *_), = ran
    assert (presets, algorithms, seeds, offset) == (["CoRE-Small-v0"], ["ippo"], 1, 50)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["marl", "--algorithms", "ippo", "ippo", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and len(ran) == 1
