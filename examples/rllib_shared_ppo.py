"""RLlib: one PPO policy shared by every node, with action masking, via
``ParallelPettingZooEnv``.

RLlib's masking module (``ActionMaskingTorchRLModule``, from RLlib's own examples) reads an
observation ``{"observations": ..., "action_mask": ...}`` and sets the logits of masked
actions to the float minimum. :class:`RLlibObservations` renames our ``observation`` key
to ``observations`` and casts the mask to float32; nothing else changes. Every agent maps
to the policy ``"shared"`` (parameter sharing).

RLlib pins an older Gymnasium (``ray[rllib]`` 2.60 requires ``gymnasium==1.2.2``);
core-env supports Gymnasium 1.2 and newer, so install the extra into its own environment::

    python -m venv .venv-rllib && .venv-rllib/bin/pip install -e ".[rllib]"
    .venv-rllib/bin/python examples/rllib_shared_ppo.py --iterations 5 --seed 0

``gamma=1``: the reward shaping is potential-based and only policy-invariant undiscounted.
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium
import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

import core_env

PRESET = "CoRE-Small-v0"
ENV_NAME = "core_env_parallel"


class RLlibObservations(BaseParallelWrapper):
    """``{"observation", "action_mask"}`` -> ``{"observations", "action_mask"}``, mask as
    float32 (the layout RLlib's action-masking module expects)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        k1 = env.action_space(env.possible_agents[0]).n
        base = env.observation_space(env.possible_agents[0])["observation"]
        self._space = gymnasium.spaces.Dict({
            "observations": base,
            "action_mask": gymnasium.spaces.Box(0.0, 1.0, shape=(k1,), dtype=np.float32),
        })

    def observation_space(self, agent: str) -> gymnasium.Space:
        return self._space

    def _convert(self, obs: dict) -> dict:
        return {a: {"observations": o["observation"],
                    "action_mask": o["action_mask"].astype(np.float32)} for a, o in obs.items()}

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._convert(obs), infos

    def step(self, actions: dict):
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return self._convert(obs), rewards, terms, truncs, infos


def make_env(env_config: dict | None = None) -> Any:
    """RLlib env creator: ``env_config`` = ``{"preset": id, **overrides}``."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    cfg = dict(env_config or {})
    preset = cfg.pop("preset", PRESET)
    return ParallelPettingZooEnv(RLlibObservations(core_env.parallel_env(preset=preset, **cfg)))


def build(preset: str = PRESET, seed: int = 0) -> Any:
    """A PPO algorithm with one shared, action-masked policy for every node."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import (
        ActionMaskingTorchRLModule)
    from ray.tune.registry import register_env

    register_env(ENV_NAME, make_env)
    config = (
        PPOConfig()
        .environment(ENV_NAME, env_config={"preset": preset})
        .multi_agent(policies={"shared"},
                     policy_mapping_fn=lambda agent_id, episode, **kwargs: "shared")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
            "shared": RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                                   model_config={"fcnet_hiddens": [64, 64]})}))
        .env_runners(num_env_runners=0)
        .training(gamma=1.0, lambda_=0.95, lr=1e-3, train_batch_size_per_learner=1024,
                  minibatch_size=256, num_epochs=5)
        .debugging(seed=seed)
    )
    return config.build_algo()


def play(algo: Any, seed: int, preset: str = PRESET, sample_seed: int = 0) -> dict[str, Any]:
    """One episode of the shared policy (sampled, masked) on the parallel env; returns
    ``info["episode"]``."""
    import torch

    module = algo.get_module("shared")
    env = RLlibObservations(core_env.parallel_env(preset=preset))
    gen = torch.Generator().manual_seed(sample_seed)
    obs, _ = env.reset(seed=seed)
    while env.agents:
        batch = {key: torch.as_tensor(np.stack([obs[a][key] for a in env.agents]))
                 for key in ("observations", "action_mask")}
        with torch.no_grad():
            logits = module.forward_inference({"obs": batch})["action_dist_inputs"]
        act = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen).squeeze(-1)
        obs, _, _, _, infos = env.step({a: int(x) for a, x in zip(env.agents, act)})
    return infos[env.possible_agents[0]]["episode"]


def evaluate(algo: Any, seeds: tuple[int, ...] = tuple(range(10_000, 10_010)),
             preset: str = PRESET) -> np.ndarray:
    """Completion rate per seed of the shared policy (sampled, masked)."""
    return np.array([play(algo, seed, preset)["completion_rate"] for seed in seeds])


def main(argv: list[str] | None = None) -> None:
    """Command line: a few PPO iterations, then the completion rate of the shared policy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default=PRESET)
    args = parser.parse_args(argv)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        algo = build(args.preset, args.seed)
        for i in range(args.iterations):
            result = algo.train()
            ret = result.get("env_runners", {}).get("episode_return_mean", float("nan"))
            # RLlib sums the agents' returns; every node gets the team reward, so this is
            # N x (completed tasks per episode)
            print(f"iteration {i + 1}: mean episode return summed over the nodes {ret:.2f}")
        rates = evaluate(algo, preset=args.preset)
        print(f"shared policy, {len(rates)} evaluation episodes: completion rate "
              f"{rates.mean():.3f}")
        algo.stop()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
