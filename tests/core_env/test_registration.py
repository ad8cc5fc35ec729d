"""Registration with PettingZoo and Gymnasium, the module convention and the preset set."""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
import pettingzoo
import pytest

import core_env
from core_env import make_config, scheduler_v0
from core_env.registration import register_presets
from core_env.workload import generate_workload

PRESET_IDS = ["CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0", "CoRE-Small-v0"]


@pytest.mark.parametrize("preset", PRESET_IDS)
def test_presets_registered_parallel_aec_gymnasium(preset):
    env_id = f"core_env/{preset}"
    assert env_id in pettingzoo.parallel_registry
    assert env_id in pettingzoo.aec_registry
    assert env_id in gymnasium.registry
    par = pettingzoo.make("parallel", env_id)
    assert isinstance(par, core_env.CoreSchedulerEnv)
    assert par.config == make_config(preset)
    aec = pettingzoo.make("aec", env_id)
    assert isinstance(aec, pettingzoo.AECEnv)
    assert aec.possible_agents == par.possible_agents
    aec.reset(seed=0)
    assert aec.agent_selection == "node_0"


def test_pettingzoo_make_with_overrides():
    env = pettingzoo.make("parallel", "core_env/CoRE-v0", n_nodes=8)
    assert env.possible_agents == [f"node_{i}" for i in range(8)]
    obs, _ = env.reset(seed=0)
    assert len(obs) == 8
    aec = pettingzoo.make("aec", "core_env/CoRE-Small-v0", n_nodes=2, max_visible_tasks=3)
    assert aec.possible_agents == ["node_0", "node_1"]
    assert aec.action_space("node_0").n == 4
    with pytest.raises(ValueError):
        pettingzoo.make("parallel", "core_env/CoRE-v0", n_nodes=0)


def test_register_presets_is_idempotent():
    before = (len(pettingzoo.parallel_registry), len(pettingzoo.aec_registry),
              len(gymnasium.registry))
    register_presets()
    register_presets()
    assert (len(pettingzoo.parallel_registry), len(pettingzoo.aec_registry),
            len(gymnasium.registry)) == before


def test_module_convention():
    from core_env import scheduler_v0 as mod
    assert mod is scheduler_v0
    par = mod.parallel_env(preset="CoRE-Small-v0", n_nodes=3)
    assert isinstance(par, mod.raw_env) and par.possible_agents == ["node_0", "node_1", "node_2"]
    aec = mod.env(preset="CoRE-Small-v0")
    assert isinstance(aec, pettingzoo.AECEnv)
    raw = mod.raw_env(preset="CoRE-Small-v0")
    assert isinstance(raw, pettingzoo.ParallelEnv)
    assert mod.parallel_env().config == make_config("CoRE-v0")  # default preset


def test_import_does_not_pull_torch():
    import subprocess
    import sys
    code = "import sys, core_env; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- presets' contents
def test_heavy_and_extreme_scale_the_arrival_rate_only():
    base = make_config("CoRE-v0")
    for preset, factor in (("CoRE-Heavy-v0", 1.5), ("CoRE-Extreme-v0", 2.0)):
        cfg = make_config(preset)
        assert cfg.workload.arrival_rate == pytest.approx(factor * base.workload.arrival_rate)
        assert dataclasses.replace(cfg.workload, load=base.workload.load) == base.workload
        assert (cfg.cluster, cfg.reward, cfg.episode) == (base.cluster, base.reward, base.episode)


def test_held_out_uses_another_mix_only():
    base, held = make_config("CoRE-v0"), make_config("CoRE-HeldOut-v0")
    assert held.workload.mix != base.workload.mix
    assert dataclasses.replace(held.workload, mix=base.workload.mix) == base.workload


def test_small_preset_is_small():
    cfg = make_config("CoRE-Small-v0")
    assert cfg.cluster.n_nodes < make_config("CoRE-v0").cluster.n_nodes
    assert cfg.workload.arrival_slots < make_config("CoRE-v0").workload.arrival_slots


def test_mean_arrivals_scale_with_the_preset_load():
    """Statistically: mean arrivals per episode over 30 seeds is ~100, ~150, ~200
    (Poisson, sd of the mean ~2.6 at the highest rate)."""
    means = {}
    for preset in ("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0"):
        cfg = make_config(preset)
        counts = [generate_workload(cfg, np.random.default_rng(s)).n_tasks for s in range(30)]
        means[preset] = float(np.mean(counts))
        expected = cfg.workload.arrival_rate * cfg.workload.arrival_slots
        assert means[preset] == pytest.approx(expected, rel=0.06)
    assert means["CoRE-Heavy-v0"] / means["CoRE-v0"] == pytest.approx(1.5, rel=0.08)
    assert means["CoRE-Extreme-v0"] / means["CoRE-v0"] == pytest.approx(2.0, rel=0.08)


def test_held_out_mix_draws_different_curves():
    cfg_t, cfg_h = make_config("CoRE-v0"), make_config("CoRE-HeldOut-v0")
    wt = generate_workload(cfg_t, np.random.default_rng(0))
    wh = generate_workload(cfg_h, np.random.default_rng(0))
    assert wt.n_tasks != wh.n_tasks or not np.array_equal(wt.true_log_loss, wh.true_log_loss)
