"""RLlib (optional extra ``[rllib]``, its own environment: ``make test-rllib``): one PPO
training iteration of the shared, action-masked policy through ``ParallelPettingZooEnv``
(examples/rllib_shared_ppo.py), and masked sampling that never plays a forbidden action."""

from __future__ import annotations

import pytest

pytest.importorskip("ray.rllib", reason="the [rllib] extra is not installed; it pins "
                    "gymnasium 1.2, so run it in its own environment: make test-rllib")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
import ray  # noqa: E402

import core_env  # noqa: E402

from .conftest import load_example  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.usefixtures("one_torch_thread")]

ex = load_example("rllib_shared_ppo")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_observation_adapter():
    env = ex.make_env({"preset": "CoRE-Small-v0", "n_nodes": 3})
    assert sorted(env.possible_agents) == ["node_0", "node_1", "node_2"]  # RLlib: set order
    obs, _ = env.reset(seed=0)
    for agent, o in obs.items():
        assert set(o) == {"observations", "action_mask"}
        assert o["action_mask"].dtype == np.float32 and o["action_mask"][0] == 1.0
        assert env.observation_space[agent].contains(o)
    assert isinstance(env.action_space["node_0"], gymnasium.spaces.Discrete)


@pytest.mark.slow
def test_one_ppo_iteration_and_masked_play(local_ray):
    algo = ex.build(seed=0)
    try:
        result = algo.train()
        runners = result["env_runners"]
        assert runners["num_episodes"] >= 1
        assert np.isfinite(runners["episode_return_mean"])
        for seed in (10_000, 10_001):
            stats = ex.play(algo, seed)
            assert stats["illegal_actions"] == 0  # the masked logits never sample an empty slot
            assert stats["arrived"] > 0 and 0.0 <= stats["completion_rate"] <= 1.0
    finally:
        algo.stop()


def test_gymnasium_version_is_the_one_rllib_pins():
    """Run under ray[rllib]'s gymnasium: core-env must work with it (see docs)."""
    env = gymnasium.make("core_env:core_env/CoRE-Small-v0")
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    print("gymnasium", gymnasium.__version__, "ray", ray.__version__, "core_env",
          core_env.__version__)


@pytest.mark.slow
def test_exported_actor_gives_the_module_logits_and_trains_a_model(local_ray, tmp_path):
    """The model file's plain MLP is the RLlib module's actor: the same logits on legal
    actions (RLlib puts the float minimum on masked ones, the policy -inf)."""
    import torch

    from mara_agents.marl import make_marl_policy
    from mara_agents.marl.common import load_model, mlp
    from mara_agents.marl.rllib import export_actor, train
    from mara_agents.policy import run_episode

    algo = ex.build(seed=0)
    try:
        algo.train()
        module = algo.get_module("shared")
        state = export_actor(module)
        env = ex.RLlibObservations(core_env.parallel_env(preset="CoRE-Small-v0"))
        obs, _ = env.reset(seed=5)
        batch = {key: torch.as_tensor(np.stack([obs[a][key] for a in env.agents]))
                 for key in ("observations", "action_mask")}
        with torch.no_grad():
            want = module.forward_inference({"obs": dict(batch)})["action_dist_inputs"]
        sizes = [batch["observations"].shape[1], *ex.CONFIG.hidden, want.shape[1]]
        net = mlp(sizes)
        net.load_state_dict(state)
        with torch.no_grad():
            got = net(batch["observations"])
        legal = batch["action_mask"].bool()
        assert torch.allclose(got[legal], want[legal], atol=1e-5)
    finally:
        algo.stop()
    ray.shutdown()  # train() starts its own Ray
    path = train("CoRE-Small-v0", 256, 0, tmp_path / "m.pt",
                 config=ex.RLlibPPOConfig(steps_per_update=256, minibatch_size=128,
                                                    epochs=1))
    blob = load_model(path, "rllib_ppo")
    assert blob["curve"]["steps"] >= 256 and blob["library"]["name"] == "ray"
    par = core_env.parallel_env(preset="CoRE-Small-v0")
    policy = make_marl_policy(par, "rllib_ppo", path)
    stats = run_episode(par, policy, seed=2)
    assert stats["illegal_actions"] == 0 and stats == run_episode(par, policy, seed=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # for the fixture
