"""The group audit in the suites' tables and the fairness suite's report (SPEC §10)."""

from __future__ import annotations

import json

import pytest

from benchmarks.fairness import dominated_by, format_frontier, summary_rows
from benchmarks.report import audit_row
from benchmarks.suites import run_suite
from core_env.audit import pool

TWO = "CoRE-Small-v0:tenant_shares=(0.5, 0.5),tenant_required_work=((2.0, 8.0), (10.0, 40.0))"


def test_the_fairness_suite_writes_the_audit_of_every_row(tmp_path):
    pytest.importorskip("matplotlib")
    table = run_suite("fairness", tmp_path, policies=["lara", "fair_lara"],
                      presets=[TWO, TWO + ",load=2.0"], seeds=5, workers=1, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    episodes = results["episodes"]
    assert len(episodes) == 20 and all("groups" in e for e in episodes)
    for e in episodes:
        assert sum(c["arrived"] for c in e["groups"]["tenant"].values()) == e["arrived"]
    lara = [e for e in episodes if e["policy"] == "lara" and e["preset"] == TWO]
    row = next(r for r in results["summary"] if r["policy"] == "lara" and r["preset"] == TWO)
    assert {k: row[k] for k in ("worst_group", "worst_group_name")} == \
        {k: audit_row(lara)[k] for k in ("worst_group", "worst_group_name")}
    counts = pool(e["groups"] for e in lara)
    rates = {g: c["completed"] / c["arrived"] for grouping in ("tenant", "family", "work", "cap")
             for g, c in counts[grouping].items() if c["arrived"] >= 20}
    assert row["worst_group"] == min(rates.values())
    assert "worst group" in table and "largest gap" in table
    report = (tmp_path / "fairness.md").read_text()
    assert "by tenant:" in report and "| tenant 0 (n=" in report and "Jain (tenant)" in report
    summary = {(r["preset"], r["policy"]): r for r in summary_rows(episodes)}
    assert 0 < summary[(TWO, "lara")]["jain_tenant"] <= 1
    assert summary[(TWO, "lara")]["worst_tenant_name"].startswith("tenant ")
    assert (tmp_path / "fairness_CoRE-Small-v0_0.png").is_file()
    # the frontier: a table row per policy and preset with tenants, and a plot per preset
    assert "The frontier: overall against worst-tenant completion" in report
    assert "| worst / overall | better on both |" in report
    assert len(list(tmp_path.glob("frontier_*.png"))) == 2


def test_the_frontier_names_the_policies_better_on_both_axes():
    rows = [{"preset": "P", "policy": "a", "completion_rate": 0.8, "worst_tenant": 0.4},
            {"preset": "P", "policy": "b", "completion_rate": 0.7, "worst_tenant": 0.6},
            {"preset": "P", "policy": "c", "completion_rate": 0.6, "worst_tenant": 0.5},
            {"preset": "P", "policy": "d", "completion_rate": 0.9, "worst_tenant": 0.6},
            {"preset": "Q", "policy": "a", "completion_rate": 0.1, "worst_tenant": 0.1},
            {"preset": "P", "policy": "no tenants", "completion_rate": 0.5}]
    dom = dominated_by(rows)
    assert dom[("P", "a")] == ["d"] and dom[("P", "b")] == []  # ties are not better
    assert dom[("P", "c")] == ["b", "d"] and dom[("P", "d")] == [] and dom[("Q", "a")] == []
    assert ("P", "no tenants") not in dom
    table = format_frontier(rows)
    assert "| P | c | 60.0% | 50.0% | 0.83 | b, d |" in table
    assert "| P | d | 90.0% | 60.0% | 0.67 | none (on the frontier) |" in table
    assert format_frontier(rows[-1:]) == ""


def test_a_row_without_group_counts_has_no_audit():
    assert audit_row([{"completion_rate": 0.5}]) == {}
    assert audit_row([]) == {}
