"""MaskablePPO's model file and policy: the policy on the PettingZoo env plays exactly what
SB3's own ``predict`` plays on the centralised view, legally and deterministically."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("sb3_contrib", reason="the [sb3] extra is not installed")

import gymnasium  # noqa: E402
from sb3_contrib import MaskablePPO  # noqa: E402

import core_env  # noqa: E402
from mara_agents.marl import sb3 as marl_sb3  # noqa: E402
from mara_agents.marl import train  # noqa: E402
from mara_agents.marl.common import CurveLog, env_layout, load_model, save_model  # noqa: E402
from mara_agents.policy import run_episode  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.usefixtures("one_torch_thread")]

PRESET = "CoRE-Small-v0"


def test_policy_plays_what_sb3_predicts(tmp_path):
    cfg = marl_sb3.MaskablePPOConfig(steps_per_update=256, minibatch_size=64, epochs=1)
    central = gymnasium.make(f"core_env:core_env/{PRESET}")
    model = MaskablePPO("MultiInputPolicy", central, seed=0, device="cpu",
                        policy_kwargs=marl_sb3._policy_kwargs(vars(cfg)), **cfg.sb3_kwargs())
    model.learn(256)
    path = save_model(tmp_path / "m.pt", "maskable_ppo", PRESET, 0, 256, time.perf_counter(),
                      "sb3-contrib", {**vars(cfg), "hidden": list(cfg.hidden)},
                      env_layout(core_env.parallel_env(preset=PRESET)), CurveLog(),
                      {"policy_state": dict(model.policy.state_dict())})
    env = core_env.parallel_env(preset=PRESET)
    policy = marl_sb3.MaskablePPOPolicy(env, path)
    obs, _ = env.reset(seed=7)
    c_obs, _ = central.reset(seed=7)
    policy.reset(7)
    steps = 0
    while env.agents:
        acts = policy.act(obs)
        want, _ = model.predict(c_obs, action_masks=central.unwrapped.action_masks(),
                                deterministic=True)
        assert [acts[a] for a in env.possible_agents] == list(want)
        obs, *_ = env.step(acts)
        c_obs, _, term, trunc, _ = central.step(want)
        steps += 1
    assert term or trunc
    stats = run_episode(env, policy, seed=7)
    assert stats["illegal_actions"] == 0 and stats == run_episode(env, policy, seed=7)
    sampled = marl_sb3.MaskablePPOPolicy(env, path, deterministic=False)
    first = run_episode(env, sampled, seed=7)
    assert first["illegal_actions"] == 0 and first == run_episode(env, sampled, seed=7)
    with pytest.raises(ValueError, match="another layout"):
        marl_sb3.MaskablePPOPolicy(core_env.parallel_env(preset="CoRE-v0"), path)


def test_train_writes_a_model_with_its_curve(tmp_path):
    # two updates: the default 64 envs take 64 steps each, past the shortest episodes (40)
    path = train("maskable_ppo", PRESET, 4096, 0, tmp_path / "m.pt")
    blob = load_model(path, "maskable_ppo")
    assert blob["env_steps"] == 4096 and blob["preset"] == PRESET
    curve = blob["curve"]
    assert curve["env_steps"] == sorted(curve["env_steps"]) and curve["env_steps"]
    assert all(0.0 <= r <= 1.0 for r in curve["completion_rate"])
    assert np.isfinite(blob["wall_seconds"]) and blob["wall_seconds"] > 0
