"""sb3-contrib's MaskablePPO on the centralised Gymnasium view: one agent picks every node's
action at once (``MultiDiscrete([K + 1] * N)``) from the global ``state``, with the env's
``action_masks()``. It trains on ``num_envs`` envs of the batched simulator at once
(:class:`~mara_agents.marl.vector.CoreVecEnv`; ``num_envs=0``: one
:class:`~core_env.central.CentralCoreEnv`, the reference path). Needs the ``sb3`` extra
(``pip install -e ".[sb3]"``).

    python -m mara_agents.marl train maskable_ppo --preset CoRE-v0 --env-steps 200000 --out m.pt

The model file holds the policy network's ``state_dict`` and the settings to rebuild it
(``MaskableMultiInputActorCriticPolicy`` on the env's spaces), not SB3's zip, whose load
unpickles objects. :class:`MaskablePPOPolicy` runs it greedily on the PettingZoo env.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mara_agents.marl.common import (ACTIVATIONS, BatchedPPOSettings, CurveLog, RecordGym,
                                     check_layout, env_layout, load_model, save_model)


@dataclasses.dataclass(frozen=True)
class MaskablePPOConfig(BatchedPPOSettings):
    """MaskablePPO settings (SB3's defaults but for the batch size, epochs, width and
    entropy bonus, which match the TorchRL runs)."""

    def sb3_kwargs(self) -> dict[str, Any]:
        """These settings under SB3's names (``MaskablePPO(**kwargs)``; ``hidden`` is the
        policy's ``net_arch``; ``n_steps`` is per env)."""
        return {"n_steps": self.steps_per_env, "batch_size": self.minibatch_size,
                "n_epochs": self.epochs, "learning_rate": self.lr, "ent_coef": self.ent_coef,
                "gamma": self.gamma, "gae_lambda": self.gae_lambda}


def _policy_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    hidden = config["hidden"] if "hidden" in config else config["net_arch"]  # older files
    return {"net_arch": list(hidden), "activation_fn": ACTIVATIONS["tanh"]}


def train(preset: str, env_steps: int, seed: int, out: str | Path,
          config: MaskablePPOConfig = MaskablePPOConfig(), threads: int = 1) -> Path:
    """Train MaskablePPO for ``env_steps`` slots on ``preset``'s centralised view and write
    the model file; returns ``out``. Env b of ``config.num_envs`` plays the episodes of seed
    ``seed + b`` (SB3's ``VecEnv.seed``)."""
    import gymnasium
    from sb3_contrib import MaskablePPO

    import core_env
    from mara_agents.marl.vector import CoreVecEnv

    started = time.perf_counter()
    torch.set_num_threads(threads)
    log = CurveLog()
    if config.num_envs:
        env = CoreVecEnv(preset, config.num_envs, seed=seed, log=log)
    else:
        env = RecordGym(gymnasium.make(f"core_env:core_env/{preset}"), log)
        env.reset(seed=seed)
    model = MaskablePPO("MultiInputPolicy", env, seed=seed, device="cpu", verbose=0,
                        policy_kwargs=_policy_kwargs(dataclasses.asdict(config)),
                        **config.sb3_kwargs())
    model.learn(total_timesteps=env_steps)
    layout = env_layout(core_env.parallel_env(preset=preset))
    cfg = {**dataclasses.asdict(config), "hidden": list(config.hidden)}
    return save_model(out, "maskable_ppo", preset, seed, env_steps, started, "sb3-contrib",
                      cfg, layout, log, {"policy_state": dict(model.policy.state_dict())})


class MaskablePPOPolicy:
    """A trained MaskablePPO model as a :class:`~mara_agents.policy.Policy` on the PettingZoo
    env: the joint action from the env's ``state()`` and every node's mask, greedy
    (``deterministic=True``, the default) or sampled from a generator seeded by
    :meth:`reset`."""

    def __init__(self, env: Any, path: str | Path, deterministic: bool = True) -> None:
        from gymnasium import spaces
        from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy

        blob = load_model(path, "maskable_ppo")
        check_layout(blob, env, path)
        self.env = env.unwrapped
        n, k1 = blob["layout"]["n_nodes"], blob["layout"]["n_actions"]
        obs_space = spaces.Dict({"state": self.env.state_space,
                                 "action_mask": spaces.Box(0, 1, (n, k1), np.int8)})
        self.net = MaskableMultiInputActorCriticPolicy(
            obs_space, spaces.MultiDiscrete([k1] * n), lambda _: 0.0,
            **_policy_kwargs(blob["config"]))
        try:
            self.net.load_state_dict(blob["policy_state"])
        except (RuntimeError, KeyError) as e:
            raise ValueError(f"{path}: policy weights do not fit its settings ({e})") from e
        self.net.set_training_mode(False)
        self.deterministic = deterministic
        self.agents = list(self.env.possible_agents)
        self.gen = torch.Generator().manual_seed(0)

    def reset(self, seed: int | None = None) -> None:
        self.gen = torch.Generator().manual_seed(0 if seed is None else int(seed))

    def act(self, observations: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
        masks = np.stack([observations[a]["action_mask"] if a in observations
                          else np.eye(1, self._k1(), dtype=np.int8)[0] for a in self.agents])
        obs = {"state": torch.as_tensor(self.env.state())[None],
               "action_mask": torch.as_tensor(masks)[None]}
        with torch.no_grad():
            dist = self.net.get_distribution(obs, action_masks=masks.astype(bool).ravel())
            if self.deterministic:
                actions = dist.get_actions(deterministic=True)[0]
            else:
                actions = torch.stack([torch.multinomial(d.probs[0], 1, generator=self.gen)[0]
                                       for d in dist.distributions])
        return {a: int(x) for a, x in zip(self.agents, actions) if a in observations}

    def _k1(self) -> int:
        return int(self.env.action_space(self.agents[0]).n)
