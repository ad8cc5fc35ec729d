"""Train the FM forecaster: ``mara-train-forecaster`` (SPEC §4).

    mara-train-forecaster                     # the defaults reproduce the shipped checkpoint
    mara-train-forecaster --steps 2000 --out /tmp/fm.pt --log-dir /tmp/fm_runs   # a quick one
    tensorboard --logdir runs/fm

One seeding block: ``np.random.default_rng(seed)`` draws the training cases, then the
validation cases (both from the ``train`` mix, observed on the truth-independent schedule of
:func:`~core_env.forecast.cases.make_cases`; with ``real_weight`` > 0 that fraction replayed
from real curves: training cases from the banks' ``fit`` split, validation cases from their
``calibration`` split; the ``held-out`` mix and split are for evaluation only). One
``torch.Generator`` seeded with ``seed`` initialises the network and then draws every
minibatch, augmentation, noise vector and time. Same seed and thread count on the same
machine give the same checkpoint bytes.

Loop (CFM, Lipman et al. 2023 eq. 23): a minibatch of cases, their prefix features ``f`` and
future trajectories ``x1``, their losses transformed (:func:`transform_log_loss`); ``x0 ~
N(0, I)`` and ``t ~ U[0, 1]``; the :class:`~mara_agents.forecast.matcher.ConditionalFlowMatcher`
gives ``(t, x_t, u_t)``; minimise ``mean ||v_theta(t, x_t, f) - u_t||^2`` with AdamW, linear
warm-up then cosine decay, gradient clipping. After the last step the calibration
temperature ``spread`` is fitted on the validation cases (the [q10, q90] coverage as close to
0.8 as the search grid allows) and stored in the checkpoint's sampler config; a JSON summary
is written next to the checkpoint (same name, ``.json``). The TensorBoard keys
(``log_dir``) are listed in ``docs/forecasting_fm.md``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from core_env.forecast.cases import ForecastCases, make_cases
from core_env.forecast.protocol import HistoryBatch
from core_env.utils.dataclass_cli import parse_config
from mara_agents.forecast.calibrate import evaluate, fit_spread
from mara_agents.forecast.forecaster import FlowMatchingForecaster, SamplerConfig
from mara_agents.forecast.matcher import ConditionalFlowMatcher
from mara_agents.forecast.model import (
    FlowForecastNet,
    ModelConfig,
    future_trajectories,
    prefix_features,
)


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (stored in the checkpoint's JSON summary)."""

    seed: int = 0
    """Seeds the case generator and the torch generator (init, minibatches, noise, times)."""
    cases: int = 300_000
    """Training cases drawn from the mix (those already at or never reaching the target are
    dropped)."""
    val_cases: int = 4000
    """Validation cases (same mix, drawn after the training cases)."""
    prefix: tuple[float, float] = (0.05, 0.6)
    """Range of the observed fraction of the work to target."""
    prefix_bins: int = 1
    """1: the fraction is uniform over ``prefix``; K > 1: ``prefix`` is cut into K
    log-spaced bins, each drawn uniformly for cases/K cases (about log-uniform)."""
    mix: str = "train"
    """Synthetic curve mix to train on; only ``"train"`` (``"held-out"`` is for evaluation)."""
    real_weight: float = 0.0
    """Fraction of the training and validation cases replayed from the real curve banks:
    training cases from the ``real-fit`` mix, validation (and calibration) cases from the
    ``real-calibration`` mix, curves the network never sees (both are parts of the banks'
    train split; the held-out split is for evaluation only). 0: synthetic only (the shipped
    ``fm_default``); ``fm_v1`` was trained with 0.25."""
    batch_size: int = 512
    """Cases per minibatch."""
    steps: int = 40_000
    """Optimiser steps."""
    lr: float = 2e-3
    """Peak learning rate (AdamW)."""
    warmup: int = 500
    """Linear warm-up steps before the cosine decay to 0."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Gradient norm clip."""
    sigma_min: float = 1e-4
    """End width of the conditional path (Lipman et al. 2023 eq. 20)."""
    augment_scale: float = 0.7
    """Augmentation (see :func:`transform_log_loss`): every minibatch row's loss is raised to
    a power exp(U(-a, a)), which scales its relative log-losses (0: off)."""
    augment_floor: float = 3.0
    """Augmentation: every minibatch row's loss gets an offset U(0, c) * y_now added before
    the power, which flattens its end like a higher floor (0: off)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Representation and network sizes (flags ``--model-<field>``, e.g. ``--model-hidden``;
    see :class:`~mara_agents.forecast.model.ModelConfig`)."""
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    """Sampler for validation and the shipped checkpoint (flags ``--sampler-<field>``; its
    ``spread`` is replaced by the fitted calibration temperature when ``calibrate``)."""
    calibrate: bool = True
    """Fit the calibration temperature on the validation cases at the end."""
    calibrate_groups: bool = False
    """Calibrate for the worst group rather than the pool: the temperature minimises the
    largest |coverage - 0.8| over the validation cases' (family, prefix third) groups."""
    val_every: int = 2000
    """Steps between validations (and at the end)."""
    threads: int = 1
    """torch CPU threads for the run (0: leave torch's default); results are reproducible
    for a fixed thread count."""
    log_dir: str = "runs/fm"
    """TensorBoard log directory."""
    out: str = "mara_agents/forecast/weights/fm_default.pt"
    """Checkpoint path (a JSON summary is written next to it)."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        if self.mix != "train":
            raise ValueError(f"mix: expected 'train' (the held-out mix is for evaluation "
                             f"only), got {self.mix!r}")
        for name in ("cases", "val_cases", "batch_size", "steps", "val_every", "prefix_bins"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        for name in ("seed", "warmup", "threads"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 0):
                raise ValueError(f"{name}: expected an integer >= 0, got {v!r}")
        lo, hi = self.prefix
        if not 0.0 < lo <= hi < 1.0:
            raise ValueError(f"prefix: expected 0 < low <= high < 1, got {self.prefix!r}")
        for name in ("lr", "grad_clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: expected > 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.augment_scale <= 2.0:
            raise ValueError(f"augment_scale: expected a number in [0, 2], got "
                             f"{self.augment_scale!r}")
        if not 0.0 <= self.augment_floor <= 10.0:
            raise ValueError(f"augment_floor: expected a number in [0, 10], got "
                             f"{self.augment_floor!r}")
        if not 0.0 <= self.real_weight <= 1.0:
            raise ValueError(f"real_weight: expected a number in [0, 1], got "
                             f"{self.real_weight!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay: expected >= 0, got {self.weight_decay!r}")
        if not isinstance(self.model, ModelConfig):
            raise ValueError(f"model: expected a ModelConfig, got {self.model!r}")
        if not isinstance(self.sampler, SamplerConfig):
            raise ValueError(f"sampler: expected a SamplerConfig, got {self.sampler!r}")
        if self.sampler.tail_points >= self.model.horizon:
            raise ValueError(f"sampler.tail_points: expected < model.horizon "
                             f"({self.model.horizon}), got {self.sampler.tail_points}")


def draw_cases(rng: np.random.Generator, cfg: TrainConfig, n: int, real_mix: str = "real-fit"
               ) -> ForecastCases:
    """n cases with the prefix distribution of ``cfg``: ``round(n * real_weight)`` of them
    from ``real_mix``, the rest from the synthetic mix (one
    :func:`~core_env.forecast.cases.make_cases` call per mix and prefix bin, concatenated)."""
    n_real = int(round(n * cfg.real_weight))
    parts = [_draw_mix(rng, cfg, mix, k) for mix, k in ((cfg.mix, n - n_real),
                                                         (real_mix, n_real)) if k > 0]
    return parts[0] if len(parts) == 1 else concat_cases(parts)


def _draw_mix(rng: np.random.Generator, cfg: TrainConfig, mix: str, n: int) -> ForecastCases:
    if cfg.prefix_bins == 1:
        return make_cases(rng, mix, n, cfg.prefix)
    edges = np.exp(np.linspace(math.log(cfg.prefix[0]), math.log(cfg.prefix[1]),
                               cfg.prefix_bins + 1))
    sizes = np.full(cfg.prefix_bins, n // cfg.prefix_bins)
    sizes[: n % cfg.prefix_bins] += 1
    parts = [make_cases(rng, mix, int(k), (float(lo), float(hi)))
             for k, lo, hi in zip(sizes, edges[:-1], edges[1:], strict=False) if k > 0]
    return concat_cases(parts)


def concat_cases(parts: Sequence[ForecastCases]) -> ForecastCases:
    """Concatenate case sets (histories re-padded to the widest)."""
    width = max(p.batch.log_work.shape[1] for p in parts)

    def pad(a: np.ndarray) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, width - a.shape[1])))

    batch = HistoryBatch(np.concatenate([pad(p.batch.log_work) for p in parts]),
                         np.concatenate([pad(p.batch.log_loss) for p in parts]),
                         np.concatenate([p.batch.length for p in parts]),
                         np.arange(sum(p.batch.size for p in parts), dtype=np.int64))
    return ForecastCases(batch, *(np.concatenate([getattr(p, f) for p in parts])
                                  for f in ForecastCases._fields[1:]))


def training_arrays(cases: ForecastCases, cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefix features and future trajectories of the usable cases (finite positive truth).

    Returns:
        ``(features, x1)``: float32[m, 3L+3] and float32[m, H].
    """
    keep = np.flatnonzero(np.isfinite(cases.remaining) & (cases.remaining > 0))
    b = cases.batch
    batch = type(b)(b.log_work[keep], b.log_loss[keep], b.length[keep], b.key[keep])
    x_now, y_now = batch.last()
    feats = prefix_features(batch, cases.log_targets[keep], cfg)
    x1 = future_trajectories(cases.log_loss_table[keep], x_now, y_now, cfg)
    return torch.from_numpy(feats), torch.from_numpy(x1)


def transform_log_loss(features: torch.Tensor, x1: torch.Tensor, power: torch.Tensor,
                       offset: torch.Tensor, cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply a monotone loss transform to each row (augmentation).

    The remaining work is the first work at which the observed loss is at or below the
    target, so it does not change under any strictly increasing transform of the loss
    applied to the path and the target alike. Rows use ``phi(l) = (l / y_now + offset)**power``
    (an offset raises the floor, flattening the curve's end; a power rescales every log-loss
    difference), i.e. on relative log-losses ``z = ln l - ln y_now``::

        z' = power * ln((exp(z) + offset) / (1 + offset))

    applied to the prefix differences, the target gap and the trajectory (in their
    ``x_scale`` units).

    Args:
        features: float[B, 3L+3] prefix features.
        x1: float[B, H] trajectories.
        power: float[B] > 0.
        offset: float[B] >= 0.
        cfg: the representation (feature layout, x_scale).

    Returns:
        The transformed ``(features, x1)`` (new tensors).
    """
    L = cfg.history_len
    is_loss = torch.zeros(cfg.feature_dim, dtype=torch.bool)
    is_loss[1:3 * L:3] = True
    is_loss[3 * L + 1] = True
    p, c = power[:, None], offset[:, None]

    def phi(z: torch.Tensor) -> torch.Tensor:
        z = z * cfg.x_scale
        return p * torch.log((torch.exp(z) + c) / (1.0 + c)) / cfg.x_scale

    return torch.where(is_loss[None, :], phi(features), features), phi(x1)


def train(cfg: TrainConfig) -> tuple[FlowMatchingForecaster, dict[str, Any]]:
    """Run the training described in the module docstring.

    Returns:
        The trained (and calibrated) forecaster and a JSON-able summary.
    """
    # ---- seeding: one numpy generator for the data, one torch generator for the rest
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)

    model_cfg = cfg.model
    train_cases = draw_cases(rng, cfg, cfg.cases)
    val_cases = draw_cases(rng, cfg, cfg.val_cases, real_mix="real-calibration")
    feats, x1_all = training_arrays(train_cases, model_cfg)  # [N, 3L+3], [N, H]
    n = feats.shape[0]

    net = FlowForecastNet.create(model_cfg, gen)
    matcher = ConditionalFlowMatcher(cfg.sigma_min)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        p = (step - cfg.warmup) / max(cfg.steps - cfg.warmup, 1)
        return 0.5 * (1.0 + math.cos(math.pi * min(p, 1.0)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    writer = SummaryWriter(cfg.log_dir)
    val_fm = FlowMatchingForecaster(net, cfg.sampler, seed=0)
    history: list[dict[str, float]] = []
    t_start = time.perf_counter()
    bar = tqdm(range(cfg.steps), desc="train FM", disable=not cfg.progress, unit="step")
    loss_avg = float("nan")
    for step in bar:
        idx = torch.randint(n, (cfg.batch_size,), generator=gen)
        f, x1 = feats[idx], x1_all[idx]  # [B, 3L+3], [B, H]
        if cfg.augment_scale > 0 or cfg.augment_floor > 0:
            u = torch.rand(2, cfg.batch_size, generator=gen)
            f, x1 = transform_log_loss(f, x1, torch.exp(cfg.augment_scale * (2.0 * u[0] - 1.0)),
                                       cfg.augment_floor * u[1], model_cfg)
        x0 = torch.randn(x1.shape, generator=gen)  # [B, H]
        t, xt, ut = matcher.sample_location_and_conditional_flow(x0, x1, generator=gen)
        net.train()
        v = net(t, xt, f)
        loss = torch.mean((v - ut) ** 2)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        opt.step()
        sched.step()

        value = float(loss.detach())
        loss_avg = value if math.isnan(loss_avg) else 0.98 * loss_avg + 0.02 * value
        writer.add_scalar("train/loss", value, step)
        writer.add_scalar("train/lr", opt.param_groups[0]["lr"], step)
        if (step + 1) % cfg.val_every == 0 or step + 1 == cfg.steps:
            net.eval()
            m = evaluate(val_fm, val_cases)
            for k, val in m.items():
                writer.add_scalar(f"val/{k}", val, step)
            history.append({"step": step + 1, "loss_avg": loss_avg, **m})
            bar.set_postfix(loss=f"{loss_avg:.4f}",
                            val_log=f"{m['median_abs_log_ratio']:.3f}",
                            cov=f"{m['coverage']:.2f}")
    net.eval()
    train_seconds = time.perf_counter() - t_start

    spread, cov = 1.0, history[-1]["coverage"]
    if cfg.calibrate:
        spread, cov = fit_spread(val_fm, val_cases, by_group=cfg.calibrate_groups)
        writer.add_scalar("val/spread", spread, cfg.steps)
        writer.add_scalar("val/coverage_calibrated", cov, cfg.steps)
    writer.close()
    sampler = SamplerConfig(**{**asdict(cfg.sampler), "spread": spread})
    fm = FlowMatchingForecaster(net, sampler, seed=0)
    summary = {"train_config": json.loads(json.dumps(asdict(cfg))),
               "model_config": model_cfg.to_dict(), "sampler_config": asdict(sampler),
               "training_cases": int(n), "validation": history,
               "calibrated_coverage": cov, "train_seconds": round(train_seconds, 1),
               "parameters": int(sum(p.numel() for p in net.parameters()))}
    return fm, summary


# ---------------------------------------------------------------------- command line
def parse_args(argv: Sequence[str] | None = None) -> TrainConfig:
    """Build a :class:`TrainConfig` from command-line arguments (one per field, nested
    configs as ``--model-<field>`` and ``--sampler-<field>``)."""
    return parse_config(TrainConfig, argv, prog="mara-train-forecaster",
                        description="Train MARA's flow-matching loss-curve forecaster (see "
                                    "docs/forecasting_fm.md).")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mara-train-forecaster``: train, calibrate, save, print a summary."""
    cfg = parse_args(argv)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    fm, summary = train(cfg)
    out = Path(cfg.out)
    fm.save(out)
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    last = summary["validation"][-1]
    print(f"saved {out} ({out.stat().st_size / 1e3:.0f} kB, {summary['parameters']} "
          f"parameters) after {summary['train_seconds']:.0f} s; validation median |log "
          f"ratio| {last['median_abs_log_ratio']:.3f}, median rel err "
          f"{last['median_rel_err']:.3f}, coverage {last['coverage']:.2f} -> "
          f"{summary['calibrated_coverage']:.2f} with spread "
          f"{summary['sampler_config']['spread']:.2f}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
