"""Parameter-shared, masked PPO (Stable-Baselines3) over the PettingZoo env via SuperSuit.

SuperSuit turns the parallel env into a vector env with one entry per node
(``pettingzoo_env_to_vec_env_v1``) and stacks copies of it (``concat_vec_envs_v1``); one
PPO network then acts for every node (parameter sharing). The PPO is sb3-contrib's
``MaskablePPO``: :class:`SeededSB3VecEnv` hands it each node's ``action_mask`` through
``env_method("action_masks")``, so no node picks an empty slot. (Plain ``PPO`` also runs on
this vector env, but unmasked it spends most of a short run picking empty slots, which run
as idle, and ends below the random policy.)

Two known rough edges of SuperSuit's SB3 wrapper are handled here, on our side, by
:class:`SeededSB3VecEnv`:

* it has no working ``seed``: SB3 calls ``env.seed(seed)`` when the model is seeded, which
  raises (SuperSuit's ``ConcatVecEnv`` has no ``seed``), and its ``reset()`` never passes a
  seed on, so every run would draw fresh workloads. The wrapper keeps the seed and gives it
  to the next ``reset`` (copy i of the env gets ``seed + i``).
* SB3 bootstraps the value of a *truncated* episode only when the final info carries
  ``"TimeLimit.truncated": True``; SuperSuit folds truncation into ``done`` and keeps only
  what the env wrote in its infos. ``core_env`` writes that key; the wrapper also sets it
  from SuperSuit's truncation flags, so an env that does not still bootstraps correctly.

And one clash of conventions: SB3 reads ``info["episode"]`` as its ``Monitor`` record
(``{"r": return, "l": length}``), while ``core_env`` puts its episode statistics there. The
wrapper adds ``r`` and ``l`` (the episode's return and length) next to our keys, so SB3 logs
``rollout/ep_rew_mean`` = mean return = mean number of completed tasks.

The nodes share one network and see nearly the same observation, so a greedy policy would
send them all to the same task (the env gives it to the lowest-numbered nodes up to the
task's cap and idles the rest); the evaluation samples from the policy instead.

    pip install -e ".[sb3]"
    python examples/sb3_supersuit_ppo.py --timesteps 65536 --seed 0
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import supersuit as ss
from sb3_contrib import MaskablePPO
from supersuit.vector.sb3_vector_wrapper import SB3VecEnvWrapper

import core_env

PRESET = "CoRE-Small-v0"
EVAL_SEEDS = tuple(range(10_000, 10_020))
"""Evaluation seeds, disjoint from the training seeds (workloads depend on the seed alone)."""


class SeededSB3VecEnv(SB3VecEnvWrapper):
    """SuperSuit's SB3 vector env with a working ``seed``, explicit truncation infos,
    SB3's ``r``/``l`` keys in ``info["episode"]`` and MaskablePPO's ``action_masks``."""

    def __init__(self, venv: Any) -> None:
        super().__init__(venv)
        self._next_seed: int | None = None
        self._masks = np.ones((self.num_envs, self.action_space.n), dtype=bool)

    def has_attr(self, attr_name: str) -> bool:
        """Only ``action_masks`` (what MaskablePPO asks for) is provided."""
        return attr_name == "action_masks"

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None,
                   **method_kwargs: Any) -> list[Any]:
        """``env_method("action_masks")``: bool[K + 1] per entry, from the last observation."""
        if method_name != "action_masks":
            raise AttributeError(f"method_name: expected 'action_masks', got {method_name!r}")
        return list(self._masks)

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Use ``seed`` at the next :meth:`reset` (SB3 calls this when the model is seeded)."""
        self._next_seed = seed
        return [seed] * self.num_envs

    def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
        """Reset every copy, with the seed given here or stored by :meth:`seed`."""
        seed = self._next_seed if seed is None else seed
        self._next_seed = None
        observations, self.reset_infos = self.venv.reset(seed=seed, options=options)
        self._masks = observations["action_mask"].astype(bool)
        return observations

    def step_wait(self) -> Any:
        """SB3's ``(obs, rewards, dones, infos)``, with ``TimeLimit.truncated`` set on
        truncation and SB3's ``r``/``l`` added to ``info["episode"]``."""
        observations, rewards, terminations, truncations, infos = self.venv.step_wait()
        for i in np.flatnonzero(truncations):
            if not terminations[i]:
                infos[i]["TimeLimit.truncated"] = True
        for info in infos:
            stats = info.get("episode")
            if stats is not None and "r" not in stats:
                info["episode"] = {**stats, "r": stats["return"], "l": stats["length"]}
        self._masks = observations["action_mask"].astype(bool)
        return observations, rewards, np.logical_or(terminations, truncations), infos


def make_vec_env(preset: str = PRESET, num_copies: int = 2, **overrides: Any) -> SeededSB3VecEnv:
    """An SB3 vector env of ``num_copies`` parallel envs with one entry per node.

    Args:
        preset: a ``core_env`` preset id.
        num_copies: independent environments (each gives ``n_nodes`` entries).
        **overrides: configuration overrides for :func:`core_env.parallel_env`.
    """
    par = core_env.parallel_env(preset=preset, **overrides)
    vec = ss.pettingzoo_env_to_vec_env_v1(par)
    vec = ss.concat_vec_envs_v1(vec, num_copies, num_cpus=0, base_class="gymnasium")
    return SeededSB3VecEnv(vec)


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
                actions = {a: int(x) for a, x in zip(env.agents, act)}
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
