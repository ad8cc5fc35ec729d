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
    cfg = marl_sb3.MaskablePPOConfig(steps_per_update=256, minibatch_size=64, epochs=1,
                                     decoding="simultaneous")  # as sb3-contrib predicts
    central = gymnasium.make(f"core_env:core_env/{PRESET}")
    model = MaskablePPO("MultiInputPolicy", central, seed=0, device="cpu",
                        policy_kwargs=marl_sb3._policy_kwargs(vars(cfg), node_policy=False),
                        **cfg.sb3_kwargs())
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


def test_node_distribution_matches_sb3_contribs_per_node_one():
    import torch
    from sb3_contrib.common.maskable.distributions import MaskableMultiCategoricalDistribution

    n, k1, batch = 5, 7, 64
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(batch, n * k1, generator=gen) * 3
    masks = torch.rand(batch, n * k1, generator=gen) < 0.6
    masks.view(batch, n, k1)[:, :, 0] = True  # idle is always legal
    ours = marl_sb3.node_distribution(n, k1).proba_distribution(logits)
    theirs = MaskableMultiCategoricalDistribution([k1] * n).proba_distribution(logits)
    for d in (ours, theirs):
        d.apply_masking(masks)
    actions = theirs.sample()
    assert actions.shape == ours.sample().shape == (batch, n)
    assert masks.view(batch, n, k1).gather(2, ours.sample()[..., None]).all()  # legal
    torch.testing.assert_close(ours.log_prob(actions), theirs.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), theirs.entropy())
    assert torch.equal(ours.mode(), theirs.mode())
    ours.apply_masking(None)  # unmasked again: the plain softmax per node
    torch.testing.assert_close(ours.entropy(), torch.distributions.Categorical(
        logits=logits.view(batch, n, k1)).entropy().sum(1))
    with pytest.raises(ValueError, match="MultiDiscrete"):
        from gymnasium import spaces
        marl_sb3.policy_class()(spaces.Dict({"state": spaces.Box(0, 1, (3,))}),
                                spaces.MultiDiscrete([3, 4]), lambda _: 0.0)
