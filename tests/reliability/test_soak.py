"""Smoke test of the soak benchmark (``benchmarks/soak.py``; the real soak is a benchmark,
run with ``python -m benchmarks soak``, not a CI test)."""

from __future__ import annotations

import json

import pytest

from benchmarks import cli, soak


def test_a_tiny_soak_runs_checks_and_writes_its_results(tmp_path):
    assert cli.main(["soak", "--preset", "CoRE-Small-v0", "--env-steps", "400",
                     "--batched-steps", "60", "--num-envs", "4", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "soak.json").read_text())
    assert res["errors"] == 0 and res["env_steps"] == 400
    pz, bt = res["pettingzoo"], res["batched"]
    assert pz["episodes"] >= 1 and bt["episodes"] >= 1 and bt["env_steps"] == 240
    assert len(pz["memory"]) == soak.CHECKPOINTS and pz["memory"][-1]["steps"] == 400
    assert all(m["peak_rss_mib"] >= m["rss_mib"] * 0.5 > 0 for m in pz["memory"])
    assert "memory flat" in (tmp_path / "table.md").read_text()


def test_the_episode_check_catches_broken_accounting():
    good = {"arrived": 5, "completed": 3, "expired": 2, "utilization": 0.5,
            "completion_rate": 0.6, "return": 3.0}
    soak._check_episode(good, "ok")
    for bad in ({"expired": 1}, {"utilization": 1.5}, {"return": 2.5},
                {"completion_rate": -0.1}):
        with pytest.raises(RuntimeError):
            soak._check_episode({**good, **bad}, "bad")


@pytest.mark.parametrize("kwargs", [{"env_steps": 0}, {"batched_steps": -1},
                                    {"num_envs": 1.5}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        soak.run("CoRE-Small-v0", **{"env_steps": 10, "batched_steps": 10, "num_envs": 2,
                                     **kwargs})
