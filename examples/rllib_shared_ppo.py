"""RLlib: one PPO policy shared by every node, with action masking, via
``ParallelPettingZooEnv``.

The glue is package code, in :mod:`mara_agents.marl.rllib`: RLlib's masking module
(``ActionMaskingTorchRLModule``, from RLlib's own examples) reads an observation
``{"observations": ..., "action_mask": ...}`` and sets the logits of masked actions to the
float minimum; ``RLlibObservations`` renames our ``observation`` key to ``observations`` and
casts the mask to float32; ``build`` maps every agent to the policy ``"shared"`` (parameter
sharing). ``mara-bench marl`` trains the same algorithm for its full budget
(``python -m mara_agents.marl train rllib_ppo``).

RLlib pins an older Gymnasium (``ray[rllib]`` 2.60 requires ``gymnasium==1.2.2``);
core-env supports Gymnasium 1.2 and newer, so install the extra into its own environment::

    python -m venv .venv-rllib && .venv-rllib/bin/pip install -e ".[agents,rllib]"
    .venv-rllib/bin/python examples/rllib_shared_ppo.py --iterations 5 --seed 0

``gamma=1``: the reward shaping is potential-based and only policy-invariant undiscounted.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import core_env
from mara_agents.marl.rllib import RLlibObservations, RLlibPPOConfig, make_env  # noqa: F401
from mara_agents.marl.rllib import build as build_ppo

PRESET = "CoRE-Small-v0"
CONFIG = RLlibPPOConfig(steps_per_update=1024)
"""The package's settings with a smaller batch per iteration (a quick example)."""


def build(preset: str = PRESET, seed: int = 0) -> Any:
    """A PPO algorithm with one shared, action-masked policy for every node."""
    return build_ppo(preset, seed, CONFIG)


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
        obs, _, _, _, infos = env.step({a: int(x) for a, x in zip(env.agents, act, strict=False)})
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
