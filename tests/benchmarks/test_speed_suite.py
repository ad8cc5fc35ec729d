"""The speed suite's output: every measurement for every backend, ratios, slope, tables."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import speed
from benchmarks.cli import main
from core_env import pmath


def test_slope_of_a_known_power_law():
    sizes = [16, 64, 256]
    rates = [1e6 / (n * (n // 2)) ** 0.8 for n in sizes]  # cost grows as (N K)**0.8
    assert speed.slope(sizes, rates) == pytest.approx(0.8)


@pytest.mark.skipif(pmath.BACKEND != "numba", reason="numba is not installed")
def test_speed_suite_writes_every_measure(tmp_path, capsys):
    out = tmp_path / "speed.json"
    assert main(["speed", "--preset", "CoRE-Small-v0", "--runs", "2", "--seconds", "0.02",
                 "--batch-sizes", "1", "4", "--sizes", "8", "16", "--no-first-call",
                 "--out", str(out)]) in (0, None)
    res = json.loads(out.read_text())
    keys = {"pettingzoo/preset/B=1", "batched/preset/B=1", "batched/preset/B=4",
            "blocks/preset/B=4", "pettingzoo/8/B=1", "batched/8/B=8", "pettingzoo/16/B=1",
            "batched/16/B=8"}
    assert set(res["median_steps_per_s"]) == keys
    for key in keys:
        runs = res["all_steps_per_s"][key]
        assert set(runs) == {"numpy", "numba"} and all(len(v) == 2 for v in runs.values())
        assert res["median_steps_per_s"][key]["numba"] == np.median(runs["numba"]) > 0
    assert set(res["slope"]) == {"numpy", "numba"} and "first_call" not in res
    table = capsys.readouterr().out
    assert "| PettingZoo env steps/s |" in table and "numba / numpy" in table
    assert "log-log slope" in table and "| 16 | 8 |" in table


def test_speed_suite_refuses_bad_arguments(capsys):
    for bad in (["--seconds", "0"], ["--backends", "cuda"], ["--sizes", "1"]):
        with pytest.raises(SystemExit) as e:
            main(["speed", *bad])
        assert e.value.code == 2
