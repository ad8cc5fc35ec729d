"""The recipe (mara-train --members K): members in parallel, distillation, resuming."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch

from mara_agents.mat.checkpoint import load_checkpoint
from mara_agents.train.config import PPOConfig
from mara_agents.train.recipe import main

TINY = ["--preset", "CoRE-Small-v0", "--forecaster", "wls", "--num-envs", "4",
        "--rollout-len", "16", "--minibatches", "2", "--epochs", "2", "--env-steps", "128",
        "--imitation-iters", "2", "--imitation-steps", "8", "--imitation-epochs", "1",
        "--critic-warmup", "1", "--model-d-model", "16", "--model-ff", "16", "--no-progress",
        "--distill-num-envs", "3", "--distill-steps", "6", "--distill-iterations", "2",
        "--distill-updates", "3", "--distill-batch-size", "8"]


def weights(path):
    return load_checkpoint(path)["state_dict"]


def same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """A two-member recipe on a local pool of two workers, and member 1's seed run alone."""
    root = tmp_path_factory.mktemp("recipe")
    assert main([*TINY, "--members", "2", "--workers", "2", "--seed", "5",
                 "--out", str(root / "r")]) == 0
    assert main([*TINY, "--members", "1", "--seed", "6", "--out", str(root / "alone")]) == 0
    return root


def test_members_are_the_runs_of_their_seeds_and_the_result_is_their_distillation(recipe):
    r = recipe / "r"
    assert same(weights(r / "member-1" / "last.pt"), weights(recipe / "alone" / "last.pt"))
    assert not same(weights(r / "member-0" / "last.pt"), weights(r / "member-1" / "last.pt"))
    final = load_checkpoint(r / "last.pt")
    record = json.loads(final["distill"])
    assert record["teacher_files"] == [str(r / f"member-{i}" / "last.pt") for i in (0, 1)]
    assert record["student_file"] == str(r / "member-0" / "last.pt")
    assert record["config"]["iterations"] == 2 and len(record["history"]) == 2
    assert same(final["state_dict"], weights(r / "distill" / "last.pt"))
    summary = json.loads((r / "recipe.json").read_text())
    assert [m["seed"] for m in summary["members"]] == [5, 6]
    assert [m["was"] for m in summary["members"]] == ["new", "new"]
    assert summary["workers"] == 2 and summary["seconds"] >= summary["member_seconds"]


def test_rerunning_skips_what_is_done_and_redoes_what_is_missing(recipe):
    r = recipe / "r"
    before = weights(r / "last.pt")
    stamp = (r / "member-0" / "last.pt").stat().st_mtime_ns
    for f in (r / "distill").iterdir():
        f.unlink()
    (r / "last.pt").unlink()
    assert main([*TINY, "--members", "2", "--workers", "1", "--seed", "5",
                 "--out", str(r)]) == 0
    summary = json.loads((r / "recipe.json").read_text())
    assert [m["was"] for m in summary["members"]] == ["done", "done"]
    assert (r / "member-0" / "last.pt").stat().st_mtime_ns == stamp
    assert same(weights(r / "last.pt"), before)  # the distillation is deterministic


def test_a_member_trained_with_another_config_is_refused(recipe):
    with pytest.raises(ValueError, match=r"another config \(fields \['lr'\]\)"):
        main([*TINY, "--members", "2", "--seed", "5", "--lr", "0.001",
              "--out", str(recipe / "r")])


def test_members_as_ray_tasks_train_the_same_checkpoints(recipe, tmp_path):
    pytest.importorskip("ray")
    assert main([*TINY, "--members", "2", "--backend", "ray", "--seed", "5",
                 "--distill-iterations", "1", "--out", str(tmp_path)]) == 0
    for i in (0, 1):
        assert same(weights(tmp_path / f"member-{i}" / "last.pt"),
                    weights(recipe / "r" / f"member-{i}" / "last.pt"))
    assert (tmp_path / "last.pt").is_file()


@pytest.mark.parametrize("field,value,message", [
    ("members", 0, "members"), ("workers", -1, "workers"), ("backend", "k8s", "backend"),
    ("resume", "runs/mara/last.pt", r"resume: the recipe \(members=4\)")])
def test_bad_recipe_values_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        PPOConfig(**{field: value})
    if field == "resume":  # one run resumes
        assert PPOConfig(resume=value, members=1).resume == value


def test_the_shipped_checkpoint_is_what_the_default_command_builds():
    """``mara-train`` with its defaults is the recipe the shipped MARA was made with: the
    members' training config and the distillation's settings are the defaults (a default
    changed without retraining the shipped file fails here)."""
    from mara_agents.mat.checkpoint import shipped
    from mara_agents.train.config import DistillStage

    blob = load_checkpoint(shipped())
    cfg = PPOConfig()
    assert cfg.differences(blob["train_config"]) == []
    assert blob["train_config"]["env_steps"] == cfg.env_steps
    distill = json.loads(blob["distill"])
    assert len(distill["teacher_files"]) == cfg.members
    assert {k: distill["config"][k] for k in asdict(DistillStage())} == asdict(cfg.distill)
    assert distill["config"]["seed"] == cfg.seed
