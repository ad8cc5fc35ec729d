"""mara-bench marl: trains what is missing (each model once per budget of the ladder),
evaluates paired with random, EDF and LARA, writes its tables and curves, resumes, and refuses
what does not fit before anything runs."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("sb3_contrib", reason="the [sb3] extra is not installed")
pytest.importorskip("torchrl", reason="the [torchrl] extra is not installed")

from benchmarks import marl
from benchmarks.cli import main
from mara_agents.marl import model_file

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning")]

PRESET = "CoRE-Small-v0"


@pytest.mark.slow
def test_trains_evaluates_reports_and_resumes(tmp_path, monkeypatch, capsys):
    args = ["marl", "--presets", PRESET, "--algorithms", "maskable_ppo", "ippo",
            "--env-steps", "600", "300", "--seeds", "2", "--train-seeds", "2",
            "--out", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    # the largest budget's models where the plain names look, the smaller one's beside them
    folders = {600: tmp_path / "models", 300: tmp_path / "models-300"}
    for algo in ("maskable_ppo", "ippo"):
        assert (tmp_path / f"curve_{algo}.png").stat().st_size > 0
        assert (tmp_path / f"updates_{algo}.png").stat().st_size > 0  # entropy, critic
        for budget, models in folders.items():
            assert f"| {PRESET} | {algo}@{models} | 2 |" in out
            assert f"| {PRESET} | {budget} | {algo} |" in out  # the learning table
            assert model_file(models, PRESET, algo).is_file()
    for ref in ("random", "random_sequential", "edf", "lara"):
        assert f"| {ref} | 2 |" in out
    for algo in ("maskable_ppo", "ippo"):  # the reference scores pool both training seeds
        for budget in ("600", "300"):
            assert f"| {PRESET} | {budget} | {algo} | 2 | 2 |" in out
            assert model_file(folders[int(budget)], PRESET, algo, 1).is_file()
    assert f"| {PRESET} | - | lara | 1 | 2 |" in out  # the references on the same scale
    assert "normalised (random = 0, lara = 1)" in out
    assert "| mara | 2 |" not in out  # the shipped MARA cannot run on 4 nodes
    training = (tmp_path / "training.md").read_text()
    assert "python -m mara_agents.marl train ippo --preset CoRE-Small-v0 --env-steps 300" \
        in training
    # every run made one PPO update: its entropy per node, first and last, is one value
    rows = [r for r in training.splitlines() if r.startswith("| ippo |")]
    assert len(rows) == 4 and all(" → " in r for r in rows)
    first, last = rows[0].split(" | ")[7].split(" → ")
    assert first == last and 0 < float(first) <= 2.2  # <= ln 9, CoRE-Small-v0's K + 1
    payload = json.loads((tmp_path / "results.json").read_text())
    # 2 seeds of 4 references (no MARA) and of 2 x 2 x 2 models, and 2 bounds
    assert payload["env_steps"] == [300, 600] and len(payload["episodes"]) == 24
    assert all(e["illegal_actions"] == 0 for e in payload["episodes"] if "bound" not in e)

    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.pt")}

    real = marl.train_missing

    def nothing_to_train(jobs, *a, **k):
        assert all(path.is_file() for _, _, path in jobs), "a model would be trained again"
        return real(jobs, *a, **k)

    monkeypatch.setattr(marl, "train_missing", nothing_to_train)
    time.sleep(0.01)
    assert main(args) == 0
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.pt")} == stamps
    # the same folder with another budget is refused, naming the model
    with pytest.raises(ValueError, match="trained with .*'env_steps': 600.*'env_steps': 400"):
        marl.run(tmp_path, [PRESET], ["ippo"], env_steps=400, seeds=2, progress=False)


def test_bad_arguments_are_refused_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(marl, "train_missing", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(ValueError, match="rllib_ppo needs RLlib's own environment"):
        marl.run(tmp_path, [PRESET], ["rllib_ppo"], env_steps=10, seeds=2,
                 rllib_python=tmp_path / "missing" / "python")
    with pytest.raises(ValueError, match="algorithms"):
        marl.run(tmp_path, [PRESET], ["qmix"], env_steps=10, seeds=2)
    with pytest.raises(ValueError, match="presets"):
        marl.run(tmp_path, ["CoRE-v9"], ["ippo"], env_steps=10, seeds=2)
    with pytest.raises(ValueError, match="env_steps"):
        marl.run(tmp_path, [PRESET], ["ippo"], env_steps=0, seeds=2)
    with pytest.raises(ValueError, match="env_steps"):
        marl.run(tmp_path, [PRESET], ["ippo"], env_steps=[100, 100], seeds=2)
    assert not (tmp_path / "models").exists()


def test_a_failed_training_run_names_its_log(tmp_path):
    jobs = [("ippo", "CoRE-v9", tmp_path / "m" / "ippo-seed0.pt")]
    with pytest.raises(RuntimeError, match="ippo-seed0.log"):
        marl.train_missing(jobs, 10, 0, 1, tmp_path / "python", progress=False)
    assert "preset" in (tmp_path / "m" / "ippo-seed0.log").read_text()


def test_no_train_evaluates_only_the_models_there(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(marl, "train_missing", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match="no trained models in"):
        marl.run(tmp_path, [PRESET], ["ippo"], env_steps=[300, 600], seeds=1, train=False)
    from tests.mara_agents.marl.test_common import write_actor_model

    # an IPPO model at the smaller budget only: the larger rung is left out, named
    write_actor_model(model_file(tmp_path / "models-300", PRESET, "ippo"), algorithm="ippo",
                      env_steps=300)
    table = marl.run(tmp_path, [PRESET], ["ippo"], env_steps=[300, 600], seeds=1,
                     train=False, train_seeds=1, bound=False)
    assert "no model, left out (--no-train): ippo on CoRE-Small-v0 at 600" in \
        capsys.readouterr().out
    assert f"| {PRESET} | 300 | ippo |" in table and f"| {PRESET} | 600 | ippo |" not in table
