"""The MARL models' shared parts: the checked model file, the learning-curve log, the shared
actor policy, and how policy names find a model."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import core_env
from core_env.presets import PRESETS, preset_of
from mara_agents.marl import model_file, model_path
from mara_agents.marl.common import (
    CurveLog,
    RecordParallel,
    SharedActorPolicy,
    SharedTableMLP,
    env_layout,
    load_model,
    mlp,
    save_model,
)
from mara_agents.policy import (
    check_policy_spec,
    make_policy,
    marl_spec,
    policy_fingerprint,
    run_episode,
)


def write_actor_model(path, preset="CoRE-Small-v0", algorithm="mappo", seed=0, env_steps=10):
    """A model file with an untrained (seeded) actor."""
    env = core_env.parallel_env(preset=preset)
    layout = env_layout(env)
    sizes = [layout["obs_dim"], 16, layout["n_actions"]]
    torch.manual_seed(seed)
    net = mlp(sizes)
    return save_model(path, algorithm, preset, seed, env_steps, time.perf_counter(), "torch",
                      {"actor": {"sizes": sizes, "activation": "tanh"}}, layout, CurveLog(),
                      {"actor_state": dict(net.state_dict())})


def test_mlp_applies_the_same_weights_to_every_node():
    torch.manual_seed(0)
    net = mlp([5, 8, 3])
    x = torch.randn(4, 5)
    out = net(x)
    for i in range(4):  # a batch and one row may round differently (BLAS kernels)
        assert torch.allclose(out[i], net(x[i : i + 1])[0], rtol=1e-5, atol=1e-6)
    assert [type(m).__name__ for m in net] == ["Linear", "Tanh", "Linear"]
    with pytest.raises(ValueError, match="activation"):
        mlp([2, 2], "gelu")


def test_curve_log_records_each_finished_episode():
    log = CurveLog()
    env = RecordParallel(core_env.parallel_env(preset="CoRE-Small-v0"), log)
    rng = np.random.default_rng(0)
    rates = []
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        while env.agents:
            acts = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"])))
                    for a in env.agents}
            obs, _, _, _, infos = env.step(acts)
        rates.append(infos["node_0"]["episode"]["completion_rate"])
    assert log.completion_rate == rates
    assert len(log.env_steps) == 2 and log.env_steps[1] == log.steps
    # a Gymnasium info dict counts the same way
    g = CurveLog()
    g.step({})
    g.step({"episode": {"completion_rate": 0.5}})
    g.update(entropy=1.5, value_loss=0.25)
    out = g.as_dict()
    assert (out["env_steps"], out["completion_rate"], out["steps"]) == ([2], [0.5], 2)
    up = out["updates"]
    assert up["env_steps"] == [2] and up["entropy"] == [1.5] and up["value_loss"] == [0.25]
    assert np.isnan(up["approx_kl"][0]) and np.isnan(up["explained_variance"][0])
    with pytest.raises(ValueError, match="unknown keys \\['loss'\\]"):
        g.update(loss=1.0)
    assert len(g.updates["entropy"]) == 1  # the refused update recorded nothing


def test_model_file_round_trip_and_refusals(tmp_path):
    path = write_actor_model(tmp_path / "m.pt")
    blob = load_model(path, "mappo")
    assert blob["preset"] == "CoRE-Small-v0" and blob["library"]["name"] == "torch"
    with pytest.raises(ValueError, match="a mappo model, expected ippo"):
        load_model(path, "ippo")
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte in the weights
    bad = tmp_path / "bad.pt"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=str(bad)):
        load_model(bad)
    with pytest.raises(ValueError, match="another layout: n_nodes 4 .model. vs 16"):
        SharedActorPolicy(core_env.parallel_env(preset="CoRE-v0"), path, "mappo")


def test_shared_actor_plays_legal_actions_deterministically(tmp_path):
    path = write_actor_model(tmp_path / "m.pt")
    env = core_env.parallel_env(preset="CoRE-Small-v0")
    policy = SharedActorPolicy(env, path, "mappo")
    a = run_episode(env, policy, seed=3)
    b = run_episode(env, policy, seed=3)
    assert a == b
    assert a["illegal_actions"] == 0 and a["arrived"] > 0
    greedy = SharedActorPolicy(env, path, "mappo", deterministic=True)
    obs, _ = env.reset(seed=3)
    greedy.reset(3)
    acts = greedy.act(obs)
    x = torch.as_tensor(np.stack([obs[n]["observation"] for n in env.agents]))
    m = torch.as_tensor(np.stack([obs[n]["action_mask"] for n in env.agents])).bool()
    want = greedy.net(x).masked_fill(~m, float("-inf")).argmax(-1)
    assert [acts[n] for n in env.agents] == want.tolist()


def test_preset_of_names_presets_and_nothing_else():
    for name in ("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Small-v0"):
        assert preset_of(PRESETS[name]) == name
    assert preset_of(PRESETS["CoRE-v0"].replace(load=1.234)) is None


def test_policy_names_find_the_preset_model_or_the_training_preset_one(tmp_path):
    models = tmp_path / "models"
    assert marl_spec("mappo")[0] == "mappo" and marl_spec(f"ippo@{models}") == ("ippo", models)
    assert marl_spec("mappo@") is None and marl_spec("lara") is None
    with pytest.raises(ValueError):
        check_policy_spec("mappo@")
    spec = f"mappo@{models}"
    with pytest.raises(ValueError, match="no trained model .*mara-bench marl"):
        make_policy(spec, core_env.parallel_env(preset="CoRE-Small-v0"), preset="CoRE-Small-v0")
    assert policy_fingerprint(spec) is None
    write_actor_model(model_file(models, "CoRE-Small-v0", "mappo"))
    fp = policy_fingerprint(spec)
    env, policy = make_policy(spec, core_env.parallel_env(preset="CoRE-Small-v0"),
                              preset="CoRE-Small-v0")  # the preset travels with the call
    assert isinstance(policy, SharedActorPolicy)
    # a preset without its own model runs the CoRE-v0 one (here: none, so it is refused)
    with pytest.raises(ValueError, match="CoRE-Heavy-v0.*CoRE-v0"):
        model_path(models, "CoRE-Heavy-v0", "mappo")
    write_actor_model(model_file(models, "CoRE-v0", "mappo"), preset="CoRE-v0")
    assert model_path(models, "CoRE-Heavy-v0", "mappo") == model_file(models, "CoRE-v0",
                                                                        "mappo")
    assert policy_fingerprint(spec) != fp  # the fingerprint covers every model of the name


def test_shared_table_mlp_is_the_mlp_on_node_observations():
    torch.manual_seed(0)
    shared = SharedTableMLP([20, 16, 16, 5], own=6)
    x = torch.randn(4, 3, 20)
    x[..., 6:] = x[:, :1, 6:]  # every node sees its env's table
    x.requires_grad_(True)
    torch.testing.assert_close(shared(x), shared.net(x))
    grads = [torch.autograd.grad(f(x).square().sum(), [x, *shared.parameters()])
             for f in (shared, shared.net)]
    for a, b in zip(grads[0][1:], grads[1][1:], strict=True):
        torch.testing.assert_close(a, b)  # the weights learn the same
    assert list(shared.net.state_dict()) == list(mlp([20, 16, 16, 5]).state_dict())
    for own in (0, 20):
        with pytest.raises(ValueError, match="own: expected 1..19"):
            SharedTableMLP([20, 5], own=own)


def test_model_file_stores_the_episode_curve_as_tensors_and_loads_lists(tmp_path):
    from mara_agents import safe_io

    log = CurveLog()
    for i in range(1000):
        log.step({"episode": {"completion_rate": i / 1000}})
    log.update(entropy=0.5, value_loss=1.0, approx_kl=0.01, explained_variance=0.3,
               normalised_entropy=0.9)
    env = core_env.parallel_env(preset="CoRE-Small-v0")
    path = save_model(tmp_path / "m.pt", "mappo", "CoRE-Small-v0", 0, 1000,
                      time.perf_counter(), "torch", {}, env_layout(env), log, {})
    raw = safe_io.load(path, "MARL model")["curve"]
    assert isinstance(raw["completion_rate"], torch.Tensor)
    assert raw["completion_rate"].dtype == torch.float64 and raw["env_steps"].dtype == torch.int64
    curve = load_model(path)["curve"]
    assert curve == log.as_dict()  # lists again, every value as recorded
