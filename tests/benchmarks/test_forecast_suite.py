"""benchmarks.forecast: metrics by hand, and a tiny end-to-end run without FM."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import forecast as suite
from core_env.forecast import RemainingWork


def rw(q10, q50, q90):
    q10, q50, q90 = (np.asarray(x, float) for x in (q10, q50, q90))
    return RemainingWork(q50, q10, q50, q90, np.zeros_like(q50))


def test_metrics_by_hand():
    truth = np.array([10.0, 20.0, 40.0, np.inf, 0.0])
    groups = np.array(["a", "a", "a", "a", "a"])
    preds = {"wls": rw([5, 5, 5, 1, 1], [20, 20, 20, 1, 1], [30, 30, 30, 1, 1]),
             "fm": rw([9, 9, 9, 1, 1], [10, 20, 40, 1, 1], [11, 21, 41, 1, 1])}
    m = suite.evaluate(preds, truth, groups)
    wls, fm = m["wls"]["a"], m["fm"]["a"]
    assert wls["n"] == 3  # inf and 0 truths are skipped
    assert wls["median_rel"] == pytest.approx(0.5)  # |20-10|/10=1, 0, |20-40|/40=0.5
    assert wls["mean_rel"] == pytest.approx(0.5)
    assert wls["coverage"] == pytest.approx(2 / 3)  # 40 is outside [5, 30]
    assert wls["median_abs_log"] == pytest.approx(np.log(2))
    assert fm["median_rel"] == 0.0 and fm["coverage"] == 1.0
    assert fm["ratio_vs_wls"] == 0.0 and wls["ratio_vs_wls"] == 1.0


def test_tiny_run_writes_every_output(tmp_path):
    res = suite.run(n_cases=120, seed=1, include_fm=False, progress=False)
    names = {r["forecaster"] for r in res["rows"]}
    assert names == {"wls", "naive", "oracle"}
    groups = {r["group"] for r in res["rows"]}
    assert groups == set(suite.GROUPS)
    for r in res["rows"]:
        if r["forecaster"] == "oracle":
            assert r["median_rel"] == pytest.approx(0.0, abs=1e-9)
    assert set(res["predict_ms_64_tasks"]) == {"wls", "naive"}
    suite.write(res, tmp_path)
    for f in ("forecast.json", "forecast.csv", "forecast.md", "forecast.png"):
        assert (tmp_path / f).stat().st_size > 0
    assert json.loads((tmp_path / "forecast.json").read_text())["seed"] == 1
    again = suite.run(n_cases=120, seed=1, include_fm=False, progress=False)
    assert [r["median_rel"] for r in again["rows"]] == [r["median_rel"] for r in res["rows"]]
