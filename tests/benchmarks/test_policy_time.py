"""The policy-time suite on a tiny preset (fast baselines)."""

from __future__ import annotations

import json

import pytest

from benchmarks import policy_time
from benchmarks.cli import main


def test_policy_time_reports_medians_and_ratios(tmp_path, capsys):
    out = tmp_path / "pt.json"
    assert main(["policy-time", "--policies", "edf", "random", "--preset", "CoRE-Small-v0",
                 "--seeds", "2", "--out", str(out)]) in (0, None)
    res = json.loads(out.read_text())
    rows = {r["policy"]: r for r in res["rows"]}
    assert rows["random"]["ratio_of_medians"] == pytest.approx(1.0)
    assert rows["edf"]["median_s_per_episode"] > 0 and len(res["seconds"]["edf"]) == 2
    assert "| edf |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="at least two"):
        policy_time.run(["edf"], "CoRE-Small-v0", 1)
