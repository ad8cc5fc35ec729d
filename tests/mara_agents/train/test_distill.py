"""mara-distill: the ensemble's targets, the KL loss, a run moving the student towards the
teacher, its checkpoint, and refusals."""

from __future__ import annotations

import json

import pytest
import torch

import core_env
from mara_agents.mat.checkpoint import load_checkpoint
from mara_agents.mat.ensemble import ensemble_act
from mara_agents.mat.inputs import stack_inputs
from mara_agents.policy import make_policy, run_episode
from mara_agents.train.distill import DistillConfig, Distiller, distill_loss, main, teacher_targets
from mara_agents.train.recipe import main as train_main

TINY = ["--preset", "CoRE-Small-v0", "--forecaster", "wls", "--num-envs", "4",
        "--rollout-len", "16", "--minibatches", "2", "--epochs", "2", "--env-steps", "128",
        "--imitation-iters", "2", "--imitation-steps", "8", "--imitation-epochs", "1",
        "--critic-warmup", "1", "--model-d-model", "16", "--model-ff", "16", "--no-progress",
        "--members", "1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three tiny mara-train runs (seeds 0, 1, 2): two teachers and a student."""
    root = tmp_path_factory.mktemp("distill")
    paths = []
    for seed in range(3):
        out = root / f"seed{seed}"
        assert train_main([*TINY, "--seed", str(seed), "--out", str(out)]) == 0
        paths.append(out / "last.pt")
    return paths


def tiny(runs, out, **kw) -> DistillConfig:
    cfg = {"teacher": f"{runs[0]},{runs[1]}", "student": str(runs[2]),
           "preset": "CoRE-Small-v0", "num_envs": 3, "steps": 6, "iterations": 2,
           "updates": 3, "batch_size": 8, "out": str(out), "progress": False, **kw}
    return DistillConfig(**cfg)


def test_the_targets_are_the_ensembles_distributions_along_its_greedy_action(runs, tmp_path):
    d = Distiller(tiny(runs, tmp_path))
    x = d.rollout.inputs()
    actions, logp = teacher_targets(d.teachers, x)
    assert torch.equal(actions, ensemble_act(d.teachers, x, deterministic=True))
    # greedy ensemble decoding takes the argmax of these distributions at every position
    assert torch.equal(logp.argmax(-1), actions)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(actions.shape))
    # actions the sequential mask forbids (the members' forced mask) get probability 0
    forced, _ = d.teachers[0].forced_logits(x, actions)
    assert torch.all(logp.exp()[forced < -1e8] == 0)
    # a temperature below 1 sharpens the same distributions around the same argmax
    _, sharp = teacher_targets(d.teachers, x, actions, temperature=0.25)
    assert torch.allclose(sharp, torch.log_softmax(4 * torch.log_softmax(logp, -1), -1),
                          atol=1e-4)
    assert torch.equal(sharp.argmax(-1), actions)
    assert torch.all(sharp.exp().amax(-1) >= logp.exp().amax(-1) - 1e-6)
    # one member: its own teacher-forced distribution
    _, one = teacher_targets(d.teachers[:1], x)
    a0 = d.teachers[0].act(x, deterministic=True)[0]
    assert torch.allclose(one, torch.log_softmax(d.teachers[0].forced_logits(x, a0)[0], -1))


def test_the_loss_is_zero_for_the_teacher_itself_and_positive_for_another_mat(runs, tmp_path):
    d = Distiller(tiny(runs, tmp_path))
    x = d.rollout.inputs()
    actions, logp = teacher_targets(d.teachers[:1], x)
    with torch.no_grad():
        assert float(distill_loss(d.teachers[0], x, actions, logp)) == pytest.approx(0, abs=1e-5)
        assert float(distill_loss(d.student, x, actions, logp)) > 1e-3


def test_learning_lowers_the_students_kl_on_the_states_it_trained_on(runs, tmp_path):
    d = Distiller(tiny(runs, tmp_path, updates=40, lr=3e-3))
    xs, acts, targets, rec = d.collect()
    assert 0.0 <= rec["agreement"] <= 1.0 and 0.0 <= rec["same_counts"] <= 1.0
    x, a, t = stack_inputs(xs), torch.cat(acts), torch.cat(targets)
    with torch.no_grad():
        before = float(distill_loss(d.student, x, a, t))
    value_before = [p.clone() for p in d.student.value_head.parameters()]
    d.learn(x, a, t)
    with torch.no_grad():
        after = float(distill_loss(d.student, x, a, t))
    assert after < 0.7 * before
    # the value head is not part of the loss and stays as the student had it
    assert all(torch.equal(p, q) for p, q in zip(value_before, d.student.value_head.parameters(), strict=False))


def test_a_run_writes_a_loadable_reproducible_checkpoint(runs, tmp_path):
    assert main(["--teacher", f"{runs[0]},{runs[1]}", "--student", str(runs[2]),
                 "--preset", "CoRE-Small-v0", "--num-envs", "3", "--steps", "6",
                 "--iterations", "2", "--updates", "3", "--batch-size", "8",
                 "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    blob = load_checkpoint(tmp_path / "a" / "last.pt")
    record = json.loads(blob["distill"])
    assert [h["iteration"] for h in record["history"]] == [0, 1]
    assert record["history"][1]["samples"] == 2 * 3 * 6
    assert record["student_file"] == str(runs[2])
    student = load_checkpoint(runs[2])
    assert blob["train_config"] == student["train_config"] and "optimizer" not in blob
    assert any(not torch.equal(blob["state_dict"][k], student["state_dict"][k])
               for k in student["state_dict"])
    history = json.loads((tmp_path / "a" / "history.json").read_text())
    assert history["history"] == record["history"]
    # the same config again: the same weights
    Distiller(tiny(runs, tmp_path / "b")).run()
    again = load_checkpoint(tmp_path / "b" / "last.pt")["state_dict"]
    assert all(torch.equal(again[k], blob["state_dict"][k]) for k in again)
    env, pol = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                           checkpoint=tmp_path / "a" / "last.pt")
    stats = run_episode(env, pol, seed=2)
    assert stats["capacity_conflicts"] == 0 and stats["illegal_actions"] == 0


def test_students_and_teachers_on_other_forecast_columns_are_refused(runs, tmp_path):
    with pytest.raises(ValueError, match="different forecast columns"):
        Distiller(tiny(runs, tmp_path, student="mara"))


def test_a_run_needs_a_teacher(runs, tmp_path):
    with pytest.raises(ValueError, match="teacher: expected checkpoint files"):
        Distiller(tiny(runs, tmp_path, teacher=","))


@pytest.mark.parametrize("field, value", [("updates", 0), ("lr", 0.0)])
def test_bad_config_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        DistillConfig(**{field: value})
