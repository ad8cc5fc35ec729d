"""The MARL suite's reference scores (benchmarks.scores): the IQM is rliable's (a 25%-trimmed
mean over every run and evaluation seed), the normalised score puts the naive random policy
at 0 and LARA at 1, the bound share divides by the bound, and the intervals are
reproducible."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("rliable", reason="the [bench] extra is not installed")

from benchmarks.scores import iqm_interval, score_rows, score_table  # noqa: E402


def episode(policy, seed, rate, completed=None):
    return {"preset": "P", "policy": policy, "seed": seed, "completion_rate": rate,
            "completed": round(10 * rate) if completed is None else completed}


def test_iqm_is_the_trimmed_mean_and_its_interval_is_reproducible():
    x = np.random.default_rng(0).random((3, 40))
    m, lo, hi = iqm_interval(x)
    assert m == pytest.approx(stats.trim_mean(x.ravel(), 0.25))
    assert lo < m < hi and iqm_interval(x) == (m, lo, hi)
    assert all(np.isnan(iqm_interval(np.empty((0, 0)))))


def test_rows_normalise_against_random_and_lara_and_the_bound():
    seeds = range(8)
    results = [episode("random", s, 0.2) for s in seeds]
    results += [episode("lara", s, 0.6) for s in seeds]
    results += [episode(f"m{r}", s, 0.4 + 0.1 * r) for r in range(3) for s in seeds]
    results += [{"preset": "P", "policy": "__bound__", "seed": s, "bound": 8, "n_tasks": 10}
                for s in seeds]
    rows = score_rows(results, {("P", 100, "algo"): ["m0", "m1", "m2"],
                                ("P", 100, "none"): ["absent"]})
    assert len(rows) == 1  # a group without episodes is left out
    row = rows[0]
    assert (row["runs"], row["seeds"]) == (3, 8)
    assert row["completion"][0] == pytest.approx(0.5)  # IQM of 0.4, 0.5, 0.6 x 8 seeds
    assert row["normalised"][0] == pytest.approx((0.5 - 0.2) / (0.6 - 0.2))
    assert row["bound_share"][0] == pytest.approx(5 / 8)
    table = score_table(rows)
    assert "| P | 100 | algo | 3 | 8 | 50.0% (" in table and "0.75 (" in table
    no_refs = score_rows([r for r in results if r["policy"] not in ("lara", "__bound__")],
                         {("P", 100, "algo"): ["m0", "m1", "m2"]})[0]
    assert "normalised" not in no_refs and "bound_share" not in no_refs
    with_refs = score_rows(results, {("P", 100, "algo"): ["m0", "m1", "m2"]},
                           references=("random", "lara", "edf"))  # edf did not run: no row
    assert [(r["algorithm"], r["budget"], r["runs"]) for r in with_refs] == [
        ("random", 0, 1), ("lara", 0, 1), ("algo", 100, 3)]
    assert with_refs[1]["normalised"][0] == pytest.approx(1.0)
    assert "| P | - | lara | 1 | 8 | 60.0% | 1.00 |" in score_table(with_refs)
