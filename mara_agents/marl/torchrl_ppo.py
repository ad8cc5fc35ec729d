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
    SlotSharedActor,
    env_layout,
    mlp,
    save_model,
)
from mara_agents.marl.decoding import SequentialActor, check_decoding
from mara_agents.marl.vector import GROUP, CoreTorchEnv


@dataclasses.dataclass(frozen=True)
class TorchRLPPOConfig(BatchedPPOSettings):
    """MAPPO / IPPO settings (TorchRL's tutorial values)."""

    clip: float = 0.2
    """PPO ratio clip (TorchRL's ``clip_epsilon``)."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    decoding: str = "sequential"
    """How the nodes of a slot choose, in training and when the model runs
    (:data:`~mara_agents.marl.decoding.DECODINGS`): ``"sequential"``, node by node under
    sequential masks (:class:`~mara_agents.marl.decoding.SequentialActor`; no capacity
    conflicts); ``"simultaneous"``, each node from its own mask (the earlier models)."""
    value_norm: bool = True
    """Normalise the value targets by their running mean and variance (:class:`ValueNorm`,
    MAPPO's value normalisation); the critic learns the normalised targets with a squared
    error. False: TorchRL's loss on the raw targets (smooth L1), the earlier models."""
    separate_clip: bool = True
    """Clip the actor's and the critic's gradients to ``max_grad_norm`` each (False: jointly,
    which lets the critic's larger gradients shrink the actor's steps)."""
    actor_kind: str = "mlp"
    """The shared actor (the model file's ``config["actor"]`` then describes it): ``"mlp"`` (an MLP over the node's flat observation, its output one
    logit per action) or ``"slot_shared"`` (:class:`~mara_agents.marl.common.SlotSharedActor`:
    one network scores each visible task from its row and the node's own features, so the
    actor does not depend on K)."""
    shared_table: bool = True
    """Compute the node networks' first layer on the task table, which every node's
    observation repeats, once per env (:class:`~mara_agents.marl.common.SharedTableMLP`: the
    same networks and weights; False: plain :func:`~mara_agents.marl.common.mlp`, the
    earlier models' arithmetic)."""
    # TorchRL's names: frames_per_batch (steps_per_update), entropy_coeff, lmbda

    def __post_init__(self) -> None:
        super().__post_init__()
        check_decoding(self.decoding)
        if self.actor_kind not in ("mlp", "slot_shared"):
            raise ValueError(f"actor_kind: expected 'mlp' or 'slot_shared', got "
                             f"{self.actor_kind!r}")


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


class ValueNorm(torch.nn.Module):
    """A critic whose network predicts normalised values: ``forward`` returns
    ``net(x) * std + mean`` (what the advantage estimate reads), :meth:`loss` the squared
    error of ``net(x)`` against normalised targets. :meth:`update` folds a batch of targets
    into the running mean and variance (all targets seen so far, Chan et al.'s parallel
    update)."""

    mean: torch.Tensor
    var: torch.Tensor

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net
        self.register_buffer("mean", torch.zeros(()))
        self.register_buffer("var", torch.ones(()))
        self.count = 0

    @property
    def std(self) -> torch.Tensor:
        return self.var.clamp_min(1e-8).sqrt()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) * self.std + self.mean

    def update(self, targets: torch.Tensor) -> None:
        t = targets.detach().double().reshape(-1)
        n, m, v = t.numel(), t.mean(), t.var(unbiased=False)
        total = self.count + n
        delta = m - self.mean.double()
        mean = self.mean.double() + delta * n / total
        var = (self.var.double() * self.count + v * n
               + delta ** 2 * self.count * n / total) / total
        self.mean.copy_(mean.float())
        self.var.copy_(var.float())
        self.count = total

    def loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((self.net(x) - (targets - self.mean) / self.std) ** 2).mean()


def normalised_entropy(logits: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean over the nodes with more than one legal action of their entropy divided by the
    log of their legal actions (1: uniform over the legal actions; comparable across steps
    with 1 to K + 1 of them)."""
    from torchrl.modules import MaskedCategorical

    legal = mask.sum(-1)
    keep = legal > 1
    if not bool(keep.any()):
        return float("nan")
    ent = MaskedCategorical(logits=logits, mask=mask).entropy()
    return float((ent[keep] / legal[keep].double().log()).mean())


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

    if config.actor_kind == "slot_shared":
        task_size = observation_layout(n, k1 - 1).task_size
        actor_spec: dict[str, object] = {"kind": "slot_shared", "own": own,
                                         "task_size": task_size,
                                         "hidden": list(config.hidden), "activation": "tanh"}
        actor_net: torch.nn.Module = SlotSharedActor(own, task_size, list(config.hidden))
    else:
        actor_spec = {"sizes": sizes, "activation": "tanh"}
        actor_net = node_net(sizes)
    obs_key, mask_key = (GROUP, "observation", "observation"), (GROUP, "action_mask")
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, in_keys=[obs_key], out_keys=[(GROUP, "logits")]),
        in_keys={"logits": (GROUP, "logits"), "mask": mask_key},
        out_keys=[(GROUP, "action")], distribution_class=MaskedCategorical,
        return_log_prob=True)
    if algorithm == "mappo":
        value_net: torch.nn.Module = CentralValue(mlp([s, *config.hidden, 1]), n)
        value_key: tuple[str, ...] | str = "state"
        loss_cls = MAPPOLoss
    else:
        value_net, value_key, loss_cls = node_net([d, *config.hidden, 1]), obs_key, IPPOLoss
    norm = ValueNorm(value_net) if config.value_norm else None
    critic = TensorDictModule(norm or value_net, in_keys=[value_key],
                              out_keys=[(GROUP, "state_value")])
    loss = loss_cls(actor, critic, clip_epsilon=config.clip,
                    entropy_coeff=config.ent_coef)
    loss.set_keys(reward=(GROUP, "reward"), action=(GROUP, "action"),
                  value=(GROUP, "state_value"), done=(GROUP, "done"),
                  terminated=(GROUP, "terminated"))
    loss.make_value_estimator(gamma=config.gamma, lmbda=config.gae_lambda)
    optim = torch.optim.Adam(loss.parameters(), config.lr,
                             fused=True if config.fused_adam else None)
    groups = ([list(actor_net.parameters()), list(value_net.parameters())]
              if config.separate_clip else [list(loss.parameters())])
    policy = actor
    if config.decoding == "sequential":
        policy = SequentialActor(actor_net, obs_key, mask_key, (GROUP, "action"),
                                 loss.tensor_keys.sample_log_prob, n, k1 - 1)
    batches = -(-env_steps // config.steps_per_update)
    collector = Collector(env, policy, frames_per_batch=config.steps_per_update,
                          total_frames=batches * config.steps_per_update,
                          auto_register_policy_transforms=False)
    buffer = ReplayBuffer(storage=LazyTensorStorage(config.steps_per_update),
                          sampler=SamplerWithoutReplacement(), batch_size=config.minibatch_size)
    for batch in collector:
        with torch.no_grad():
            if norm is not None:  # the targets of this batch join the running statistics
                loss.value_estimator(batch, params=loss.critic_network_params,
                                     target_params=loss.target_critic_network_params)
                norm.update(batch.get("value_target"))
            loss.value_estimator(batch, params=loss.critic_network_params,
                                 target_params=loss.target_critic_network_params)
        buffer.extend(batch.reshape(-1).exclude("next"))  # the loss reads no "next" entry
        stats: dict[str, list[float]] = {k: [] for k in STAT_KEYS}
        for _ in range(config.epochs):
            for _ in range(config.steps_per_update // config.minibatch_size):
                mb = buffer.sample()
                parts = loss(mb)
                value_loss = (parts["loss_critic"] if norm is None
                              else norm.loss(mb.get(value_key), mb.get("value_target")))
                total = parts["loss_objective"] + value_loss + parts["loss_entropy"]
                optim.zero_grad()
                total.backward()
                for params in groups:
                    torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
                optim.step()
                for ours, theirs in STAT_KEYS.items():
                    if ours == "value_loss":
                        stats[ours].append(float(value_loss.detach()))
                    elif theirs in parts.keys():
                        stats[ours].append(float(parts[theirs].detach().mean()))
        with torch.no_grad():
            stats["normalised_entropy"] = [normalised_entropy(actor_net(mb.get(obs_key)),
                                                              mb.get(mask_key))]
        log.update(**{k: float(np.mean(v)) for k, v in stats.items() if v})
        collector.update_policy_weights_()
    collector.shutdown()
    plain = actor_net.net if isinstance(actor_net, SharedTableMLP) else actor_net  # the mlp
    cfg = {**dataclasses.asdict(config), "hidden": list(config.hidden), "actor": actor_spec}
    return save_model(out, algorithm, preset, seed, env_steps, started, "torchrl", cfg,
                      layout, log, {"actor_state": dict(plain.state_dict())})
