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

The policy trains with :func:`policy_class`: sb3-contrib's multi-input policy whose action
distribution is one masked categorical over ``[batch, N, K + 1]``
(:func:`node_distribution`) instead of N of them, one per node, which sb3-contrib builds,
masks and differentiates one after the other (the same probabilities, log-probabilities and
entropies up to float rounding, and the same network and ``state_dict``, so models of either
load in both; about a third of MaskablePPO's time per env step on CoRE-v0 was that loop).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mara_agents.marl.common import (
    ACTIVATIONS,
    BatchedPPOSettings,
    CurveLog,
    RecordGym,
    check_layout,
    env_layout,
    load_model,
    save_model,
)
from mara_agents.marl.decoding import check_decoding


@dataclasses.dataclass(frozen=True)
class MaskablePPOConfig(BatchedPPOSettings):
    """MaskablePPO settings (SB3's defaults but for the batch size, epochs, width and
    entropy bonus, which match the TorchRL runs)."""

    node_distribution: bool = True
    """Train with :func:`policy_class` (one masked categorical over every node); False:
    sb3-contrib's own ``"MultiInputPolicy"`` (one per node, the earlier models' path; only
    with ``decoding="simultaneous"``)."""
    decoding: str = "sequential"
    """How the nodes' actions are drawn in training and when the model runs
    (:data:`~mara_agents.marl.decoding.DECODINGS`; :func:`node_distribution`)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_decoding(self.decoding)
        if self.decoding == "sequential" and not self.node_distribution:
            raise ValueError("decoding: 'sequential' needs node_distribution=True (sb3-contrib's "
                             "own policy draws every node at once)")

    def sb3_kwargs(self) -> dict[str, Any]:
        """These settings under SB3's names (``MaskablePPO(**kwargs)``; ``hidden`` is the
        policy's ``net_arch``; ``n_steps`` is per env)."""
        return {"n_steps": self.steps_per_env, "batch_size": self.minibatch_size,
                "n_epochs": self.epochs, "learning_rate": self.lr, "ent_coef": self.ent_coef,
                "gamma": self.gamma, "gae_lambda": self.gae_lambda}


def _update_stats_callback() -> Any:
    from stable_baselines3.common.callbacks import BaseCallback

    class UpdateStats(BaseCallback):
        """Feeds every PPO update's statistics (SB3's ``train/*`` logger values, left from
        the update before each rollout) to a :class:`CurveLog`."""

        def __init__(self, log: CurveLog, n_nodes: int) -> None:
            super().__init__()
            self.log, self.n_nodes = log, n_nodes

        @staticmethod
        def read(model: Any, log: CurveLog, n_nodes: int) -> None:
            v = model.logger.name_to_value
            if "train/entropy_loss" in v:  # SB3's entropy sums the N nodes' entropies
                log.update(entropy=-v["train/entropy_loss"] / n_nodes,
                           value_loss=v["train/value_loss"], approx_kl=v["train/approx_kl"],
                           explained_variance=v["train/explained_variance"])

        def _on_rollout_start(self) -> None:
            self.read(self.model, self.log, self.n_nodes)

        def _on_step(self) -> bool:
            return True

    return UpdateStats


def node_distribution(n_nodes: int, n_actions: int, sequential: bool = False) -> Any:
    """An sb3-contrib ``MaskableMultiCategoricalDistribution`` for ``MultiDiscrete([K + 1] *
    N)`` as one ``MaskableCategorical`` with batch shape ``[batch, N]``: log-probabilities
    and entropies are its per-node values summed over the nodes, samples and modes are
    ``[batch, N]``.

    ``sequential``: samples and modes are decoded node by node under sequential masks
    (:func:`core_env.sequential.sample`, with the caps the policy sets as ``capacity``
    int[batch, K] before each use); the distribution is then masked with the realised
    masks, so its log-probability is the sum of the nodes' conditional ones, and they are
    written back into the mask array it was given (the rollout buffer stores them, so the
    update scores the same conditional distributions)."""
    import torch as th
    from sb3_contrib.common.maskable.distributions import (
        MaskableCategorical,
        MaskableMultiCategoricalDistribution,
    )

    from core_env import sequential as seq

    class NodeCategorical(MaskableMultiCategoricalDistribution):
        capacity: np.ndarray | None = None
        _given: Any = None

        def proba_distribution(self, action_logits: th.Tensor) -> "NodeCategorical":
            self.raw = action_logits.view(-1, n_nodes, n_actions)
            self.dist = MaskableCategorical(logits=self.raw)
            self.distributions = [self.dist]  # what the parent's checks look at
            return self

        def apply_masking(self, masks: Any) -> None:
            self._given = masks if isinstance(masks, np.ndarray) else None
            if masks is not None:
                masks = th.as_tensor(masks).view(-1, n_nodes, n_actions)
            self.mask = masks
            self.dist.apply_masking(masks)

        def log_prob(self, actions: th.Tensor) -> th.Tensor:
            return self.dist.log_prob(actions.view(-1, n_nodes)).sum(dim=1)

        def entropy(self) -> th.Tensor:
            return self.dist.entropy().sum(dim=1)

        def sample(self) -> th.Tensor:
            if sequential:
                return self._decode(greedy=False)
            return self.dist.sample()

        def mode(self) -> th.Tensor:
            if sequential:
                return self._decode(greedy=True)
            return th.argmax(self.dist.probs, dim=-1)

        def _decode(self, greedy: bool, generator: th.Generator | None = None) -> th.Tensor:
            if self.capacity is None or self.mask is None:
                raise RuntimeError("sequential decoding needs the masks and the caps "
                                   "(NodeMaskablePolicy sets them)")
            u = None if greedy else th.rand(self.raw.shape[:2], generator=generator,
                                           dtype=th.float64).numpy()
            out = seq.sample(self.raw.detach().numpy(), self.mask.numpy(), self.capacity, u,
                             greedy=greedy)
            realised = th.from_numpy(out.masks.astype(bool))
            self.dist.apply_masking(realised)
            if self._given is not None:  # the rollout buffer's copy
                self._given.reshape(realised.shape)[...] = out.masks.astype(bool)
            return th.from_numpy(out.actions)

    return NodeCategorical([n_actions] * n_nodes)


def policy_class() -> type:
    """sb3-contrib's ``MaskableMultiInputActorCriticPolicy`` with :func:`node_distribution`
    (for ``MultiDiscrete`` spaces whose every dimension has the same size); ``decoding=``
    (:data:`~mara_agents.marl.decoding.DECODINGS`) chooses how the nodes' actions are
    drawn, the caps read from the observation's ``state``."""
    from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy

    from core_env.layout import state_layout
    from core_env.sequential import state_capacity_of
    from mara_agents.marl.decoding import check_decoding

    class NodeMaskablePolicy(MaskableMultiInputActorCriticPolicy):
        def __init__(self, observation_space: Any, action_space: Any, *args: Any,
                     decoding: str = "simultaneous", **kwargs: Any) -> None:
            super().__init__(observation_space, action_space, *args, **kwargs)
            dims = [int(x) for x in action_space.nvec]
            if len(set(dims)) != 1:
                raise ValueError(f"action_space: expected MultiDiscrete([K + 1] * N), got "
                                 f"nvec {dims}")
            self.decoding = check_decoding(decoding)
            n, k = len(dims), dims[0] - 1
            lay = state_layout(n, k)
            self._cap = (k, lay.task_size, lay.task_column("cap"), n)
            self.action_dist = node_distribution(n, dims[0], self.decoding == "sequential")

        def _capacity(self, obs: Any) -> None:
            state = obs["state"] if isinstance(obs, dict) else None
            if state is not None and self.decoding == "sequential":
                cap = state_capacity_of(th_numpy(state), *self._cap)
                dist: Any = self.action_dist  # a NodeCategorical
                dist.capacity = np.asarray(cap, dtype=np.int64)

        def forward(self, obs: Any, deterministic: bool = False,
                    action_masks: np.ndarray | None = None) -> Any:
            self._capacity(obs)
            return super().forward(obs, deterministic, action_masks)

        def get_distribution(self, obs: Any, action_masks: np.ndarray | None = None) -> Any:
            self._capacity(obs)
            return super().get_distribution(obs, action_masks)

    return NodeMaskablePolicy


def th_numpy(x: Any) -> np.ndarray:
    """A tensor's or array's values as a numpy array."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _optimizer_kwargs(config: MaskablePPOConfig) -> dict[str, Any]:
    """SB3's Adam settings (its default eps 1e-5 for PPO) with the fused kernel if asked."""
    return {"optimizer_kwargs": {"eps": 1e-5, "fused": True}} if config.fused_adam else {}


def _policy_kwargs(config: dict[str, Any], node_policy: bool = True) -> dict[str, Any]:
    hidden = config["hidden"] if "hidden" in config else config["net_arch"]  # older files
    kwargs = {"net_arch": list(hidden), "activation_fn": ACTIVATIONS["tanh"]}
    if node_policy:
        kwargs["decoding"] = config.get("decoding", "simultaneous")  # older files: at once
    return kwargs


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
    _UpdateStats = _update_stats_callback()
    log = CurveLog()
    env: Any
    if config.num_envs:
        env = CoreVecEnv(preset, config.num_envs, seed=seed, log=log)
    else:
        env = RecordGym(gymnasium.make(f"core_env:core_env/{preset}"), log)
        env.reset(seed=seed)
    policy = policy_class() if config.node_distribution else "MultiInputPolicy"
    model = MaskablePPO(policy, env, seed=seed, device="cpu", verbose=0,
                        policy_kwargs={**_policy_kwargs(dataclasses.asdict(config),
                                                        config.node_distribution),
                                       **_optimizer_kwargs(config)},
                        **config.sb3_kwargs())
    n_nodes = env_layout(core_env.parallel_env(preset=preset))["n_nodes"]
    model.learn(total_timesteps=env_steps, callback=_UpdateStats(log, n_nodes))
    _UpdateStats.read(model, log, n_nodes)  # the last update
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

        blob = load_model(path, "maskable_ppo")
        check_layout(blob, env, path)
        self.env = env.unwrapped
        n, k1 = blob["layout"]["n_nodes"], blob["layout"]["n_actions"]
        obs_space = spaces.Dict({"state": self.env.state_space,
                                 "action_mask": spaces.Box(0, 1, (n, k1), np.int8)})
        self.net = policy_class()(
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
            elif self.net.decoding == "sequential":
                actions = dist._decode(greedy=False, generator=self.gen)[0]
            else:
                actions = torch.stack([torch.multinomial(p, 1, generator=self.gen)[0]
                                       for p in dist.dist.probs[0]])
        return {a: int(x) for a, x in zip(self.agents, actions, strict=False) if a in observations}

    def _k1(self) -> int:
        return int(self.env.action_space(self.agents[0]).n)
