"""Sequential decoding in the MARL adapters (issue 70 item 1): a joint action drawn node by
node never exceeds a cap, the log-probability the rollout stores is the one the update
recomputes from the stored (realised) masks, and trained models run as they were trained."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torchrl", reason="the [torchrl] extra is not installed")
pytest.importorskip("sb3_contrib", reason="the [sb3] extra is not installed")

import torch  # noqa: E402

import core_env  # noqa: E402
from core_env.masks import sequential_mask  # noqa: E402
from core_env.sequential import state_capacity  # noqa: E402
from mara_agents.marl import make_marl_policy, sb3, torchrl_ppo  # noqa: E402
from mara_agents.marl.common import load_model  # noqa: E402
from mara_agents.marl.decoding import (  # noqa: E402
    SequentialActor,
    check_decoding,
    decode,
    observation_capacity,
)
from mara_agents.marl.vector import GROUP, CoreTorchEnv, CoreVecEnv  # noqa: E402
from mara_agents.policy import run_episode  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning")]

PRESET = "CoRE-Small-v0"


def assert_within_caps(actions, capacity):
    for b in range(actions.shape[0]):
        counts = np.bincount(actions[b], minlength=capacity.shape[1] + 1)[1:]
        assert np.all(counts <= capacity[b]), (b, counts, capacity[b])


def busy_obs(steps=30, num_envs=4):
    """Observations of a few envs after ``steps`` random slots (tasks present, caps hit)."""
    benv = core_env.make_batched(PRESET, num_envs, seed=3)
    obs, mask = benv.reset()
    rng = np.random.default_rng(0)
    for _ in range(steps):
        logits = rng.random(mask.shape)
        acts = np.where(mask > 0, logits, -1).argmax(-1)
        obs, mask, *_ = benv.step(acts)
    return benv, obs, mask


def test_decode_follows_the_sequential_masks_of_core_env():
    benv, obs, mask = busy_obs()
    cap = observation_capacity(obs, benv.n_nodes, benv.n_actions - 1)
    logits = torch.zeros(mask.shape)  # every node prefers task 0 ... all equal: first legal
    logits[..., 1] = 5.0  # all nodes want the first visible task: the cap must split them
    actions, realised = decode(logits, torch.from_numpy(mask.astype(bool)), cap, greedy=True)
    assert_within_caps(actions.numpy(), cap)
    for b in range(mask.shape[0]):
        for i in range(mask.shape[1]):
            want = sequential_mask(mask[b, i], cap[b], actions[b, :i].numpy())
            assert np.array_equal(realised[b, i].numpy(), want.astype(bool)), (b, i)
    assert check_decoding("simultaneous") == "simultaneous"
    with pytest.raises(ValueError, match="decoding: expected one of"):
        check_decoding("joint")


def test_the_torchrl_actor_stores_what_the_loss_recomputes():
    from tensordict.nn import TensorDictModule
    from torchrl.modules import MaskedCategorical, ProbabilisticActor

    env = CoreTorchEnv(PRESET, 4, seed=0)
    td = env.reset()
    obs_key, mask_key = (GROUP, "observation", "observation"), (GROUP, "action_mask")
    d, k1 = td.get(obs_key).shape[-1], td.get(mask_key).shape[-1]
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(d, 16), torch.nn.Tanh(), torch.nn.Linear(16, k1))
    seq = SequentialActor(net, obs_key, mask_key, (GROUP, "action"),
                          (GROUP, "action_log_prob"), env.benv.n_nodes, k1 - 1)
    loss_actor = ProbabilisticActor(
        TensorDictModule(net, in_keys=[obs_key], out_keys=[(GROUP, "logits")]),
        in_keys={"logits": (GROUP, "logits"), "mask": mask_key},
        out_keys=[(GROUP, "action")], distribution_class=MaskedCategorical)
    for _ in range(40):
        own = td.get(mask_key).clone()
        td = seq(td)
        assert torch.all(td.get(mask_key) <= own)  # realised masks only remove actions
        cap = observation_capacity(td.get(obs_key).numpy(), env.benv.n_nodes, k1 - 1)
        assert_within_caps(td.get((GROUP, "action")).numpy(), cap)
        with torch.no_grad():
            lp = loss_actor.get_dist(td).log_prob(td.get((GROUP, "action")))
        assert torch.allclose(lp, td.get((GROUP, "action_log_prob")), atol=1e-6)
        td = env.step(td).get("next").clone()


def test_maskable_ppo_rollout_and_update_score_the_same_conditionals():
    venv = CoreVecEnv(PRESET, 4, seed=0)
    obs = venv.reset()
    policy = sb3.policy_class()(venv.observation_space, venv.action_space, lambda _: 3e-4,
                                net_arch=[16], decoding="sequential")
    torch.manual_seed(0)
    for _ in range(30):
        masks = venv.action_masks()
        own = masks.copy()
        tensors = {k: torch.as_tensor(v) for k, v in obs.items()}
        with torch.no_grad():
            actions, _, log_prob = policy(tensors, action_masks=masks)
            again = policy.evaluate_actions(tensors, actions, action_masks=masks)[1]
        assert np.all(masks <= own)  # realised masks only remove actions
        assert torch.allclose(log_prob, again, atol=1e-6)  # masks now hold the realised ones
        assert_within_caps(actions.numpy(), state_capacity(venv.benv, obs["state"]))
        obs, *_ = venv.step(actions.numpy())


def test_trained_models_run_as_they_were_trained(tmp_path, one_torch_thread):
    small = dict(steps_per_update=128, minibatch_size=64, epochs=1, num_envs=4)
    env = core_env.parallel_env(preset=PRESET)
    seq = torchrl_ppo.train("mappo", PRESET, 256, 0, tmp_path / "s.pt",
                            torchrl_ppo.TorchRLPPOConfig(**small))
    sim = torchrl_ppo.train("mappo", PRESET, 256, 0, tmp_path / "p.pt",
                            torchrl_ppo.TorchRLPPOConfig(**small, decoding="simultaneous"))
    blob = load_model(seq, "mappo")
    assert blob["config"]["decoding"] == "sequential"
    assert len(blob["curve"]["updates"]["normalised_entropy"]) == 2
    assert 0 < blob["curve"]["updates"]["normalised_entropy"][-1] <= 1
    stats = run_episode(env, make_marl_policy(env, "mappo", seq), seed=4)
    assert stats["capacity_conflicts"] == 0 and stats["illegal_actions"] == 0
    sampled = make_marl_policy(env, "mappo", sim)
    assert sampled.decoding == "simultaneous" and not sampled.deterministic
    mppo = sb3.train(PRESET, 256, 0, tmp_path / "m.pt",
                     sb3.MaskablePPOConfig(**small))
    stats = run_episode(env, make_marl_policy(env, "maskable_ppo", mppo), seed=4)
    assert stats["capacity_conflicts"] == 0 and stats["illegal_actions"] == 0
    with pytest.raises(ValueError, match="node_distribution=True"):
        sb3.MaskablePPOConfig(node_distribution=False)


def test_value_norm_tracks_the_targets_it_has_seen():
    norm = torchrl_ppo.ValueNorm(torch.nn.Linear(3, 1))
    a, b = torch.randn(100) * 4 + 2, torch.randn(50) * 0.5 - 1
    norm.update(a)
    norm.update(b)
    both = torch.cat([a, b]).double()
    assert torch.allclose(norm.mean.double(), both.mean(), atol=1e-5)
    assert torch.allclose(norm.var.double(), both.var(unbiased=False), atol=1e-4)
    x = torch.randn(7, 3)
    assert torch.allclose(norm(x), norm.net(x) * norm.std + norm.mean)


def test_the_slot_shared_actor_scores_each_task_alike_for_any_k(tmp_path, one_torch_thread):
    from mara_agents.marl.common import SlotSharedActor, actor_network

    torch.manual_seed(0)
    net = SlotSharedActor(own=5, task_size=3, hidden=[8])
    x = torch.randn(2, 4, 5 + 3 * 6)  # K = 6
    out = net(x)
    assert out.shape == (2, 4, 7)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    table = x[..., 5:].unflatten(-1, (6, 3))[..., perm, :].flatten(-2)
    moved = net(torch.cat([x[..., :5], table], -1))
    torch.testing.assert_close(moved[..., 1:], out[..., 1:][..., perm])  # equivariant
    torch.testing.assert_close(moved[..., 0], out[..., 0])
    assert net(x[..., : 5 + 3 * 2]).shape == (2, 4, 3)  # the same weights at K = 2
    with pytest.raises(ValueError, match="expected kind"):
        actor_network({"kind": "gnn"})
    small = dict(steps_per_update=128, minibatch_size=64, epochs=1, num_envs=4)
    path = torchrl_ppo.train("ippo", PRESET, 256, 0, tmp_path / "s.pt",
                             torchrl_ppo.TorchRLPPOConfig(**small, actor_kind="slot_shared"))
    assert load_model(path, "ippo")["config"]["actor"]["kind"] == "slot_shared"
    env = core_env.parallel_env(preset=PRESET)
    stats = run_episode(env, make_marl_policy(env, "ippo", path), seed=2)
    assert stats["capacity_conflicts"] == 0 and stats["illegal_actions"] == 0
    with pytest.raises(ValueError, match="actor_kind"):
        torchrl_ppo.TorchRLPPOConfig(actor_kind="gnn")
