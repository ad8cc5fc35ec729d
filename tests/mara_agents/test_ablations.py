"""The shipped MARA ablation checkpoints load as what they claim to be."""

from __future__ import annotations

import pytest

import core_env
from core_env.forecast import LossForecastWrapper, WLSForecaster
from mara_agents.mara import MARAPolicy
from mara_agents.policy import MARA_CHECKPOINTS, make_policy, run_episode
from mara_agents.ppo import load_checkpoint

WARM8 = {"critic_warmup": 8, "critic_lr": 1e-4}
"""The critic warm-up of the shipped runs, before critic_lr (8 updates at the PPO rate)."""


@pytest.mark.parametrize("name,forecaster,beta,autoregressive", [
    ("mara-ft", "fm", 1.0, True), ("mara-wls", "wls", 1.0, True),
    ("mara-noshaping", "fm", 0.0, True), ("mat-dec", "fm", 1.0, False)])
def test_ablation_checkpoint_differs_from_mara_in_one_thing(name, forecaster, beta,
                                                            autoregressive):
    from mara_agents.mara import checkpoint_path

    blob = load_checkpoint(checkpoint_path(MARA_CHECKPOINTS[name]))
    base = load_checkpoint(checkpoint_path())
    assert blob["train_config"]["forecaster"] == forecaster
    assert blob["train_config"]["shaping_beta"] == beta
    assert blob["mat_config"]["autoregressive"] is autoregressive
    assert blob["layout"] == base["layout"]
    assert blob["train_config"]["init"].endswith("mara_default.pt")
    assert blob["env_steps"] == load_checkpoint(checkpoint_path(MARA_CHECKPOINTS["mara-ft"])
                                                )["env_steps"]  # the same budget


def test_make_policy_builds_each_ablation_in_its_own_forecast_wrapper():
    env, policy = make_policy("mara-wls", core_env.parallel_env(preset="CoRE-v0"))
    assert isinstance(env, LossForecastWrapper) and isinstance(env.forecaster, WLSForecaster)
    assert isinstance(policy, MARAPolicy)
    env, policy = make_policy("mat-dec", core_env.parallel_env(preset="CoRE-v0"))
    assert policy.model.config.autoregressive is False
    stats = run_episode(env, policy, seed=0)
    assert 0.0 <= stats["completion_rate"] <= 1.0
    with pytest.raises(ValueError, match="mat-dec"):
        make_policy("mat-enc", core_env.parallel_env(preset="CoRE-v0"))


def test_mara_forecasts_with_the_training_ode_steps_unless_told_otherwise():
    from mara_agents.forecast import FlowMatchingForecaster

    trained = FlowMatchingForecaster.pretrained().sampler.steps
    env, _ = make_policy("mara", core_env.parallel_env(preset="CoRE-v0"))
    assert isinstance(env.forecaster, FlowMatchingForecaster)
    assert env.forecaster.sampler.steps == trained
    env, _ = make_policy("mara", core_env.parallel_env(preset="CoRE-v0"), fm_steps=3)
    assert env.forecaster.sampler.steps == 3
    # the steps belong to the forecaster make_policy builds, not to one passed in
    with pytest.raises(ValueError, match="fm_steps"):
        make_policy("mara", core_env.parallel_env(preset="CoRE-v0"), fm_steps=3,
                    forecaster=FlowMatchingForecaster.pretrained())


def test_mara_train_defaults_are_the_shipped_recipe_but_for_the_critic_warmup():
    """``mara-train --critic-warmup 8 --critic-lr 1e-4`` reproduces the shipped checkpoint's
    configuration (all but where it writes and whether it shows a progress bar); the default
    warm-up changed after it was trained (longer, at a higher rate: more reliable over
    training seeds, but no better run than the shipped one)."""
    from dataclasses import asdict

    from mara_agents.mara import checkpoint_path
    from mara_agents.ppo import PPOConfig, train_config

    shipped = load_checkpoint(checkpoint_path())
    defaults = PPOConfig().to_dict()
    trained = train_config(shipped)
    for free in ("out", "progress"):
        defaults.pop(free), trained.pop(free)
    assert {k: trained[k] for k in WARM8} == WARM8 != {k: defaults[k] for k in WARM8}
    assert trained == {**defaults, **WARM8}
    assert shipped["env_steps"] >= PPOConfig().env_steps  # it ran to the end
    assert asdict(PPOConfig().model) == shipped["mat_config"]


def test_the_staged_checkpoint_is_the_previous_default():
    blob = load_checkpoint(checkpoint_path_of("mara-staged"))
    assert blob["train_config"]["shaping_beta"] == 0.0
    assert blob["env_steps"] == 900_096  # its last stage; 2.0M shaped steps came before
    assert "optimizer" not in blob  # weights only


def test_the_d32_checkpoint_is_the_shipped_recipe_on_a_narrower_mat():
    """mara-d32, the default before the shipped MARA: every training setting as now except the
    MAT's sizes, the PPO steps and the critic warm-up."""
    from dataclasses import asdict

    from mara_agents.ppo import PPOConfig, train_config

    blob = load_checkpoint(checkpoint_path_of("mara-d32"))
    assert blob["mat_config"] == {**asdict(PPOConfig().model), "d_model": 32, "heads": 2,
                                  "ff": 64}
    cfg, now = train_config(blob), PPOConfig().to_dict()
    for free in ("out", "progress", "model"):
        cfg.pop(free), now.pop(free)
    assert {**cfg, **WARM8, "env_steps": now["env_steps"]} == {**now, **WARM8}
    assert cfg["env_steps"] == 1_900_000 and blob["env_steps"] >= 1_900_000
    assert "optimizer" not in blob  # weights only


def checkpoint_path_of(name):
    from mara_agents.mara import checkpoint_path
    return checkpoint_path(MARA_CHECKPOINTS[name])


def test_the_fast_variant_runs_on_the_cheaper_fm_sampler_it_was_trained_with():
    from mara_agents.forecast import FlowMatchingForecaster
    from mara_agents.ppo import PPOConfig, train_config

    blob = load_checkpoint(checkpoint_path_of("mara-fast"))
    cfg = train_config(blob)
    assert (cfg["fm_steps"], cfg["fm_samples"]) == (5, 16)
    # otherwise the recipe of mara-d32 (the previous default, width 32)
    d32 = train_config(load_checkpoint(checkpoint_path_of("mara-d32")))
    same = {k: v for k, v in d32.items() if k not in ("fm_steps", "fm_samples", "out",
                                                       "progress")}
    assert {k: cfg[k] for k in same} == same
    assert blob["mat_config"]["d_model"] == 32 != PPOConfig().model.d_model
    env, policy = make_policy("mara-fast", core_env.parallel_env(preset="CoRE-v0"))
    assert isinstance(env.forecaster, FlowMatchingForecaster)
    assert (env.forecaster.sampler.steps, env.forecaster.sampler.samples) == (5, 16)


def test_bad_fm_steps_are_refused_not_ignored():
    with pytest.raises(ValueError, match="steps"):
        make_policy("mara", core_env.parallel_env(preset="CoRE-v0"), fm_steps=0)
    with pytest.raises(ValueError, match="fm_steps.*wls"):
        make_policy("mara-wls", core_env.parallel_env(preset="CoRE-v0"), fm_steps=5)


def test_the_shipped_ensemble_is_five_seeds_of_the_default_command():
    from mara_agents.mara import checkpoint_path
    from mara_agents.ppo import PPOConfig, train_config

    files = MARA_CHECKPOINTS["mara-ens5"]
    defaults = PPOConfig().to_dict()
    for free in ("out", "progress", "seed", "keep_checkpoints"):  # no effect on training
        defaults.pop(free)
    seeds = []
    for f in files:
        blob = load_checkpoint(checkpoint_path(f))
        cfg = train_config(blob)
        seeds.append(cfg.pop("seed"))
        cfg.pop("out"), cfg.pop("progress"), cfg.pop("keep_checkpoints")
        assert cfg == defaults  # today's mara-train, critic warm-up included
        assert blob["env_steps"] >= PPOConfig().env_steps and "optimizer" not in blob
    assert seeds == [0, 1, 2, 3, 4]


def test_the_distilled_checkpoint_is_mara_ens5_distilled_into_the_shipped_one():
    import json
    from dataclasses import asdict
    from pathlib import Path

    import torch

    from mara_agents.distill import DistillConfig
    from mara_agents.mara import checkpoint_path

    blob = load_checkpoint(checkpoint_path(MARA_CHECKPOINTS["mara-distill"]))
    shipped = load_checkpoint(checkpoint_path())
    record = json.loads(blob["distill"])
    cfg = DistillConfig(**record["config"])
    assert (cfg.teacher, cfg.student, cfg.preset) == ("mara-ens5", "mara", "CoRE-v0")
    # plain `mara-distill`: today's defaults but for where it wrote and the progress bar
    free = {"out": "", "progress": True}
    assert {**record["config"], **free} == {**asdict(DistillConfig()), **free}
    assert [Path(f).name for f in record["teacher_files"]] == [f"seed{k}.pt" for k in range(5)]
    assert len(record["history"]) == cfg.iterations and "optimizer" not in blob
    # the shipped MAT's sizes, forecast columns and value head, with new policy weights
    assert blob["mat_config"] == shipped["mat_config"]
    assert blob["train_config"] == shipped["train_config"]
    sd, ref = blob["state_dict"], shipped["state_dict"]
    assert all(torch.equal(sd[k], ref[k]) for k in ref if k.startswith("value_head."))
    assert any(not torch.equal(sd[k], ref[k]) for k in ref if not k.startswith("value_head."))
    env, policy = make_policy("mara-distill", core_env.parallel_env(preset="CoRE-v0"))
    first = run_episode(env, policy, seed=3)
    assert first == run_episode(env, policy, seed=3)
    assert first["capacity_conflicts"] == 0 and first["illegal_actions"] == 0


def test_the_ensemble_policy_decodes_with_every_member_deterministically():
    from mara_agents.mat_numpy import NumpyEnsemble

    env, policy = make_policy("mara-ens5", core_env.parallel_env(preset="CoRE-v0"))
    assert isinstance(policy.greedy, NumpyEnsemble) and len(policy.models) == 5
    first = run_episode(env, policy, seed=3)
    assert first == run_episode(env, policy, seed=3)
    # the sampling path (torch) runs too and never breaks a mask
    env, sampler = make_policy("mara-ens5", core_env.parallel_env(preset="CoRE-v0"),
                               deterministic=False)
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        actions = sampler.act(obs)
        for agent, a in actions.items():
            assert obs[agent]["action_mask"][a] == 1
        obs, *_ = env.step(actions)


def test_ensemble_members_must_read_the_same_forecast_columns():
    from mara_agents.mara import checkpoint_path

    mixed = [checkpoint_path(), checkpoint_path(MARA_CHECKPOINTS["mara-wls"])]
    with pytest.raises(ValueError, match="different forecast columns"):
        make_policy("mara", core_env.parallel_env(preset="CoRE-v0"), checkpoint=mixed)
    with pytest.raises(ValueError, match="empty list"):
        make_policy("mara", core_env.parallel_env(preset="CoRE-v0"), checkpoint=[])
