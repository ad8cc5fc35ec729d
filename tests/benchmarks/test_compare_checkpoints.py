"""``python -m benchmarks checkpoints`` (benchmarks.compare_checkpoints): MARA checkpoints
compared on the same seeds."""

import pytest

from benchmarks import compare_checkpoints as ck
from benchmarks.cli import main
from mara_agents.train.recipe import main as train_main

TINY = ["--preset", "CoRE-Small-v0", "--forecaster", "wls", "--num-envs", "4",
        "--rollout-len", "16", "--minibatches", "2", "--epochs", "2", "--env-steps", "128",
        "--imitation-iters", "1", "--imitation-steps", "8", "--imitation-epochs", "1",
        "--critic-warmup", "1", "--model-d-model", "16", "--model-ff", "16",
        "--no-progress",
        "--members", "1"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ck")
    for seed in (0, 1):
        assert train_main([*TINY, "--seed", str(seed), "--out", str(root / f"s{seed}")]) == 0
    return root / "s0" / "last.pt", root / "s1" / "last.pt"


def test_paired_differences_against_the_first_checkpoint_and_lara(two_runs):
    a, b = two_runs
    res = ck.run([a, b, a], preset="CoRE-Small-v0", seeds=8, seed_offset=7, workers=1)
    per = res["per_seed"]
    assert [r["checkpoint"] for r in res["rows"]] == [str(a), str(b), str(a)]
    assert res["rows"][0]["vs_first"] == (0.0, 0.0, 0.0)
    assert res["rows"][2]["completion"] == res["rows"][0]["completion"]
    diff_b = [x - y for x, y in zip(per[str(b)], per[str(a)], strict=False)]
    assert res["rows"][1]["vs_first"][0] == pytest.approx(sum(diff_b) / 8)
    diff_lara = [x - y for x, y in zip(per[str(a)], per["lara"], strict=False)]
    assert res["rows"][0]["vs_lara"][0] == pytest.approx(sum(diff_lara) / 8)
    assert all(0.0 <= v <= 100.0 for v in per["lara"])
    assert res["seeds"] == [7, 14]
    # the group audit of each row (SPEC §10): the worst group is at most the overall rate
    for row in [*res["rows"], res["lara_audit"]]:
        assert "worst_group" in row and "group_gap" in row
    assert res["rows"][2]["worst_group"] == res["rows"][0]["worst_group"]
    assert res["rows"][0]["worst_group"] <= res["rows"][0]["completion"][0] / 100
    assert res["lara_audit"]["worst_group"] <= res["lara"][0] / 100


def test_the_cli_prints_a_table_and_workers_agree(two_runs, tmp_path, capsys):
    a, b = two_runs
    out = tmp_path / "res.json"
    assert main(["checkpoints", str(a), str(b), "--preset", "CoRE-Small-v0", "--seeds", "2",
                 "--seed-offset", "3", "--workers", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| checkpoint | completion % |" in text and str(b) in text
    assert "| worst group | largest gap |" in text and "| LARA |" in text
    import json
    pooled = json.loads(out.read_text())["per_seed"]
    serial = ck.run([a, b], preset="CoRE-Small-v0", seeds=2, seed_offset=3,
                    workers=1)["per_seed"]
    assert pooled == serial


def test_bad_input_is_refused_with_the_reason(two_runs, tmp_path):
    a, _ = two_runs
    with pytest.raises(ValueError, match="no such MARA checkpoint file"):
        ck.run([a, tmp_path / "missing.pt"], preset="CoRE-Small-v0", seeds=2, workers=1)
    with pytest.raises(ValueError, match="seeds"):
        ck.run([a], preset="CoRE-Small-v0", seeds=0, workers=1)
    with pytest.raises(ValueError, match="at least one checkpoint"):
        ck.run([], preset="CoRE-Small-v0")


def test_a_comma_separated_entry_is_an_ensemble_of_its_files(two_runs, tmp_path):
    a, b = two_runs
    pair = f"{a},{b}"
    res = ck.run([a, pair], preset="CoRE-Small-v0", seeds=2, seed_offset=3, workers=1)
    assert [r["checkpoint"] for r in res["rows"]] == [str(a), pair]
    import core_env
    from mara_agents.policy import make_policy, run_episode

    env, policy = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                              checkpoint=[a, b])
    assert len(policy.models) == 2
    direct = [100.0 * run_episode(env, policy, s)["completion_rate"] for s in (3, 4)]
    assert res["per_seed"][pair] == pytest.approx(direct)
    with pytest.raises(ValueError, match="no such MARA checkpoint file"):
        ck.run([f"{a},{tmp_path / 'missing.pt'}"], preset="CoRE-Small-v0", seeds=2, workers=1)
