"""Parameter-shared, masked PPO (Stable-Baselines3) over the PettingZoo env via SuperSuit.

SuperSuit turns the parallel env into a vector env with one entry per node
(``pettingzoo_env_to_vec_env_v1``) and stacks copies of it (``concat_vec_envs_v1``); one
PPO network then acts for every node (parameter sharing). The PPO is sb3-contrib's
``MaskablePPO``: :class:`SeededSB3VecEnv` hands it each node's ``action_mask`` through
``env_method("action_masks")``, so no node picks an empty slot. (Plain ``PPO`` also runs on
this vector env, but unmasked it spends most of a short run picking empty slots, which run
as idle, and ends below the random policy.)

SuperSuit's SB3 wrapper has rough edges (no working ``seed``, truncation flags, the clash over
``info["episode"]``); :class:`core_env.integrations.sb3.SeededSB3VecEnv` handles them (its
module docstring says how).

The nodes share one network and see nearly the same observation, so a greedy policy would
send them all to the same task (the env gives it to the lowest-numbered nodes up to the
task's cap and idles the rest); the evaluation samples from the policy instead.

    pip install -e ".[sb3]"
    python examples/sb3_supersuit_ppo.py --timesteps 65536 --seed 0
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sb3_contrib import MaskablePPO

import core_env
from core_env.integrations.sb3 import SeededSB3VecEnv, make_vec_env  # noqa: F401

PRESET = "CoRE-Small-v0"
EVAL_SEEDS = tuple(range(10_000, 10_020))
"""Evaluation seeds, disjoint from the training seeds (workloads depend on the seed alone)."""


def train(timesteps: int = 65_536, seed: int = 0, preset: str = PRESET, num_copies: int = 2,
          n_steps: int = 128, n_epochs: int = 5, verbose: int = 0) -> MaskablePPO:
    """Train one MaskablePPO policy shared by every node.

    Args:
        timesteps: node-steps (each env step gives ``n_nodes * num_copies`` of them).
        seed: seeds the model and the environments.
        preset: a ``core_env`` preset id.
        num_copies: environments stepped together.
        n_steps: rollout length per entry per update.
        n_epochs: optimisation passes over each rollout.
        verbose: SB3's verbosity.
    """
    env = make_vec_env(preset, num_copies)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=n_steps, batch_size=256, n_epochs=n_epochs,
                learning_rate=1e-3, gamma=1.0, gae_lambda=0.95, ent_coef=0.01,
                policy_kwargs={"net_arch": [64, 64]}, seed=seed, verbose=verbose, device="cpu")
    model.learn(total_timesteps=timesteps)
    return model


def evaluate(policy: str | MaskablePPO, seeds: tuple[int, ...] = EVAL_SEEDS, preset: str = PRESET,
             rng_seed: int = 0) -> np.ndarray:
    """Completion rate of each evaluation episode on the PettingZoo env.

    Args:
        policy: a trained model (sampled, masked; every node's observation in one batch), or
            ``"random"`` for the masked random policy (each node uniform over its legal
            actions).
        seeds: one episode per seed.
        preset: a ``core_env`` preset id.
        rng_seed: seed of the random policy's generator.

    Returns:
        float64[len(seeds)] completion rates.
    """
    if isinstance(policy, str) and policy != "random":
        raise ValueError(f"policy: expected a model or 'random', got {policy!r}")
    env = core_env.parallel_env(preset=preset)
    rng = np.random.default_rng(rng_seed)
    rates = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        while env.agents:
            if isinstance(policy, str):
                actions = {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"])))
                           for a in env.agents}
            else:
                batch = {key: np.stack([obs[a][key] for a in env.agents])
                         for key in ("observation", "action_mask")}
                act, _ = policy.predict(batch, action_masks=batch["action_mask"].astype(bool),
                                        deterministic=False)
                actions = {a: int(x) for a, x in zip(env.agents, act, strict=False)}
            obs, _, _, _, infos = env.step(actions)
        rates.append(infos[env.possible_agents[0]]["episode"]["completion_rate"])
    return np.asarray(rates)


def main(argv: list[str] | None = None) -> None:
    """Command line: train, then print the paired comparison with the random policy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=65_536)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 is fastest for these small networks)")
    parser.add_argument("--preset", default=PRESET)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    model = train(args.timesteps, args.seed, args.preset, verbose=1)
    trained = evaluate(model, preset=args.preset)
    rand = evaluate("random", preset=args.preset)
    diff = trained - rand
    print(f"trained {args.timesteps} node-steps in {time.perf_counter() - start:.0f} s")
    print(f"completion rate over {len(EVAL_SEEDS)} seeds: shared MaskablePPO {trained.mean():.3f}, "
          f"random {rand.mean():.3f}, paired difference {diff.mean():+.3f} "
          f"(+- {diff.std(ddof=1) / np.sqrt(len(diff)):.3f} s.e.)")


if __name__ == "__main__":
    main()
