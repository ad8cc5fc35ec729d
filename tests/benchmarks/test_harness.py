"""benchmarks.runner, benchmarks.report and benchmarks.stats with a fake episode function (no
policies)."""

from __future__ import annotations

import json

import pytest

from benchmarks import report, runner
from benchmarks.runner import EpisodeSpec
from benchmarks.stats import mean_ci, t_quantile
from tests.benchmarks.fake_episodes import synthetic_episode as fake_episode


@pytest.mark.parametrize("df, expected", [(10, 2.228139), (30, 2.042272), (1000, 1.962339),
                                          (5, 2.570582)])
def test_t_quantile_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, rel=2e-3)


def test_mean_ci_by_hand():
    mean, lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0])
    half = t_quantile(0.975, 3) * (1.2909944487358056 / 2)  # sd / sqrt(n)
    assert mean == 2.5 and lo == pytest.approx(2.5 - half) and hi == pytest.approx(2.5 + half)
    assert mean_ci([0.3]) == (0.3, 0.3, 0.3)
    with pytest.raises(ValueError):
        mean_ci([])


def specs():
    return [EpisodeSpec(p, pol, s) for p in ("CoRE-v0", "CoRE-Heavy-v0")
            for pol in ("lara", "edf", "oracle_greedy") for s in range(6)]


def test_results_are_written_per_episode_and_a_rerun_resumes(tmp_path):
    calls = []

    def counting(spec):
        calls.append(spec.key)
        return fake_episode(spec)

    first = runner.run_episodes(specs()[:10], tmp_path, counting, workers=1, progress=False)
    assert len(calls) == 10 and len(list((tmp_path / "episodes").glob("*.json"))) == 10
    # a finished episode's file is reused, not recomputed (if it is still valid)
    key = specs()[0].key
    stored = json.loads((tmp_path / "episodes" / f"{key}.json").read_text())
    stored["utilization"] = 0.5
    (tmp_path / "episodes" / f"{key}.json").write_text(json.dumps(stored))
    calls.clear()
    allres = runner.run_episodes(specs(), tmp_path, counting, workers=1, progress=False)
    assert len(calls) == len(specs()) - 10
    assert allres[0]["utilization"] == 0.5
    assert [r["seed"] for r in allres] == [s.seed for s in specs()]
    assert first == [fake_episode(s) for s in specs()[:10]]
    assert not list((tmp_path / "episodes").glob(".*tmp"))


def test_process_pool_gives_the_same_results(tmp_path):
    serial = runner.run_episodes(specs(), tmp_path / "a", fake_episode, workers=1,
                                  progress=False)
    pooled = runner.run_episodes(specs(), tmp_path / "b", fake_episode, workers=2,
                                  progress=False)
    assert serial == pooled


def test_summary_has_ci_and_paired_differences_by_hand():
    res = [fake_episode(s) for s in specs()]
    rows = {(r["preset"], r["policy"]): r for r in report.summarise(res)}
    edf = rows[("CoRE-v0", "edf")]
    assert edf["episodes"] == 6
    assert edf["completion_rate"] == pytest.approx(0.4 + 0.01 * (0 + 1 + 2 + 3 + 4 + 0) / 6)
    assert edf["diff_vs_ref"] == pytest.approx(-0.1)  # same seeds, constant gap
    assert edf["diff_ci_low"] == pytest.approx(-0.1) and edf["diff_ci_high"] == pytest.approx(-0.1)
    assert "diff_vs_ref" not in rows[("CoRE-v0", "lara")]
    assert rows[("CoRE-v0", "oracle_greedy")]["ci_low"] < 0.8 + 0.01 * 10 / 6


def test_report_files(tmp_path):
    res = [fake_episode(s) for s in specs()]
    table = report.write_report(res, tmp_path, {"suite": "test", "seeds": 6})
    for f in ("results.json", "results.csv", "table.md", "completion_vs_load.png"):
        assert (tmp_path / f).stat().st_size > 0
    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["suite"] == "test" and len(payload["episodes"]) == len(res)
    assert set(payload["presets"]) == {"CoRE-v0", "CoRE-Heavy-v0"}
    assert len(payload["presets"]["CoRE-v0"]["config_hash"]) == 16
    assert "-10.0 pts" in table


def test_bad_backend_and_workers(tmp_path):
    with pytest.raises(ValueError, match="backend"):
        runner.run_episodes(specs(), tmp_path, fake_episode, backend="slurm")
    with pytest.raises(ValueError, match="workers"):
        runner.run_episodes(specs(), tmp_path, fake_episode, workers=0)


def test_ray_backend_matches_the_local_backend(tmp_path):
    pytest.importorskip("ray", reason="the optional [ray] extra is not installed")
    local = runner.run_episodes(specs()[:8], tmp_path / "local", fake_episode, workers=1,
                                 progress=False)
    remote = runner.run_episodes(specs()[:8], tmp_path / "ray", fake_episode, backend="ray",
                                  progress=False)
    assert local == remote
