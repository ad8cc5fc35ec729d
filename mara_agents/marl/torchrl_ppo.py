"""MAPPO and IPPO with TorchRL's own objectives (``torchrl.objectives.MAPPOLoss`` and
``IPPOLoss``) on ``num_envs`` envs of the batched simulator at once
(:class:`~mara_agents.marl.vector.CoreTorchEnv`, the keys and specs of ``PettingZooWrapper``
with an env dimension; ``num_envs=0``: the PettingZoo env through ``PettingZooWrapper``, the
reference path). Needs the ``torchrl`` extra (``pip install -e ".[torchrl]"``)::

    python -m mara_agents.marl train mappo --preset CoRE-v0 --env-steps 200000 --out m.pt

Both train one actor shared by every node (an :func:`~mara_agents.marl.common.mlp` over the
node's own features, masked with its ``action_mask``); they differ in the critic: ``mappo``
(Yu et al. 2022) gives every node one value of the env's global ``state()``, ``ippo`` (de Witt
et al. 2020) each node a value of its own features (shared weights). The loop is TorchRL's
multi-agent PPO tutorial's: a ``Collector`` gathers ``frames_per_batch`` env steps (all the
envs' together), the advantage is computed once (``MultiAgentGAE``), then ``epochs`` passes
of minibatches. Why not BenchMARL: ``docs/integrations.md``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import torch

import core_env
from core_env.layout import observation_layout
from mara_agents.marl.common import (
    BatchedPPOSettings,
    CurveLog,
    RecordParallel,
    SharedTableMLP,
    env_layout,
    mlp,
    save_model,
)
from mara_agents.marl.vector import GROUP, CoreTorchEnv


@dataclasses.dataclass(frozen=True)
class TorchRLPPOConfig(BatchedPPOSettings):
    """MAPPO / IPPO settings (TorchRL's tutorial values)."""

    clip: float = 0.2
    """PPO ratio clip (TorchRL's ``clip_epsilon``)."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    shared_table: bool = True
    """Compute the node networks' first layer on the task table, which every node's
    observation repeats, once per env (:class:`~mara_agents.marl.common.SharedTableMLP`: the
    same networks and weights; False: plain :func:`~mara_agents.marl.common.mlp`, the
    earlier models' arithmetic)."""
    # TorchRL's names: frames_per_batch (steps_per_update), entropy_coeff, lmbda


STAT_KEYS = {"entropy": "entropy", "value_loss": "loss_critic", "approx_kl": "kl_approx",
             "explained_variance": "explained_variance"}
"""Our update statistics (:data:`~mara_agents.marl.common.UPDATE_KEYS`) by the name of
TorchRL's PPO loss output that gives them (per node, mean over the minibatches)."""


class CentralValue(torch.nn.Module):
    """MAPPO's critic: one value from the global state, the same for every node.
    ``state float32[..., S] -> value float32[..., N, 1]``."""

    def __init__(self, net: torch.nn.Module, n_nodes: int) -> None:
        super().__init__()
        self.net, self.n_nodes = net, n_nodes

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        v = self.net(state).unsqueeze(-2)
        return v.expand(*v.shape[:-2], self.n_nodes, 1)


def train(algorithm: str, preset: str, env_steps: int, seed: int, out: str | Path,
          config: TorchRLPPOConfig = TorchRLPPOConfig(), threads: int = 1) -> Path:
    """Train ``mappo`` or ``ippo`` for ``env_steps`` slots and write the model file. Env b of
    ``config.num_envs`` plays the episodes of seed ``seed + b`` (``num_envs=0``: from the
    seed's second episode on, as ``PettingZooWrapper`` resets once when it is seeded and the
    collector again).

    Returns:
        ``out``.
    """
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper
    from torchrl.modules import MaskedCategorical, ProbabilisticActor
    from torchrl.objectives import IPPOLoss, MAPPOLoss

    if algorithm not in ("mappo", "ippo"):
        raise ValueError(f"algorithm: expected 'mappo' or 'ippo', got {algorithm!r}")
    started = time.perf_counter()
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    log = CurveLog()
    base = core_env.parallel_env(preset=preset)
    layout = env_layout(base)
    if config.num_envs:
        env = CoreTorchEnv(preset, config.num_envs, seed=seed, log=log)
    else:
        env = PettingZooWrapper(RecordParallel(base, log), return_state=True,
                                categorical_actions=True, seed=seed)
    n, d, s, k1 = (layout[x] for x in ("n_nodes", "obs_dim", "state_dim", "n_actions"))
    sizes = [d, *config.hidden, k1]
    own = observation_layout(n, k1 - 1).task_block.start  # the node's own columns

    def node_net(net_sizes: list[int]) -> torch.nn.Module:
        return SharedTableMLP(net_sizes, own) if config.shared_table else mlp(net_sizes)

    actor_net = node_net(sizes)
    obs_key = (GROUP, "observation", "observation")
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=[obs_key], out_keys=[(GROUP, "logits")]),
        in_keys={"logits": (GROUP, "logits"), "mask": (GROUP, "action_mask")},
        out_keys=[(GROUP, "action")], distribution_class=MaskedCategorical,
        return_log_prob=True)
    if algorithm == "mappo":
        critic = TensorDictModule(CentralValue(mlp([s, *config.hidden, 1]), n),
                                  in_keys=["state"], out_keys=[(GROUP, "state_value")])
        loss_cls = MAPPOLoss
    else:
        critic = TensorDictModule(node_net([d, *config.hidden, 1]), in_keys=[obs_key],
                                  out_keys=[(GROUP, "state_value")])
        loss_cls = IPPOLoss
    loss = loss_cls(actor, critic, clip_epsilon=config.clip,
                    entropy_coeff=config.ent_coef)
    loss.set_keys(reward=(GROUP, "reward"), action=(GROUP, "action"),
                  value=(GROUP, "state_value"), done=(GROUP, "done"),
                  terminated=(GROUP, "terminated"))
    loss.make_value_estimator(gamma=config.gamma, lmbda=config.gae_lambda)
    optim = torch.optim.Adam(loss.parameters(), config.lr,
                             **({"fused": True} if config.fused_adam else {}))
    batches = -(-env_steps // config.steps_per_update)
    collector = Collector(env, actor, frames_per_batch=config.steps_per_update,
                          total_frames=batches * config.steps_per_update,
                          auto_register_policy_transforms=False)
    buffer = ReplayBuffer(storage=LazyTensorStorage(config.steps_per_update),
                          sampler=SamplerWithoutReplacement(), batch_size=config.minibatch_size)
    for batch in collector:
        with torch.no_grad():
            loss.value_estimator(batch, params=loss.critic_network_params,
                                 target_params=loss.target_critic_network_params)
        buffer.extend(batch.reshape(-1).exclude("next"))  # the loss reads no "next" entry
        stats: dict[str, list[float]] = {k: [] for k in STAT_KEYS}
        for _ in range(config.epochs):
            for _ in range(config.steps_per_update // config.minibatch_size):
                parts = loss(buffer.sample())
                total = parts["loss_objective"] + parts["loss_critic"] + parts["loss_entropy"]
                optim.zero_grad()
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), config.max_grad_norm)
                optim.step()
                for ours, theirs in STAT_KEYS.items():
                    if theirs in parts.keys():
                        stats[ours].append(float(parts[theirs].detach().mean()))
        log.update(**{k: float(np.mean(v)) for k, v in stats.items() if v})
        collector.update_policy_weights_()
    collector.shutdown()
    plain = actor_net.net if config.shared_table else actor_net  # the mlp's weights
    cfg = {**dataclasses.asdict(config), "hidden": list(config.hidden),
           "actor": {"sizes": sizes, "activation": "tanh"}}
    return save_model(out, algorithm, preset, seed, env_steps, started, "torchrl", cfg,
                      layout, log, {"actor_state": dict(plain.state_dict())})
