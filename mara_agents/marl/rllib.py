"""RLlib PPO with one policy shared by every node, through ``ParallelPettingZooEnv`` and
RLlib's action-masking module. Needs the ``rllib`` extra in its own environment (``ray[rllib]``
pins ``gymnasium==1.2.2``): ``make .venv-rllib/.installed``, then::

    .venv-rllib/bin/python -m mara_agents.marl train rllib_ppo --preset CoRE-v0 \
        --env-steps 200000 --out m.pt

RLlib's masking module (``ActionMaskingTorchRLModule``, from RLlib's examples) reads an
observation ``{"observations", "action_mask"}`` and sets the logits of masked actions to the
float minimum; :class:`RLlibObservations` renames our ``observation`` key and casts the mask
to float32. The trained actor (the module's actor encoder and ``pi`` head: Linear-tanh
layers then a linear head) is exported into the plain
:func:`~mara_agents.marl.common.mlp` of the model file, so the benchmark runs it in the main
environment without Ray (:class:`~mara_agents.marl.common.SharedActorPolicy`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

import core_env
from mara_agents.marl.common import CurveLog, PPOSettings, RecordParallel, env_layout, save_model

ENV_NAME = "core_env_parallel"
"""The name the env creator is registered under with ``ray.tune``."""


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


LOGS: list[CurveLog] = []
"""The learning-curve logs of the envs :func:`make_env` built in this process (RLlib builds
its envs itself; with ``num_env_runners=0`` they step in the driver)."""


def make_env(env_config: dict | None = None) -> Any:
    """RLlib env creator: ``env_config`` = ``{"preset": id, **overrides}``."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    cfg = dict(env_config or {})
    preset = cfg.pop("preset", "CoRE-v0")
    LOGS.append(CurveLog())
    env = RecordParallel(core_env.parallel_env(preset=preset, **cfg), LOGS[-1])
    return ParallelPettingZooEnv(RLlibObservations(env))


@dataclasses.dataclass(frozen=True)
class RLlibPPOConfig(PPOSettings):
    """RLlib PPO settings (those of the TorchRL and SB3 runs)."""

    # RLlib's names: train_batch_size_per_learner, minibatch_size, num_epochs, lr,
    # fcnet_hiddens, entropy_coeff, gamma, lambda_ (see build)


def build(preset: str = "CoRE-v0", seed: int = 0, config: RLlibPPOConfig = RLlibPPOConfig()
          ) -> Any:
    """A PPO algorithm with one shared, action-masked policy for every node."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    register_env(ENV_NAME, make_env)
    algo_config = (
        PPOConfig()
        .environment(ENV_NAME, env_config={"preset": preset})
        .multi_agent(policies={"shared"},
                     policy_mapping_fn=lambda agent_id, episode, **kwargs: "shared")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
            "shared": RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                                   model_config={"fcnet_hiddens": list(config.hidden),
                                                 "fcnet_activation": "tanh"})}))
        .env_runners(num_env_runners=0)
        .training(gamma=config.gamma, lambda_=config.gae_lambda, lr=config.lr,
                  train_batch_size_per_learner=config.steps_per_update,
                  minibatch_size=config.minibatch_size, num_epochs=config.epochs,
                  entropy_coeff=config.ent_coef)
        .debugging(seed=seed)
    )
    return algo_config.build_algo()


def export_actor(module: Any) -> dict[str, Any]:
    """The shared module's actor (actor encoder, then ``pi``) as the ``state_dict`` of an
    :func:`~mara_agents.marl.common.mlp` with the same sizes (layers 0, 2, ... of the
    ``Sequential``)."""
    state = module.state_dict()
    enc = sorted((k for k in state if k.startswith("encoder.actor_encoder.net.mlp.")
                  and k.endswith(".weight")), key=lambda k: int(k.split(".")[-2]))
    names = [k[:-len(".weight")] for k in enc] + ["pi.net.mlp.0"]
    out = {}
    for i, name in enumerate(names):
        out[f"{2 * i}.weight"] = state[f"{name}.weight"].detach().clone()
        out[f"{2 * i}.bias"] = state[f"{name}.bias"].detach().clone()
    return out


def train(preset: str, env_steps: int, seed: int, out: str | Path,
          config: RLlibPPOConfig = RLlibPPOConfig(), threads: int = 1) -> Path:
    """Train RLlib PPO for (at least) ``env_steps`` slots and write the model file (the
    exported actor); returns ``out``."""
    import ray
    import torch

    started = time.perf_counter()
    torch.set_num_threads(threads)
    layout = env_layout(core_env.parallel_env(preset=preset))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        algo = build(preset, seed, config)
        for _ in range(-(-env_steps // config.steps_per_update)):
            algo.train()
        actor = export_actor(algo.get_module("shared"))
        algo.stop()
    finally:
        ray.shutdown()
    log = max(LOGS, key=lambda lg: lg.steps)
    sizes = [layout["obs_dim"], *config.hidden, layout["n_actions"]]
    cfg = {**dataclasses.asdict(config), "hidden": list(config.hidden),
           "actor": {"sizes": sizes, "activation": "tanh"}}
    return save_model(out, "rllib_ppo", preset, seed, env_steps, started, "ray", cfg, layout,
                      log, {"actor_state": actor})
