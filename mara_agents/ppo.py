"""PPO for MARA's MAT on the batched simulator: ``mara-train`` (SPEC §5).

    mara-train                                   # the default recipe (see docs/mara.md)
    mara-train --critic-warmup 8 --critic-lr 1e-4  # the shipped checkpoint's command
    mara-train --env-steps 200000 --out runs/mara_quick    # a quick run
    mara-train --resume runs/mara/last.pt        # continue an interrupted run
    tensorboard --logdir runs/mara

Loop: ``num_envs`` environments of :func:`core_env.make_batched` run ``rollout_len`` slots
with the MAT decoding autoregressively (sampling); forecast columns come from a
:class:`~core_env.forecast.cache.ForecastCache` around the chosen forecaster (FM by
default). Advantages by GAE with gamma = 1 (the potential-based shaping is only
policy-invariant at gamma = 1; SPEC §3) on per-node values and the shared team reward; an
environment that finishes an episode is a terminal (its next value is 0); the step after a
rollout is bootstrapped with the value. Then ``epochs`` passes of ``minibatches``
minibatches: the clipped surrogate on the joint action's ratio (``ratio="joint"``, the
default; ``"node"`` is MAT's per-agent ratio), the value
loss on normalised returns (running mean/std of the returns), an entropy bonus, gradient
clipping.

Seeding: ``seed`` seeds the environments' workloads (``make_batched(seed=seed)``) and one
``torch.Generator`` for initialisation, action sampling and minibatch order. Same seed,
same config, same thread count on the same machine: the same checkpoint. A resumed run
re-seeds its environments with ``seed + update`` and restores the generator, so it is
reproducible too, but it is not bit-identical to an uninterrupted run (the environments'
in-flight episodes are not saved).

TensorBoard keys are defined in ``docs/mara.md``.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

import core_env
from core_env.forecast.cache import ForecastCache
from core_env.forecast.wrapper import FORECAST_FEATURES
from core_env.layout import Layout
from mara_agents import checkpoint_io
from mara_agents._cli import check_ints, parse_config
from mara_agents.mat import MAT, Inputs, MATConfig, init_weights, inputs_from_batched

FORECASTERS = ("fm", "wls")
INIT_DECODERS = ("keep", "autoregressive", "independent")
"""Values of ``PPOConfig.init_decoder``."""
CHECKPOINT_FORMAT = "mara-mat/1"


@dataclass(frozen=True)
class PPOConfig:
    """Everything a MARA training run depends on (stored in every checkpoint)."""

    preset: str = "CoRE-v0"
    """Environment preset to train on."""
    shaping_beta: float = 0.0
    """Shaping weight beta of the reward: 0 (the default) trains on the completion count
    alone; 1 is SPEC §3's log-progress shaping, which trained slower and idled nodes
    (docs/mara.md)."""
    forecaster: str = "fm"
    """Forecast columns: ``fm`` (the shipped flow-matching forecaster) or ``wls`` (LARA's
    estimator; the ``MARA with WLS`` ablation)."""
    fm_steps: int = 10
    """ODE (Euler) steps of the FM sampler behind the columns (the FM checkpoint's own
    setting is 10). Stored in the checkpoint; MARA forecasts with it at inference too."""
    fm_samples: int = 32
    """Samples per forecast of the FM sampler (the FM checkpoint's own setting is 32)."""
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
    """PPO ratio clip epsilon."""
    ratio: str = "joint"
    """``joint``: one ratio per joint action (sum of the nodes' log-ratios) with the mean of
    the nodes' advantages; ``node``: MAT's per-node ratios and advantages (with 16 nodes the
    joint policy then moves about 16 times further per update for the same clip)."""
    gamma: float = 1.0
    """Discount; must stay 1 for the shaping to leave the objective unchanged (SPEC §3)."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    entropy_coef: float = 0.001
    """Weight of the entropy bonus."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip."""
    imitation_iters: int = 6
    """Stage 1: DAgger iterations imitating the oracle-informed greedy teacher before PPO
    (0: PPO from scratch; see :mod:`mara_agents.imitation`)."""
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
    keep_checkpoints: bool = False
    """Also keep every checkpoint as ``update_<n>.pt`` in ``out`` (to evaluate the greedy
    policy along the run, or to choose among its checkpoints on held-out seeds)."""
    out: str = "runs/mara"
    """Output folder: checkpoints, ``curve.json`` (the learning curve) and TensorBoard logs."""
    resume: str = ""
    """A checkpoint to resume from (its config must match except ``env_steps``/``out``)."""
    init: str = ""
    """Start from this checkpoint's weights (e.g. another run's stage-1 ``imitation.pt``)
    and skip stage 1; optimiser, counters and value normaliser start fresh."""
    init_decoder: str = "keep"
    """With ``init``: ``keep`` the checkpoint's decoder, or switch it to ``autoregressive``
    or ``independent`` (MAT-Dec) on the same weights (the decoder's conditioning on earlier
    nodes adds no parameters, so both read the same state dict; the fine-tuned MAT-Dec
    ablation starts this way)."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        if self.preset not in core_env.PRESETS:
            raise ValueError(f"preset: expected one of {sorted(core_env.PRESETS)}, "
                             f"got {self.preset!r}")
        if self.ratio not in ("joint", "node"):
            raise ValueError(f"ratio: expected 'joint' or 'node', got {self.ratio!r}")
        if self.forecaster not in FORECASTERS:
            raise ValueError(f"forecaster: expected one of {FORECASTERS}, "
                             f"got {self.forecaster!r}")
        if self.init_decoder not in INIT_DECODERS:
            raise ValueError(f"init_decoder: expected one of {INIT_DECODERS}, "
                             f"got {self.init_decoder!r}")
        check_ints(self, ("env_steps", "num_envs", "rollout_len", "epochs", "minibatches",
                          "checkpoint_every", "imitation_steps", "imitation_epochs",
                          "fm_steps", "fm_samples"), 1)
        check_ints(self, ("seed", "threads", "imitation_iters", "critic_warmup"), 0)
        if (self.num_envs * self.rollout_len) % self.minibatches:
            raise ValueError(f"minibatches: expected a divisor of num_envs * rollout_len = "
                             f"{self.num_envs * self.rollout_len}, got {self.minibatches}")
        checks = {"lr": (0.0, 1.0), "clip": (0.0, 1.0), "gamma": (0.0, 1.0),
                  "gae_lambda": (0.0, 1.0), "value_coef": (0.0, 100.0),
                  "entropy_coef": (0.0, 10.0), "max_grad_norm": (0.0, 1e6),
                  "critic_lr": (0.0, 1.0), "shaping_beta": (0.0, 100.0),
                  "imitation_decay": (0.0, 1.0), "imitation_lr": (0.0, 1.0)}
        for name, (lo, hi) in checks.items():
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi):
                raise ValueError(f"{name}: expected a number in [{lo}, {hi}], got {v!r}")
        for name in ("lr", "clip", "max_grad_norm", "critic_lr"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: expected > 0, got {getattr(self, name)!r}")
        if not isinstance(self.model, MATConfig):
            raise ValueError(f"model: expected a MATConfig, got {self.model!r}")

    def env_config(self) -> core_env.CoreConfig:
        """The training environment's configuration."""
        return core_env.make_config(self.preset, shaping_beta=self.shaping_beta)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))


def make_forecaster(name: str, fm_steps: int | None = None, fm_samples: int | None = None,
                    fm_backend: str = "torch") -> Any:
    """The forecaster behind the forecast columns (``fm`` or ``wls``); ``fm_steps`` and
    ``fm_samples`` override the FM sampler's ODE steps and samples (None: the FM
    checkpoint's 10 and 32; WLS has neither); ``fm_backend`` is FM's ``backend``
    (``"numpy"`` for one environment, ``"torch"`` for the batched simulator)."""
    if name == "fm":
        from mara_agents.forecast import FlowMatchingForecaster
        overrides = {k: v for k, v in (("steps", fm_steps), ("samples", fm_samples))
                     if v is not None}
        return FlowMatchingForecaster.pretrained(backend=fm_backend, **overrides)
    if name == "wls":
        from core_env.forecast import WLSForecaster
        return WLSForecaster()
    raise ValueError(f"forecaster: expected one of {FORECASTERS}, got {name!r}")


def wrapped_layout(layout: Layout) -> Layout:
    """The observation layout with the forecast columns (what MARA reads)."""
    return layout.with_task_features(FORECAST_FEATURES)


def layout_record(layout: Layout) -> dict[str, Any]:
    """What a checkpoint must match: node and slot counts and every feature name."""
    return {"n_nodes": layout.n_nodes, "n_slots": layout.n_slots,
            "global": [f.name for f in layout.global_features],
            "node": [f.name for f in layout.node_features],
            "task": [f.name for f in layout.task_features]}


# --------------------------------------------------------------------------- PPO pieces
def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
        last_values: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) over a rollout.

    Args:
        rewards: float[T, B] team rewards of each step.
        values: float[T, B, N] per-node values of the states the actions were taken in.
        dones: bool[T, B], True if the episode ended with that step (next value 0).
        last_values: float[B, N] values of the states after the last step.
        gamma, lam: discount and GAE lambda.

    Returns:
        ``(advantages, returns)``, float[T, B, N]; returns = advantages + values.
    """
    t_len = rewards.shape[0]
    adv = torch.zeros_like(values)
    running = torch.zeros_like(last_values)
    next_values = last_values
    for t in reversed(range(t_len)):
        live = (~dones[t]).float()[:, None]
        delta = rewards[t][:, None] + gamma * next_values * live - values[t]
        running = delta + gamma * lam * live * running
        adv[t] = running
        next_values = values[t]
    return adv, adv + values


def clipped_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                      clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped policy loss (to minimise) and the fraction of clipped ratios.

    ``loss = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A))`` with ``r = exp(logp - old_logp)``.
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    loss = -torch.mean(torch.minimum(unclipped, clipped))
    frac = torch.mean(((ratio - 1.0).abs() > clip).float())
    return loss, frac


class RunningNorm:
    """Running mean and variance of a scalar stream (Chan et al. parallel update); used to
    normalise value targets."""

    def __init__(self) -> None:
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().double().flatten()
        n = x.numel()
        if n == 0:
            return
        m, v = float(x.mean()), float(x.var(unbiased=False))
        total = self.count + n
        delta = m - self.mean
        self.mean += delta * n / total
        self.var = (self.var * self.count + v * n + delta * delta * self.count * n / total) / total
        self.count = total

    @property
    def std(self) -> float:
        return math.sqrt(max(self.var, 1e-8))

    def state(self) -> dict[str, float]:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load(self, d: dict[str, float]) -> None:
        self.mean, self.var, self.count = float(d["mean"]), float(d["var"]), float(d["count"])


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - pred] / Var[target] (NaN-free: 0 when the target is constant)."""
    var = float(target.var())
    return 0.0 if var < 1e-12 else 1.0 - float((target - pred).var()) / var


def stack_inputs(items: Sequence[Inputs]) -> Inputs:
    """Stack per-step inputs into [T * B, ...] tensors."""
    return Inputs(*(torch.cat([getattr(x, f) for x in items], dim=0) for f in Inputs._fields))


def index_inputs(x: Inputs, idx: torch.Tensor) -> Inputs:
    return Inputs(*(t[idx] for t in x))


# --------------------------------------------------------------------------- checkpoints
def save_checkpoint(path: Path, model: MAT, layout: Layout, cfg: PPOConfig, norm: RunningNorm,
                    extra: dict[str, Any] | None = None) -> None:
    """Write a checkpoint (tensors, numbers, strings only: loads with weights_only=True),
    atomically and with an integrity record (:func:`mara_agents.checkpoint_io.save`)."""
    blob = {"format": CHECKPOINT_FORMAT, "mat_config": model.config.to_dict(),
            "layout": layout_record(layout), "train_config": cfg.to_dict(),
            "value_norm": norm.state(), "state_dict": model.state_dict(), **(extra or {})}
    checkpoint_io.save(path, blob)


LEGACY_CONFIG = {"fm_steps": 10, "fm_samples": 32, "keep_checkpoints": False}
"""Values of config fields added after checkpoints were shipped, for checkpoints that
predate them (what those runs used)."""


def train_config(blob: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's training config as a dict, with :data:`LEGACY_CONFIG` filled in for
    fields it predates."""
    saved = blob["train_config"]
    # runs before critic_lr warmed the critic up at the PPO learning rate
    return {**LEGACY_CONFIG, "critic_lr": saved.get("lr"), **saved}


CHECKPOINT_SCHEMA = {"mat_config": dict, "layout": dict, "train_config": dict,
                     "value_norm": dict, "state_dict": dict}
"""Entries every MARA checkpoint has, with their types."""


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a MARA checkpoint after checking it: the file's CRCs, a safe unpickling
    (``weights_only=True``), its integrity record and finite weights
    (:func:`mara_agents.checkpoint_io.load`), then its format and entries.

    Raises:
        ValueError: ``"<path>: ..."``, naming what is wrong.
    """
    blob = checkpoint_io.load(path, "MARA checkpoint")
    if blob.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a MARA checkpoint (expected format "
                         f"{CHECKPOINT_FORMAT!r}, got {blob.get('format')!r})")
    for key, kind in CHECKPOINT_SCHEMA.items():
        if not isinstance(blob.get(key), kind):
            raise ValueError(f"{path}: entry {key!r}: expected a {kind.__name__}, got "
                             f"{type(blob.get(key)).__name__}")
    bad = [k for k, v in blob["state_dict"].items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"{path}: state_dict entries that are not tensors: {bad[:5]}")
    if not isinstance(blob["train_config"].get("forecaster"), str):
        raise ValueError(f"{path}: train_config has no forecaster name")
    return blob


def model_from_checkpoint(blob: dict[str, Any], layout: Layout, source: str = "checkpoint"
                          ) -> MAT:
    """Build the MAT of a checkpoint for an environment layout.

    Raises:
        ValueError: the checkpoint was trained for another layout (node count, slot count
            or features); the message lists the differences.
    """
    want = layout_record(layout)
    have = blob["layout"]
    diff = [k for k in want if want[k] != have.get(k)]
    if diff:
        details = "; ".join(f"{k}: checkpoint {have.get(k)!r}, env {want[k]!r}" for k in diff)
        raise ValueError(f"{source}: trained for a different observation layout ({details})")
    try:
        model = MAT(MATConfig(**blob["mat_config"]), layout)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{source}: mat_config {blob['mat_config']!r} is not a valid MAT "
                         f"configuration ({e})") from e
    try:
        model.load_state_dict(blob["state_dict"])
    except RuntimeError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        raise ValueError(f"{source}: the weights do not fit mat_config "
                         f"({'; '.join(lines[1:4]) or lines[0]})") from e
    model.eval()
    return model


# --------------------------------------------------------------------------- training
class Trainer:
    """One MARA PPO run (see the module docstring); :meth:`run` trains to ``env_steps``."""

    def __init__(self, cfg: PPOConfig, forecaster: Any | None = None) -> None:
        self.cfg = cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.env = core_env.BatchedCoreEnv(cfg.env_config(), cfg.num_envs, seed=cfg.seed)
        self.plain_layout = self.env.layout
        self.layout = wrapped_layout(self.plain_layout)
        self.forecaster = (make_forecaster(cfg.forecaster, cfg.fm_steps, cfg.fm_samples)
                           if forecaster is None else forecaster)
        self.cache = ForecastCache(self.forecaster, cfg.num_envs, self.layout.n_slots)
        self.model = MAT(cfg.model, self.layout)
        init_weights(self.model, self.gen)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, eps=1e-5)
        self.norm = RunningNorm()
        self.update = 0
        self.env_steps = 0
        self.curve: list[dict[str, float]] = []
        self.imitation: list[dict[str, float]] = []
        self.imitation_seconds = 0.0
        self.out = Path(cfg.out)
        if cfg.resume and cfg.init:
            raise ValueError("init: expected '' when resume is set (resume restores weights)")
        if cfg.init:
            blob = load_checkpoint(cfg.init)
            mine = cfg.model.to_dict()
            if cfg.init_decoder != "keep":
                mine["autoregressive"] = cfg.init_decoder == "autoregressive"
                blob["mat_config"] = {**blob["mat_config"],
                                      "autoregressive": mine["autoregressive"]}
            diff = {k: v for k, v in blob["mat_config"].items() if mine.get(k) != v}
            if diff:
                flags = " ".join((f"--{'' if v else 'no-'}model-{k.replace('_', '-')}"
                                  if isinstance(v, bool) else f"--model-{k.replace('_', '-')} {v}")
                                 for k, v in diff.items())
                raise ValueError(f"init: {cfg.init} is a MAT with other sizes than the "
                                 f"config's model ({diff}); pass {flags}")
            self.model = model_from_checkpoint(blob, self.layout, cfg.init)
            self.model.train()
            self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, eps=1e-5)
            self.imitation = json.loads(blob.get("imitation", "[]"))
            self.imitation_seconds = float(blob.get("imitation_seconds", 0.0))
        if cfg.resume:
            self._resume(Path(cfg.resume))
        # the critic warm-up's optimiser (value head only)
        self.value_opt = torch.optim.Adam(self.model.value_head.parameters(),
                                          lr=cfg.critic_lr, eps=1e-5)
        obs, mask = self.env.reset(seed=cfg.seed + self.update)
        self.cache.reset()
        self.obs, self.mask = obs, mask

    def _resume(self, path: Path) -> None:
        blob = load_checkpoint(path)
        saved = train_config(blob)
        mine = self.cfg.to_dict()
        ignore = {"env_steps", "out", "resume", "progress", "checkpoint_every", "init",
                  "keep_checkpoints"}
        diff = [k for k in mine if k not in ignore and saved.get(k) != mine[k]]
        if diff:
            raise ValueError(f"resume: {path} was trained with a different config "
                             f"(fields {diff})")
        self.model = model_from_checkpoint(blob, self.layout, str(path))
        self.model.train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, eps=1e-5)
        self.opt.load_state_dict(blob["optimizer"])
        self.norm.load(blob["value_norm"])
        self.gen.set_state(blob["generator"])
        self.update = int(blob["update"])
        self.env_steps = int(blob["env_steps"])
        self.curve = json.loads(blob["curve"])
        self.imitation = json.loads(blob["imitation"])
        self.imitation_seconds = float(blob["imitation_seconds"])

    def inputs(self) -> Inputs:
        extra = self.cache.update(self.env.sim)
        return inputs_from_batched(self.obs, self.mask, self.plain_layout, extra)

    def collect(self) -> dict[str, Any]:
        """One rollout of ``rollout_len`` steps; returns the tensors of the update."""
        cfg = self.cfg
        xs, acts, logps, vals, rews, dones = [], [], [], [], [], []
        finished: list[dict[str, float]] = []
        self.model.eval()
        for _ in range(cfg.rollout_len):
            x = self.inputs()
            with torch.no_grad():
                a, lp, v = self.model.act(x, generator=self.gen)
            obs, mask, reward, done, info = self.env.step(a.numpy())
            if done.any():
                self.cache.reset(done)
                ep = info["episode"]
                for j in range(len(ep["env"])):
                    finished.append({"completion_rate": float(ep["completion_rate"][j]),
                                     "return": float(ep["return"][j])})
            self.obs, self.mask = obs, mask
            xs.append(x)
            acts.append(a)
            logps.append(lp)
            vals.append(v * self.norm.std + self.norm.mean)
            rews.append(torch.from_numpy(np.asarray(reward, dtype=np.float32)))
            dones.append(torch.from_numpy(np.asarray(done)))
        with torch.no_grad():
            _, _, last_v = self.model.encode(self.inputs())
        last_v = last_v * self.norm.std + self.norm.mean
        values = torch.stack(vals)
        adv, ret = gae(torch.stack(rews), values, torch.stack(dones), last_v, cfg.gamma,
                       cfg.gae_lambda)
        self.env_steps += cfg.rollout_len * cfg.num_envs
        return {"x": stack_inputs(xs), "actions": torch.cat(acts), "logp": torch.cat(logps),
                "adv": adv.flatten(0, 1), "ret": ret.flatten(0, 1),
                "values": values.flatten(0, 1), "episodes": finished}

    def learn(self, batch: dict[str, Any]) -> dict[str, float]:
        """PPO epochs over one rollout; returns the mean of the logged quantities."""
        cfg = self.cfg
        frac = min(self.env_steps / cfg.env_steps, 1.0)
        for group in self.opt.param_groups:
            group["lr"] = cfg.lr * (1.0 - 0.9 * frac)
        self.norm.update(batch["ret"])
        ret_n = (batch["ret"] - self.norm.mean) / self.norm.std
        adv = batch["adv"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        n = adv.shape[0]
        size = n // cfg.minibatches
        logs: dict[str, list[float]] = {k: [] for k in ("policy", "value", "entropy",
                                                         "approx_kl", "clip_frac")}
        self.model.train()
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self.gen)
            for m in range(cfg.minibatches):
                idx = perm[m * size:(m + 1) * size]
                x = index_inputs(batch["x"], idx)
                logp, ent, v = self.model.evaluate(x, batch["actions"][idx])
                old = batch["logp"][idx]
                if cfg.ratio == "joint":
                    pl, cf = clipped_surrogate(logp.sum(-1), old.sum(-1), adv[idx].mean(-1),
                                               cfg.clip)
                else:
                    pl, cf = clipped_surrogate(logp, old, adv[idx], cfg.clip)
                vl = torch.mean((v - ret_n[idx]) ** 2)
                el = ent.mean()
                if self.update < cfg.critic_warmup:
                    # only the value head learns: the shared encoder (hence the stage-1
                    # policy) stays as it is while the critic catches up
                    self.value_opt.zero_grad(set_to_none=True)
                    vl.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.value_head.parameters(),
                                                   cfg.max_grad_norm)
                    self.value_opt.step()
                else:
                    loss = pl + cfg.value_coef * vl - cfg.entropy_coef * el
                    self.opt.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                    self.opt.step()
                with torch.no_grad():
                    log_ratio = (logp - old).sum(-1)  # joint action
                    kl = torch.mean(torch.exp(log_ratio) - 1.0 - log_ratio)
                for k, val in (("policy", pl), ("value", vl), ("entropy", el),
                               ("approx_kl", kl), ("clip_frac", cf)):
                    logs[k].append(float(val.detach()))
        out = {k: float(np.mean(v)) for k, v in logs.items()}
        out["explained_variance"] = explained_variance(batch["values"], batch["ret"])
        out["lr"] = self.opt.param_groups[0]["lr"]
        return out

    def save(self, path: Path) -> None:
        save_checkpoint(path, self.model, self.layout, self.cfg, self.norm, {
            "optimizer": self.opt.state_dict(), "generator": self.gen.get_state(),
            "update": self.update, "env_steps": self.env_steps,
            "curve": json.dumps(self.curve), "imitation": json.dumps(self.imitation),
            "imitation_seconds": self.imitation_seconds})

    def run(self) -> dict[str, Any]:
        """Train until ``env_steps``; writes checkpoints, ``curve.json`` and TensorBoard
        logs to ``out``; returns a summary."""
        cfg = self.cfg
        writer = SummaryWriter(str(self.out / "tb"))
        per_update = cfg.rollout_len * cfg.num_envs
        total = math.ceil(cfg.env_steps / per_update)
        bar = tqdm(total=total, initial=self.update, desc="train MARA", unit="update",
                   disable=not cfg.progress)
        t0 = time.perf_counter()
        if self.update == 0 and not self.imitation and not cfg.init and cfg.imitation_iters:
            from mara_agents.imitation import dagger
            self.imitation = dagger(self, cfg.imitation_iters, cfg.imitation_steps,
                                    cfg.imitation_epochs, cfg.imitation_decay,
                                    log=writer.add_scalar)
            self.imitation_seconds = round(time.perf_counter() - t0, 1)
            self.save(self.out / "imitation.pt")
            if cfg.progress:
                last = self.imitation[-1]
                tqdm.write(f"imitation: {len(self.imitation)} iterations in "
                           f"{self.imitation_seconds:.0f} s, agreement "
                           f"{last['agreement']:.3f}, completion {last['completion_rate']:.3f}")
        recent: list[dict[str, float]] = []
        while self.update < total:
            t_up = time.perf_counter()
            batch = self.collect()
            t_roll = time.perf_counter() - t_up
            logs = self.learn(batch)
            self.update += 1
            recent = (recent + batch["episodes"])[-4 * cfg.num_envs:]
            step = self.env_steps
            for k in ("policy", "value", "entropy"):
                writer.add_scalar(f"loss/{k}", logs[k], step)
            for k in ("approx_kl", "clip_frac", "explained_variance", "lr"):
                writer.add_scalar(f"ppo/{k}", logs[k], step)
            writer.add_scalar("perf/env_steps_per_s",
                              per_update / max(time.perf_counter() - t_up, 1e-9), step)
            writer.add_scalar("perf/rollout_fraction",
                              t_roll / max(time.perf_counter() - t_up, 1e-9), step)
            if batch["episodes"]:
                cr = float(np.mean([e["completion_rate"] for e in batch["episodes"]]))
                writer.add_scalar("rollout/completion_rate", cr, step)
                writer.add_scalar("rollout/episode_return",
                                  float(np.mean([e["return"] for e in batch["episodes"]])), step)
                writer.add_scalar("rollout/episodes", len(batch["episodes"]), step)
                self.curve.append({"env_steps": step, "completion_rate": cr,
                                   "episodes": len(batch["episodes"]),
                                   "seconds": round(time.perf_counter() - t0, 1)})
            if recent:
                bar.set_postfix(cr=f"{np.mean([e['completion_rate'] for e in recent]):.3f}",
                                kl=f"{logs['approx_kl']:.4f}")
            bar.update(1)
            if self.update % cfg.checkpoint_every == 0 or self.update == total:
                self.save(self.out / "last.pt")
                if cfg.keep_checkpoints:
                    shutil.copyfile(self.out / "last.pt", self.out / f"update_{self.update}.pt")
        bar.close()
        writer.close()
        seconds = time.perf_counter() - t0
        (self.out / "curve.json").write_text(json.dumps(
            {"imitation": self.imitation, "imitation_seconds": self.imitation_seconds,
             "ppo": self.curve, "seconds": round(seconds, 1)}, indent=1) + "\n")
        return {"updates": self.update, "env_steps": self.env_steps,
                "seconds": round(seconds, 1), "checkpoint": str(self.out / "last.pt")}


def parse_args(argv: Sequence[str] | None = None) -> PPOConfig:
    """A :class:`PPOConfig` from command-line arguments (one flag per field)."""
    return parse_config(PPOConfig, argv, prog="mara-train",
                        description="Train MARA (MAT + PPO) on the batched simulator "
                                    "(see docs/mara.md).")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mara-train``."""
    cfg = parse_args(argv)
    summary = Trainer(cfg).run()
    print(f"trained {summary['updates']} updates, {summary['env_steps']} env steps in "
          f"{summary['seconds']:.0f} s -> {summary['checkpoint']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
