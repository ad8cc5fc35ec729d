"""``PPOConfig``: everything a MARA training run depends on (``mara-train``'s flags; stored
in every checkpoint)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import core_env
from core_env.utils.checks import check_ints
from mara_agents.forecast.registry import DEFAULT_FORECASTER, FORECASTERS
from mara_agents.mat.mara_policy import PLACEMENTS
from mara_agents.mat.model import MATConfig

RECIPE_BACKENDS = ("local", "ray")
"""Where the recipe's members train: a local process pool or Ray tasks."""


RENAMED = {"entropy_coef": "ent_coef"}
"""Fields stored under an older name in earlier checkpoints' ``train_config``: old -> new."""

ADDED = {"placement": "model", "fair_fraction": 0.0, "fair_lr": 0.05}
"""Fields earlier checkpoints' ``train_config`` lacks -> the value they trained with."""

RESUMABLE = frozenset({"env_steps", "out", "resume", "progress", "checkpoint_every", "init",
                       "members", "workers", "backend", "ray_address", "distill"})
"""PPOConfig fields a resumed run may change."""


@dataclass(frozen=True)
class DistillStage:
    """How an ensemble is distilled into one MAT (``mara-distill``'s training settings; the
    recipe's stage 2, flags ``--distill-<field>`` of ``mara-train``)."""

    num_envs: int = 32
    """Environments stepped together."""
    iterations: int = 40
    """DAgger iterations."""
    steps: int = 64
    """Slots per environment per iteration (num_envs * steps states per iteration)."""
    updates: int = 150
    """Minibatch steps after each iteration."""
    batch_size: int = 256
    """States per minibatch."""
    buffer: int = 100_000
    """Most recent states kept for training."""
    lr: float = 1e-4
    """Adam learning rate (constant)."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip."""

    def __post_init__(self) -> None:
        check_ints(self, ("num_envs", "iterations", "steps", "updates", "batch_size", "buffer"),
                   1)
        for name in ("lr", "max_grad_norm"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 < v <= 1e6):
                raise ValueError(f"{name}: expected a positive number, got {v!r}")


@dataclass(frozen=True)
class PPOConfig:
    """Everything a MARA training run depends on (stored in every checkpoint)."""

    preset: str = "CoRE-v0"
    """Environment preset to train on."""
    shaping_beta: float = 0.0
    """Shaping weight beta of the reward: 0 (the default) trains on the completion count
    alone; 1 is SPEC §3's log-progress shaping, which trained slower and idled nodes
    (docs/experiments.md)."""
    forecaster: str = DEFAULT_FORECASTER
    """Forecast columns: ``fm`` (the shipped flow-matching forecaster, trained on synthetic
    curves), ``fm-v1`` (the same trained on real curves too) or ``wls`` (LARA's estimator;
    the ``MARA with WLS`` ablation)."""
    fm_steps: int = 10
    """ODE (Euler) steps of the FM sampler behind the columns (the FM checkpoint's own
    setting is 10). Stored in the checkpoint; MARA forecasts with it at inference too."""
    fm_samples: int = 32
    """Samples per forecast of the FM sampler (the FM checkpoint's own setting is 32)."""
    placement: str = "model"
    """Which node trains which task in the training rollouts: ``model`` (as decoded) or
    ``keep`` (the decoded node counts placed as the baselines place them, nodes staying on
    their task; see :class:`~mara_agents.mat.mara_policy.MARAPolicy`)."""
    fair_fraction: float = 0.0
    """MARA-fair (SPEC §10): 0 (the default) trains on the completion count; f in (0, 1]
    trains under the constraint that every tenant's completion rate stays at least f times
    the overall rate (a constrained MDP: per-tenant Lagrange multipliers weight each
    completion; see :mod:`mara_agents.train.fair`). Needs a preset with tenants."""
    fair_lr: float = 0.05
    """MARA-fair: the multipliers' step per PPO update (dual ascent on the constraint gap;
    the slower timescale of RCPO / PPO-Lagrangian)."""
    seed: int = 0
    """Seeds the environments and the torch generator."""
    env_steps: int = 1_300_000
    """PPO environment steps (slots x environments) to train for."""
    num_envs: int = 32
    """Environments stepped together."""
    rollout_len: int = 32
    """Slots per environment per update."""
    epochs: int = 2
    """Passes over each rollout."""
    minibatches: int = 4
    """Minibatches per pass."""
    lr: float = 1e-4
    """Adam learning rate (linearly annealed to 10% of it)."""
    clip: float = 0.2
    """PPO ratio clip epsilon, on the joint action's ratio (the sum of the nodes'
    log-ratios), with the mean of the nodes' advantages."""
    gamma: float = 1.0
    """Discount; must stay 1 for the shaping to leave the objective unchanged (SPEC §3)."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    ent_coef: float = 0.001
    """Weight of the entropy bonus."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip."""
    imitation_iters: int = 6
    """Stage 1: DAgger iterations imitating the oracle-informed greedy teacher before PPO
    (0: PPO from scratch; see :mod:`mara_agents.train.imitation`)."""
    imitation_steps: int = 64
    """Stage 1: slots per environment per DAgger iteration."""
    imitation_epochs: int = 4
    """Stage 1: passes over the aggregated data after each iteration."""
    imitation_decay: float = 0.5
    """Stage 1: probability of executing the teacher in iteration i is decay**i."""
    imitation_lr: float = 1e-3
    """Stage 1: Adam learning rate."""
    critic_warmup: int = 40
    """Stage 2: first PPO updates that train only the value head (its own Adam; the shared
    encoder, hence the stage-1 policy, is frozen while the critic catches up)."""
    critic_lr: float = 3e-3
    """Stage 2: the value head's Adam learning rate during the critic warm-up (the head
    starts from scratch; at ``lr`` it barely moves in the warm-up)."""
    model: MATConfig = field(default_factory=MATConfig)
    """MAT sizes (flags ``--model-<field>``; ``--no-model-autoregressive`` = MAT-Dec)."""
    threads: int = 1
    """torch CPU threads (0: torch's default)."""
    checkpoint_every: int = 20
    """Updates between checkpoints (``last.pt`` in ``out``, overwritten)."""
    out: str = "runs/mara"
    """Output folder: checkpoints, ``curve.json`` (the learning curve) and TensorBoard logs."""
    resume: str = ""
    """A checkpoint to resume from (its config must match except ``env_steps``/``out``)."""
    init: str = ""
    """Start from this checkpoint's weights (e.g. another run's stage-1 ``imitation.pt``)
    and skip stage 1; optimiser, counters and value normaliser start fresh."""
    progress: bool = True
    """Show a tqdm progress bar."""
    members: int = 4
    """The recipe: K > 1 (the default, 4: the shipped checkpoint) trains K runs with seeds
    ``seed`` .. ``seed + K - 1`` into ``out/member-<i>`` and distils their ensemble into
    ``out/last.pt`` (see :mod:`mara_agents.train.recipe`); 1 trains one run (this config)
    into ``out``."""
    workers: int = 0
    """Members trained at once (0: as many as this machine's CPUs, at most ``members``)."""
    backend: str = "local"
    """Where members train: ``local`` (a process pool) or ``ray`` (Ray tasks)."""
    ray_address: str = ""
    """With ``backend=ray``, the cluster to join ('' starts a local Ray)."""
    distill: DistillStage = field(default_factory=DistillStage)
    """The recipe's distillation (flags ``--distill-<field>``)."""

    def __post_init__(self) -> None:
        if self.preset not in core_env.PRESETS:
            raise ValueError(f"preset: expected one of {sorted(core_env.PRESETS)}, "
                             f"got {self.preset!r}")
        if self.forecaster not in FORECASTERS:
            raise ValueError(f"forecaster: expected one of {FORECASTERS}, "
                             f"got {self.forecaster!r}")
        check_ints(self, ("env_steps", "num_envs", "rollout_len", "epochs", "minibatches",
                          "checkpoint_every", "imitation_steps", "imitation_epochs",
                          "fm_steps", "fm_samples"), 1)
        check_ints(self, ("seed", "threads", "imitation_iters", "critic_warmup", "workers"), 0)
        check_ints(self, ("members",), 1)
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement: expected one of {PLACEMENTS}, got "
                             f"{self.placement!r}")
        if self.backend not in RECIPE_BACKENDS:
            raise ValueError(f"backend: expected one of {RECIPE_BACKENDS}, got "
                             f"{self.backend!r}")
        if self.resume and self.members > 1:
            raise ValueError(f"resume: the recipe (members={self.members}) resumes when rerun "
                             f"with the same out; give members=1 (--members 1) to resume one "
                             f"run from {self.resume!r}")
        if not isinstance(self.distill, DistillStage):
            raise ValueError(f"distill: expected a DistillStage, got {self.distill!r}")
        if (self.num_envs * self.rollout_len) % self.minibatches:
            raise ValueError(f"minibatches: expected a divisor of num_envs * rollout_len = "
                             f"{self.num_envs * self.rollout_len}, got {self.minibatches}")
        checks = {"lr": (0.0, 1.0), "clip": (0.0, 1.0), "gamma": (0.0, 1.0),
                  "gae_lambda": (0.0, 1.0), "value_coef": (0.0, 100.0),
                  "ent_coef": (0.0, 10.0), "max_grad_norm": (0.0, 1e6),
                  "critic_lr": (0.0, 1.0), "shaping_beta": (0.0, 100.0),
                  "imitation_decay": (0.0, 1.0), "imitation_lr": (0.0, 1.0),
                  "fair_fraction": (0.0, 1.0), "fair_lr": (0.0, 100.0)}
        for name, (lo, hi) in checks.items():
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi):
                raise ValueError(f"{name}: expected a number in [{lo}, {hi}], got {v!r}")
        for name in ("lr", "clip", "max_grad_norm", "critic_lr"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: expected > 0, got {getattr(self, name)!r}")
        if self.fair_fraction:
            if not core_env.PRESETS[self.preset].workload.n_tenants:
                raise ValueError(f"fair_fraction: {self.fair_fraction} constrains tenants' "
                                 f"completion rates, but preset {self.preset!r} has no "
                                 f"tenants (e.g. CoRE-Tenants-v0 has)")
            if self.shaping_beta:
                raise ValueError(f"fair_fraction: expected shaping_beta = 0 with the "
                                 f"fairness constraint, got {self.shaping_beta}")
        if not isinstance(self.model, MATConfig):
            raise ValueError(f"model: expected a MATConfig, got {self.model!r}")

    def env_config(self) -> core_env.CoreConfig:
        """The training environment's configuration."""
        return core_env.make_config(self.preset, shaping_beta=self.shaping_beta)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))

    def differences(self, saved: dict[str, Any]) -> list[str]:
        """The fields in which a checkpoint's stored ``train_config`` differs from this
        config, leaving out those a run may change when it resumes (its length, where it
        writes, progress, checkpointing, and the recipe's settings)."""
        mine = self.to_dict()
        saved = {**ADDED, **{RENAMED.get(k, k): v for k, v in saved.items()}}
        return [k for k in mine if k not in RESUMABLE and saved.get(k) != mine[k]]
