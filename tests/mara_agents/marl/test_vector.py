"""The batched simulator behind SB3's ``VecEnv`` and TorchRL's ``EnvBase``: each adapter plays
bit for bit what the single env plays for the same seeds (across auto-resets, terminated and
truncated episodes), has the single env's spaces and specs, refuses bad input by name, and
trains a model that the policies load."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib", reason="the [sb3] extra is not installed")
pytest.importorskip("torchrl", reason="the [torchrl] extra is not installed")

import gymnasium  # noqa: E402
import torch  # noqa: E402
from sb3_contrib.common.maskable.utils import get_action_masks  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs.libs.pettingzoo import PettingZooWrapper  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import core_env  # noqa: E402
from core_env.dynamics import EPISODE_KEYS  # noqa: E402
from mara_agents.marl import make_marl_policy, sb3, torchrl_ppo  # noqa: E402
from mara_agents.marl.common import CurveLog, load_model  # noqa: E402
from mara_agents.marl.vector import GROUP, CoreTorchEnv, CoreVecEnv  # noqa: E402
from mara_agents.policy import run_episode  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.usefixtures("one_torch_thread")]

SMALL = "CoRE-Small-v0"
CASES = [  # (preset, num_envs, seed, steps, overrides): episodes that terminate and truncate
    (SMALL, 3, 5, 300, {"max_steps": 60}),
    ("CoRE-v0", 2, 0, 200, {"arrival_slots": 8, "max_steps": 45}),
]


def masked_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int64[B, N]: uniform over each node's legal actions (``mask`` [B, N, K + 1])."""
    return (rng.random(mask.shape) * mask).argmax(-1)


@pytest.mark.parametrize("preset, b, seed, steps, overrides", CASES)
def test_vec_env_plays_what_dummy_vec_env_of_central_envs_plays(preset, b, seed, steps,
                                                               overrides):
    log = CurveLog()
    vec = CoreVecEnv(preset, b, seed=seed, log=log, **overrides)
    ref = DummyVecEnv([lambda: gymnasium.make(f"core_env:core_env/{preset}", **overrides)] * b)
    ref.seed(seed)
    assert vec.observation_space == ref.observation_space
    assert vec.action_space == ref.action_space
    assert vec.has_attr("action_masks") and vec.get_attr("render_mode") == [None] * b
    obs, want = vec.reset(), ref.reset()
    rng = np.random.default_rng(0)
    ends = {"terminated": 0, "truncated": 0}
    rates = []
    for t in range(steps):
        for key in ("state", "action_mask"):
            assert obs[key].dtype == want[key].dtype and np.array_equal(obs[key], want[key]), t
        masks = get_action_masks(vec)
        assert masks.dtype == bool and np.array_equal(masks, get_action_masks(ref)), t
        actions = masked_actions(obs["action_mask"], rng)
        obs, rew, done, infos = vec.step(actions)
        want, want_rew, want_done, want_infos = ref.step(actions)
        assert rew.dtype == want_rew.dtype and np.array_equal(rew, want_rew), t
        assert np.array_equal(done, want_done), t
        for i in np.flatnonzero(done):
            got, exp = infos[i], want_infos[i]
            truncated = exp.get("TimeLimit.truncated", False)
            assert got["TimeLimit.truncated"] == truncated
            ends["truncated" if truncated else "terminated"] += 1
            assert {k: got["episode"][k] for k in EPISODE_KEYS} == {
                k: exp["episode"][k] for k in EPISODE_KEYS}
            assert got["episode"]["r"] == exp["episode"]["return"]
            assert got["episode"]["l"] == exp["episode"]["length"]
            assert "terminal_observation" not in got  # gone: reset inside the step
            rates.append(exp["episode"]["completion_rate"])
        assert all(not infos[i] for i in np.flatnonzero(~done))
    assert min(ends.values()) >= 1, ends  # both ways of ending were crossed
    assert log.steps == steps * b and log.completion_rate == rates


@pytest.mark.parametrize("preset, b, seed, steps, overrides", CASES)
def test_torch_env_plays_what_pettingzoo_wrappers_play(preset, b, seed, steps, overrides):
    env = CoreTorchEnv(preset, b, seed=seed, **overrides)
    refs = [PettingZooWrapper(core_env.parallel_env(preset=preset, **overrides),
                              return_state=True, categorical_actions=True) for _ in range(b)]
    root = env.reset()
    ref_roots = [r.reset(seed=seed + i) for i, r in enumerate(refs)]
    rng = np.random.default_rng(0)
    obs_keys = [(GROUP, "observation", "observation"), (GROUP, "action_mask"), "state"]
    flags = ["done", "terminated", "truncated"]
    flag_keys = [*flags, *[(GROUP, k) for k in flags]]
    ends = 0
    for t in range(steps):
        for i, ref_root in enumerate(ref_roots):  # what the policy sees next, after resets
            for key in obs_keys + flag_keys:
                assert torch.equal(root[key][i], ref_root[key]), (t, i, key)
        actions = torch.as_tensor(masked_actions(root[GROUP, "action_mask"].numpy(), rng))
        root.set((GROUP, "action"), actions)
        stepped, root = env.step_and_maybe_reset(root)
        nxt = stepped["next"]
        for i, ref in enumerate(refs):
            ref_roots[i].set((GROUP, "action"), actions[i])
            ref_stepped, ref_roots[i] = ref.step_and_maybe_reset(ref_roots[i])
            ref_next = ref_stepped["next"]
            for key in [(GROUP, "reward"), *flag_keys]:
                assert torch.equal(nxt[key][i], ref_next[key]), (t, i, key)
            if not ref_next["done"].item():
                for key in obs_keys:
                    assert torch.equal(nxt[key][i], ref_next[key]), (t, i, key)
            else:  # "next" is the next episode's first observation
                ends += 1
                for key in obs_keys:
                    assert torch.equal(nxt[key][i], ref_roots[i][key]), (t, i, key)
    assert ends >= b


def test_torch_env_specs_are_pettingzoo_wrappers_with_an_env_dimension():
    b = 3
    env = CoreTorchEnv(SMALL, b, seed=0)
    ref = PettingZooWrapper(core_env.parallel_env(preset=SMALL), return_state=True,
                            categorical_actions=True)
    for name in ("full_observation_spec", "full_action_spec", "full_reward_spec",
                 "full_done_spec"):
        assert getattr(env, name) == getattr(ref, name).expand(b), name
    check_env_specs(env)


def test_collector_batches_keep_each_steps_flags():
    log = CurveLog()
    env = CoreTorchEnv(SMALL, 4, seed=1, log=log, max_steps=12)
    collector = Collector(env, None, frames_per_batch=4 * 30, total_frames=4 * 60)
    done = [batch["next", "done"] for batch in collector]
    collector.shutdown()
    assert done[0].shape == (4, 30, 1)
    # every env truncates at slots 12, 24, ...: the stored flags were not overwritten by the
    # auto-resets that followed them
    want = torch.zeros(4, 60, 1, dtype=torch.bool)
    want[:, 11::12] = True
    assert torch.equal(torch.cat(done, dim=1), want)
    assert log.steps == 240 and log.env_steps == sorted([12 * 4 * k for k in range(1, 6)] * 4)


def test_bad_input_is_refused_by_name():
    vec = CoreVecEnv(SMALL, 2, seed=0)
    vec.reset()
    bad = np.zeros((2, 4), dtype=np.int64)
    bad[1, 2] = 9
    with pytest.raises(ValueError, match=r"actions\[1, 2\] \(env 1, node_2\).*\[0, 8\], got 9"):
        vec.step(bad)
    with pytest.raises(ValueError, match=r"actions: expected shape \(2, 4\), got \(4,\)"):
        vec.step(np.zeros(4, dtype=np.int64))
    with pytest.raises(ValueError, match="actions: expected an integer array"):
        vec.step(np.zeros((2, 4)))
    with pytest.raises(AttributeError, match="method_name.*'render'"):
        vec.env_method("render")
    vec.set_options({"workload": None})
    with pytest.raises(ValueError, match="options"):
        vec.reset()
    with pytest.raises(ValueError, match="num_envs"):
        CoreVecEnv(SMALL, 0)
    env = CoreTorchEnv(SMALL, 2, seed=0)
    root = env.reset()
    root.set((GROUP, "action"), torch.as_tensor(bad))
    with pytest.raises(ValueError, match=r"actions\[1, 2\] \(env 1, node_2\)"):
        env.step(root)
    root.set("_reset", torch.tensor([[False], [True]]))
    with pytest.raises(ValueError, match="_reset: env 1's episode did not just end"):
        env.reset(root)
    for kwargs, field in [({"num_envs": 3}, "num_envs: expected a divisor"),
                          ({"num_envs": -1}, "num_envs: expected an integer in"),
                          ({"num_envs": 2.0}, "num_envs")]:
        with pytest.raises(ValueError, match=field):
            sb3.MaskablePPOConfig(steps_per_update=256, minibatch_size=64, **kwargs)


def test_maskable_ppo_on_one_batched_env_trains_what_the_central_env_trains(tmp_path):
    weights = []
    for num_envs in (0, 1):
        cfg = sb3.MaskablePPOConfig(steps_per_update=128, minibatch_size=64, epochs=1,
                                    num_envs=num_envs)
        blob = load_model(sb3.train(SMALL, 256, 0, tmp_path / f"{num_envs}.pt", cfg))
        weights.append(blob["policy_state"])
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def assert_update_stats(blob, updates, n_actions):
    """One record per PPO update, at its env step count, with a per-node entropy of a masked
    distribution over at most ``n_actions`` (so in (0, ln n_actions]) and finite losses."""
    up = blob["curve"]["updates"]
    assert up["env_steps"] == [256 * (i + 1) for i in range(updates)]
    assert all(0 < e <= np.log(n_actions) + 1e-6 for e in up["entropy"])
    assert all(np.isfinite(up[k]).all() and len(up[k]) == updates
               for k in ("value_loss", "approx_kl", "explained_variance"))


def test_maskable_ppo_on_the_vec_env_writes_a_playable_model(tmp_path):
    cfg = sb3.MaskablePPOConfig(steps_per_update=256, minibatch_size=128, epochs=1, num_envs=8)
    path = sb3.train(SMALL, 512, 0, tmp_path / "m.pt", cfg)
    blob = load_model(path, "maskable_ppo")
    assert blob["config"]["num_envs"] == 8 and blob["curve"]["steps"] == 512
    assert blob["curve"]["env_steps"] == sorted(blob["curve"]["env_steps"])
    assert blob["curve"]["completion_rate"]  # 8 envs x 64 steps end some episodes
    assert_update_stats(blob, updates=2, n_actions=9)
    env = core_env.parallel_env(preset=SMALL)
    stats = run_episode(env, make_marl_policy(env, "maskable_ppo", path), seed=3)
    assert stats["illegal_actions"] == 0 and stats["arrived"] > 0


@pytest.mark.parametrize("algorithm", ["mappo", "ippo"])
def test_torchrl_ppo_on_the_torch_env_writes_a_playable_model(tmp_path, algorithm):
    cfg = torchrl_ppo.TorchRLPPOConfig(steps_per_update=256, minibatch_size=128, epochs=1,
                                       num_envs=8)
    path = torchrl_ppo.train(algorithm, SMALL, 512, 0, tmp_path / "m.pt", cfg)
    blob = load_model(path, algorithm)
    assert blob["config"]["num_envs"] == 8 and blob["curve"]["steps"] == 512
    assert blob["curve"]["completion_rate"]
    assert_update_stats(blob, updates=2, n_actions=9)
    env = core_env.parallel_env(preset=SMALL)
    stats = run_episode(env, make_marl_policy(env, algorithm, path), seed=3)
    assert stats["illegal_actions"] == 0 and stats["arrived"] > 0



def test_the_documented_examples_run(monkeypatch, tmp_path):
    """docs/integrations.md's examples of the vectorised adapters."""
    import re
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    page = (Path(__file__).resolve().parents[3] / "docs" / "integrations.md").read_text()
    section = page[page.index("## Training at the simulator's speed"):
                   page.index("## Stable-Baselines3")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    for i, block in enumerate(blocks):
        exec(compile(block, f"integrations.md[{i}]", "exec"), {"__name__": f"doc_{i}"})
