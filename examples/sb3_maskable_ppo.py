"""Train sb3-contrib's MaskablePPO on the centralised Gymnasium view of ``CoRE-Small-v0``.

One agent picks every node's action at once (``MultiDiscrete([K + 1] * N)``); the env's
``action_masks()`` gives MaskablePPO the legal actions of every node, so the policy never
picks an empty slot. The learned policy is then compared with the masked random policy on
the same evaluation seeds (the same tasks and noise for both: paired).

    pip install -e ".[sb3]"
    python examples/sb3_maskable_ppo.py --timesteps 2048 --seed 0

``gamma=1``: the env's reward shaping is potential-based, so the shaped return equals the
number of completed tasks only without discounting (docs/env.md, "Reward").
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium
import numpy as np

import core_env  # noqa: F401  (registers core_env/<id> with Gymnasium)

ENV_ID = "core_env:core_env/CoRE-Small-v0"
EVAL_SEEDS = tuple(range(10_000, 10_020))
"""Evaluation seeds, disjoint from training seeds (workloads depend on the seed alone)."""


def make_env(env_id: str = ENV_ID, **overrides: Any) -> gymnasium.Env:
    """The centralised Gymnasium view (``gymnasium.make`` with keyword overrides)."""
    return gymnasium.make(env_id, **overrides)


def train(timesteps: int = 2048, seed: int = 0, env_id: str = ENV_ID, n_steps: int = 512,
          n_epochs: int = 5, verbose: int = 0) -> Any:
    """Train a MaskablePPO policy (``MultiInputPolicy`` over the dict observation).

    Args:
        timesteps: environment steps (one step = one slot, all nodes at once).
        seed: seeds the model (torch, action sampling) and the training env.
        env_id: a ``core_env:core_env/<id>`` Gymnasium id.
        n_steps: rollout length per update.
        n_epochs: optimisation passes over each rollout.
        verbose: SB3's verbosity.

    Returns:
        The trained ``sb3_contrib.MaskablePPO`` model.
    """
    from sb3_contrib import MaskablePPO

    env = make_env(env_id)
    env.reset(seed=seed)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=n_steps, batch_size=128,
                        n_epochs=n_epochs, learning_rate=1e-3,
                        policy_kwargs={"net_arch": [64, 64]}, gamma=1.0, gae_lambda=0.95,
                        ent_coef=0.01, seed=seed, verbose=verbose, device="cpu")
    model.learn(total_timesteps=timesteps)
    return model


def evaluate(policy: str | Any, seeds: tuple[int, ...] = EVAL_SEEDS, env_id: str = ENV_ID,
             rng_seed: int = 0) -> np.ndarray:
    """Completion rate of each evaluation episode.

    Args:
        policy: a trained MaskablePPO model (greedy, masked), or ``"random"`` for the
            masked random policy (each node uniform over its legal actions).
        seeds: one episode per seed.
        env_id: a ``core_env:core_env/<id>`` Gymnasium id.
        rng_seed: seed of the random policy's generator.

    Returns:
        float64[len(seeds)] completion rates.
    """
    env = make_env(env_id)
    rng = np.random.default_rng(rng_seed)
    n_nodes = env.action_space.shape[0]
    rates = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            masks = env.unwrapped.action_masks()
            if isinstance(policy, str):
                if policy != "random":
                    raise ValueError(f"policy: expected a model or 'random', got {policy!r}")
                legal = masks.reshape(n_nodes, -1)
                action = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
            else:
                action, _ = policy.predict(obs, action_masks=masks, deterministic=True)
            obs, _, terminated, truncated, info = env.step(np.asarray(action, dtype=np.int64))
            done = terminated or truncated
        rates.append(info["episode"]["completion_rate"])
    return np.asarray(rates)


def main(argv: list[str] | None = None) -> None:
    """Command line: train, then print the paired comparison with the random policy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 is fastest for these small networks)")
    parser.add_argument("--env-id", default=ENV_ID)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    model = train(args.timesteps, args.seed, args.env_id, verbose=1)
    trained, rand = evaluate(model, env_id=args.env_id), evaluate("random", env_id=args.env_id)
    diff = trained - rand
    print(f"trained {args.timesteps} steps in {time.perf_counter() - start:.0f} s")
    print(f"completion rate over {len(EVAL_SEEDS)} seeds: MaskablePPO {trained.mean():.3f}, "
          f"random {rand.mean():.3f}, paired difference {diff.mean():+.3f} "
          f"(+- {diff.std(ddof=1) / np.sqrt(len(diff)):.3f} s.e.)")


if __name__ == "__main__":
    main()
