"""``mara_fair``: the shipped MARA-fair checkpoints by fraction, and bad fractions refused."""

from __future__ import annotations

import pytest

import core_env
from mara_agents.mat.checkpoint import load_checkpoint
from mara_agents.policy import (
    DEFAULT_FAIR_FRACTION,
    FAIR_FRACTIONS,
    check_policy_spec,
    fair_checkpoint,
    fair_spec,
    make_policy,
    policy_fingerprint,
    run_episode,
)


def test_every_shipped_fraction_has_its_checkpoint_trained_with_it():
    assert DEFAULT_FAIR_FRACTION in FAIR_FRACTIONS
    for f in FAIR_FRACTIONS:
        cfg = load_checkpoint(fair_checkpoint(f))["train_config"]
        assert cfg["fair_fraction"] == f and cfg["preset"] == "CoRE-Tenants-v0"
    prints = {policy_fingerprint(f"mara_fair@{f}") for f in FAIR_FRACTIONS}
    assert len(prints) == len(FAIR_FRACTIONS)
    assert policy_fingerprint("mara_fair") == policy_fingerprint(
        f"mara_fair@{DEFAULT_FAIR_FRACTION}")


def test_specs_and_their_fractions():
    assert fair_spec("mara_fair") == DEFAULT_FAIR_FRACTION
    assert fair_spec("mara_fair@0.6") == 0.6
    assert fair_spec("mara") is None and fair_spec("mappo@x") is None
    assert check_policy_spec("mara_fair@0.9") == "mara_fair@0.9"


@pytest.mark.parametrize("spec, kwargs, match", [
    ("mara_fair@1.5", {}, r"fraction: expected a number in \(0, 1\] after '@', got '1.5'"),
    ("mara_fair@0", {}, r"fraction: expected a number in \(0, 1\]"),
    ("mara_fair@x", {}, r"got 'x'"),
    ("mara_fair", {"fraction": -0.2}, r"fraction: expected a number in \(0, 1\], got -0.2"),
    ("mara_fair", {"fraction": True}, r"fraction: expected a number"),
    ("mara_fair", {"fraction": 0.75}, r"no MARA-fair checkpoint is shipped for 0.75 "
                                      r"\(shipped: 0.6, 0.8, 0.9\); train one with"),
])
def test_bad_fractions_are_refused(spec, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_policy(spec, core_env.parallel_env(preset="CoRE-Tenants-v0"), **kwargs)


def test_mara_fair_schedules_a_tenants_episode():
    env, policy = make_policy("mara_fair", core_env.parallel_env(preset="CoRE-Tenants-v0",
                                                                 max_steps=60))
    ep = run_episode(env, policy, seed=0)
    assert ep["illegal_actions"] == 0 and ep["capacity_conflicts"] == 0
    assert ep["completed"] > 0 and set(ep["groups"]["tenant"]) == {
        "tenant 0", "tenant 1", "tenant 2"}
    # fraction= picks another shipped checkpoint: another policy on the same episode
    env2, other = make_policy("mara_fair", core_env.parallel_env(preset="CoRE-Tenants-v0",
                                                                 max_steps=60), fraction=0.6)
    assert policy.train_config["fair_fraction"] == DEFAULT_FAIR_FRACTION
    assert other.train_config["fair_fraction"] == 0.6


def test_the_fairness_page_examples_run(monkeypatch, tmp_path):
    """docs/fairness.md's Python examples (the audit and MARA-fair)."""
    import re
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    page = (Path(__file__).resolve().parents[3] / "docs" / "fairness.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 2
    for i, block in enumerate(blocks):
        exec(compile(block, f"fairness.md[{i}]", "exec"), {"__name__": f"doc_{i}"})


def test_your_own_checkpoint_runs_as_mara_fair(tmp_path):
    env, policy = make_policy("mara_fair", core_env.parallel_env(preset="CoRE-Tenants-v0"),
                              checkpoint=str(fair_checkpoint(0.9)))
    assert policy.train_config["fair_fraction"] == 0.9
