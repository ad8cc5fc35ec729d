"""The clairvoyant-bound column of the benchmark reports (benchmarks.report summarise /
format_table / write_report and benchmarks.suites' bound records)."""

from __future__ import annotations

import csv
import json

import pytest

import core_env
from benchmarks import report
from benchmarks.runner import EpisodeSpec
from benchmarks.suites import BOUND_POLICY, bound_record, run_spec, run_suite
from core_env.bound import clairvoyant_bound
from mara_agents.policy import make_policy, run_episode
from tests.benchmarks.fake_episodes import synthetic_episode


def _bound(preset: str, seed: int, bound: int, n_tasks: int = 100) -> dict:
    """A hand-made bound record (the fields of bound_record)."""
    return {"preset": preset, "policy": BOUND_POLICY, "seed": seed, "bound": bound,
            "n_tasks": n_tasks, "candidates": n_tasks, "method": "milp" if seed else "lp",
            "lp_value": bound + 0.5, "milp_dual": float(bound), "milp_primal": bound,
            "milp_gap": 0.0, "lp_seconds": 0.1, "milp_seconds": 0.2 * seed,
            "scaling": "concave", "bound_rate": bound / n_tasks}


def _results() -> list[dict]:
    eps = [synthetic_episode(EpisodeSpec("CoRE-v0", pol, s)) for pol in ("lara", "edf")
           for s in range(4)]
    return eps + [_bound("CoRE-v0", s, 80 + s) for s in range(4)]


def test_summary_of_bound_by_hand():
    rows = {r["policy"]: r for r in report.summarise(_results())}
    lara, bound = rows["lara"], rows[BOUND_POLICY]
    # lara completes int(100 * (0.5 + 0.01 s)) = 50 + s of a bound of 80 + s
    assert lara["of_bound"] == pytest.approx(sum((50 + s) / (80 + s) for s in range(4)) / 4)
    assert lara["bound_paired"] == 4 and lara["of_bound_ci_low"] < lara["of_bound"]
    assert bound["is_bound"] and bound["episodes"] == 4
    assert bound["completion_rate"] == pytest.approx(0.815)
    assert bound["diff_vs_ref"] == pytest.approx(0.3)  # (80 + s) - (50 + s) points, paired
    assert bound["methods"] == {"lp": 1, "milp": 3}
    assert bound["solve_seconds_max"] == pytest.approx(0.7)
    assert report.summarise(_results())[0]["policy"] == BOUND_POLICY  # first of its preset


def test_zero_bound_seeds_are_left_out_of_the_ratio():
    res = _results()
    res[-1] = _bound("CoRE-v0", 3, 0)
    rows = {r["policy"]: r for r in report.summarise(res)}
    assert rows["lara"]["bound_paired"] == 3


def test_table_without_bounds_is_unchanged():
    eps = [r for r in _results() if "bound" not in r]
    table = report.format_table(report.summarise(eps))
    assert "of bound" not in table and "clairvoyant" not in table
    assert table.splitlines()[0].count("|") == 7


def test_table_and_files_with_bounds(tmp_path):
    table = report.write_report(_results(), tmp_path, {"suite": "test"})
    assert "of bound (95% CI)" in table and "**bound** (clairvoyant)" in table
    assert "| CoRE-v0 | 4 | concave | 81.5 | lp 1, milp 3 |" in table
    payload = json.loads((tmp_path / "results.json").read_text())
    assert len(payload["episodes"]) == 8 and len(payload["bounds"]) == 4
    with (tmp_path / "results.csv").open() as fh:
        assert {r["policy"] for r in csv.DictReader(fh)} == {"lara", "edf"}
    with (tmp_path / "bounds.csv").open() as fh:
        assert [int(r["bound"]) for r in csv.DictReader(fh)] == [80, 81, 82, 83]


def test_bound_record_and_dispatch():
    rec = run_spec(EpisodeSpec("CoRE-Small-v0", BOUND_POLICY, 0))
    again = bound_record(EpisodeSpec("CoRE-Small-v0", BOUND_POLICY, 0))
    assert (rec["bound"], rec["lp_value"]) == (again["bound"], again["lp_value"])
    assert rec["bound"] == clairvoyant_bound("CoRE-Small-v0", 0).bound
    assert rec["policy"] == BOUND_POLICY and rec["bound"] <= rec["n_tasks"]
    assert rec["bound_rate"] == rec["bound"] / rec["n_tasks"]
    json.dumps(rec)  # stored as JSON by the results store


def test_run_suite_with_bound(tmp_path):
    table = run_suite("schedule", tmp_path, policies=["edf"], presets=["CoRE-Small-v0"],
                      seeds=3, workers=1, progress=False)
    assert "of bound" in table
    assert len(list((tmp_path / "episodes").glob(f"CoRE-Small-v0__{BOUND_POLICY}__*.json"))) == 3
    payload = json.loads((tmp_path / "results.json").read_text())
    edf = {e["seed"]: e["completed"] for e in payload["episodes"]}
    assert all(b["bound"] >= edf[b["seed"]] for b in payload["bounds"])
    plain = run_suite("default", tmp_path / "plain", policies=["edf"],
                      presets=["CoRE-Small-v0"], seeds=1, workers=1, progress=False)
    assert "of bound" not in plain
    with pytest.raises(ValueError, match="policies"):
        run_suite("schedule", tmp_path, policies=[BOUND_POLICY], seeds=1)


def test_a_suite_runs_a_preset_with_overrides(tmp_path):
    """``--presets CoRE-Small-v0:switch_cost=0.5``: the episodes, the bound and the
    manifest are the overridden configuration's, in portable file names."""
    spec = "CoRE-Small-v0:switch_cost=0.5"
    run_suite("schedule", tmp_path, policies=["edf"], presets=[spec], seeds=2, workers=1,
              progress=False)
    files = sorted(p.name for p in (tmp_path / "episodes").glob("*.json"))
    assert files and all(f.startswith("CoRE-Small-v0+switch_cost=0.5__") for f in files)
    assert (tmp_path / "completion_CoRE-Small-v0+switch_cost=0.5.png").is_file()
    payload = json.loads((tmp_path / "results.json").read_text())
    assert {e["preset"] for e in payload["episodes"]} == {spec}
    recorded = payload["presets"][spec]["config"]["cluster"]["switch_cost"]
    assert recorded == 0.5
    direct = run_episode(*make_policy("edf", core_env.parallel_env(preset="CoRE-Small-v0",
                                                                   switch_cost=0.5)), seed=1)
    stored = next(e for e in payload["episodes"] if e["seed"] == 1)
    assert stored["completed"] == direct["completed"] and stored["restores"] > 0
