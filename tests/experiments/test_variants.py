"""The variants of ``experiments/variants.py`` load as what they claim to be, through the same
``module:Factory`` specs any user policy uses."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

import core_env
from core_env.forecast import LossForecastWrapper, WLSForecaster
from experiments import lara_params, variants
from mara_agents.mat.checkpoint import load_checkpoint
from mara_agents.mat.mara_policy import MARAPolicy
from mara_agents.policy import make_policy, run_episode
from mara_agents.train.config import PPOConfig

SPEC = "experiments.variants:{}"


def test_a_variant_is_a_policy_spec_with_its_own_forecast_wrapper():
    env, policy = make_policy(SPEC.format("mara_wls"), core_env.parallel_env(preset="CoRE-v0"))
    assert isinstance(env, LossForecastWrapper) and isinstance(env.forecaster, WLSForecaster)
    assert isinstance(policy, MARAPolicy)
    env, policy = make_policy(SPEC.format("mat_dec"), core_env.parallel_env(preset="CoRE-v0"))
    assert policy.model.config.autoregressive is False
    stats = run_episode(env, policy, seed=0)
    assert 0.0 <= stats["completion_rate"] <= 1.0
    with pytest.raises(ValueError, match="has no 'mat_enc'"):
        make_policy(SPEC.format("mat_enc"), core_env.parallel_env(preset="CoRE-v0"))


def test_the_fast_variant_runs_on_the_cheaper_fm_sampler_it_was_trained_with():
    env, _ = make_policy(SPEC.format("mara_fast"), core_env.parallel_env(preset="CoRE-v0"))
    assert (env.forecaster.sampler.steps, env.forecaster.sampler.samples) == (5, 16)


def test_the_ensemble_is_five_training_seeds_decoded_together():
    files = [variants.CHECKPOINTS / "ensemble" / f"seed{k}.pt" for k in range(5)]
    configs = [load_checkpoint(f)["train_config"] for f in files]
    assert [c["seed"] for c in configs] == list(range(5))
    free = ("seed", "out", "keep_checkpoints")  # keep_checkpoints only saved extra files
    assert all({k: v for k, v in c.items() if k not in free}
               == {k: v for k, v in configs[0].items() if k not in free} for c in configs)
    env, policy = make_policy(SPEC.format("mara_ens5"), core_env.parallel_env(preset="CoRE-v0"))
    assert len(policy.models) == 5
    assert run_episode(env, policy, seed=1) == run_episode(env, policy, seed=1)


def test_the_distilled_variant_records_its_teacher():
    blob = load_checkpoint(variants.CHECKPOINTS / "distill" / "mara_distill.pt")
    record = json.loads(blob["distill"])
    assert len(record["teacher_files"]) == 5 and record["history"]


def test_the_shipped_ablations_keep_their_experiments_specs():
    from mara_agents import ablations

    for name in ablations.ABLATIONS:
        assert getattr(variants, name) is getattr(ablations, name)


@pytest.mark.parametrize("name", [*lara_params.CHANGES,
                                  *(f"oracle_{n}" for n in lara_params.ORACLE_CHANGES)])
def test_each_lara_variant_changes_exactly_its_parameter(name):
    from core_env.forecast import OracleForecaster, forecast_wrapper
    from mara_agents.baselines import LARAParams

    env, policy = make_policy(f"experiments.lara_params:{name}",
                              core_env.parallel_env(preset="CoRE-Small-v0"))
    change = lara_params.CHANGES[name.removeprefix("oracle_")]
    changed = {k: v for k, v in vars(policy.params).items()
               if getattr(LARAParams(), k) != v}
    assert changed == change
    oracle = isinstance(forecast_wrapper(env).forecaster, OracleForecaster)
    assert oracle is name.startswith("oracle_")
    assert run_episode(env, policy, seed=0)["capacity_conflicts"] == 0


@pytest.mark.parametrize("name,members", [("mara_recipe3", 3), ("mara_recipe4", 4)])
def test_the_recipe_variants_distil_their_count_of_default_runs_into_member_0(name, members):
    factory = getattr(variants, name)
    blob = load_checkpoint(factory.paths[0])
    defaults = PPOConfig()
    assert defaults.differences(blob["train_config"]) == []  # the student: member 0, seed 0
    assert blob["env_steps"] == load_checkpoint(variants.CHECKPOINTS / "single"
                                                / "mara_single.pt")["env_steps"]
    record = json.loads(blob["distill"])  # the distillation's config and history
    config = record["config"]
    teachers = config["teacher"].split(",")
    assert [t.rsplit("/", 2)[-2] for t in teachers] == [f"member-{i}" for i in range(members)]
    assert config["student"] == teachers[0]
    assert {k: config[k] for k in asdict(defaults.distill)} == asdict(defaults.distill)
    assert len(record["history"]) == defaults.distill.iterations
    env, policy = make_policy(SPEC.format(name), core_env.parallel_env(preset="CoRE-v0"))
    assert len(policy.models) == 1  # one MAT's inference cost


def test_the_switching_variants_place_as_they_claim():
    """``mara_switchmix`` was trained on the cost mix with the kept placement and keeps it;
    ``mara_decoded`` and ``mara_keep`` are the shipped weights always executing their decoded
    node order, and always keeping nodes on their tasks."""
    cfg = load_checkpoint(variants.CHECKPOINTS / "switchmix" / "mara_switchmix.pt")["train_config"]
    assert (cfg["preset"], cfg["placement"]) == ("CoRE-SwitchMix-v0", "keep")
    base = core_env.parallel_env(preset="CoRE-Switch-v0")
    assert make_policy(SPEC.format("mara_switchmix"), base)[1].placement == "keep"
    _, decoded = make_policy(SPEC.format("mara_decoded"), base)
    assert decoded.placement == "model"
    assert make_policy(SPEC.format("mara_keep"), base)[1].placement == "keep"
    assert make_policy("mara", base)[1].placement == "auto"
