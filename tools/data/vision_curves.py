"""The ``real-vision`` curve bank's runs: small CNNs trained on scikit-learn digits and MNIST-1D.

Every :class:`RunSpec` of :data:`SPECS` is one real training run on a data-set variant of
:data:`VARIANTS` (the data of :mod:`core_env.live.datasets`); :func:`train_curve` trains it on
the CPU (one torch thread, seeded: the same curve on the same machine) and returns the
validation cross-entropy at roughly log-spaced numbers of training samples seen.
:data:`HELD_OUT_GROUPS` is the held-out split. The variants and runs: ``docs/workloads.md``::

    python -m tools.data.vision_curves --out /tmp/banks_raw/real-vision.npz [--limit N]
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np
import torch
from torch import nn

from core_env.live.datasets import MNIST1D_VARIANTS, digits_split, mnist1d_split
from tools.data.raw import generator_main, train_all

HELD_OUT_GROUPS: frozenset[str] = frozenset({"digits-parity", "mnist1d-noisy"})
"""Data-set variants whose curves form the held-out split (see the module docstring)."""

VARIANTS: tuple[str, ...] = ("digits", "digits-parity", "mnist1d", "mnist1d-noisy",
                             "mnist1d-shuffled")
"""Every data-set variant, in the order of :data:`SPECS`."""

LOSS_FLOOR = 1e-4
"""Validation losses are clipped below at this value so that log(loss) stays finite."""


@dataclass(frozen=True)
class RunSpec:
    """One training run: a data-set variant, a model, an optimiser recipe and a budget."""

    dataset: str
    """Data-set variant, one of :data:`VARIANTS`."""
    width: int
    """Channels of every convolution."""
    depth: int
    """Number of convolutions (3x3 or length-3 kernels, ReLU after each)."""
    optimizer: str
    """``"sgd"`` (plain), ``"momentum"`` (SGD, momentum 0.9) or ``"adam"``."""
    lr: float
    """Peak learning rate."""
    batch_size: int
    weight_decay: float
    """L2 penalty passed to the optimiser."""
    schedule: str = "constant"
    """``"constant"``, ``"cosine"`` (to 0 at the end) or ``"step"`` (x0.1 at 50% and 75%)."""
    augment: str = "none"
    """``"none"``, ``"shift"`` (random zero-padded translation per sample: +-1 pixel for
    digits, +-2 positions for MNIST-1D) or ``"noise"`` (Gaussian input noise, 0.1 for digits,
    0.25 for MNIST-1D)."""
    label_noise: float = 0.0
    """Fraction of training labels replaced by another class (fixed per seed)."""
    seed: int = 0
    """Seeds the initialisation, data order, augmentation and label noise."""
    epochs: int = 20
    """Passes over the training split."""
    n_evals: int = 40
    """Target number of evaluations, at log-spaced steps (fewer when steps coincide)."""

    @property
    def label(self) -> str:
        """A unique, readable name of the run."""
        return (f"{self.dataset}/w{self.width}d{self.depth}/{self.optimizer}-lr{self.lr:g}"
                f"-{self.schedule}/bs{self.batch_size}/wd{self.weight_decay:g}/{self.augment}"
                f"/ln{self.label_noise:g}/e{self.epochs}/s{self.seed}")


@dataclass(frozen=True)
class _Split:
    """Train / validation arrays of one variant (inputs float32 with a channel axis)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    n_classes: int


@functools.lru_cache(maxsize=None)
def _load(dataset: str) -> _Split:
    """The fixed train / validation split of a data-set variant (cached): the arrays of
    :mod:`core_env.live.datasets` as float32 with a channel axis. Digits are 8x8 images
    stored channels-last (strides of an (N, 8, 8, 1) array): the layout the bank was built
    with, which makes torch's convolutions take their channels-last path (the sums, and so
    the curves' last bits, depend on it)."""
    if dataset in ("digits", "digits-parity"):
        x_tr, y_tr, x_va, y_va = digits_split()
        x_tr, x_va = (x.reshape(-1, 8, 8, 1).astype(np.float32).transpose(0, 3, 1, 2)
                      for x in (x_tr, x_va))
        if dataset == "digits-parity":
            return _Split(x_tr, y_tr % 2, x_va, y_va % 2, 2)
        return _Split(x_tr, y_tr, x_va, y_va, 10)
    if dataset in MNIST1D_VARIANTS:
        x_tr, y_tr, x_va, y_va = mnist1d_split(dataset)
        return _Split(x_tr.astype(np.float32)[:, None], y_tr,
                      x_va.astype(np.float32)[:, None], y_va, 10)
    raise ValueError(f"unknown data-set variant {dataset!r}; expected one of {VARIANTS}")


def _model(spec: RunSpec, split: _Split) -> nn.Module:
    """A plain CNN: ``depth`` convolutions (the first one or two with stride 2) and a linear
    head on the flattened features. 2-D for digits, 1-D for MNIST-1D."""
    two_d = split.x_train.ndim == 4
    conv = nn.Conv2d if two_d else nn.Conv1d
    n_strided = 1 if two_d else 2
    layers: list[nn.Module] = []
    channels = split.x_train.shape[1]
    for i in range(spec.depth):
        layers += [conv(channels, spec.width, 3, stride=2 if i < n_strided else 1, padding=1),
                   nn.ReLU()]
        channels = spec.width
    layers.append(nn.Flatten())
    body = nn.Sequential(*layers)
    with torch.no_grad():
        n_features = body(torch.from_numpy(split.x_train[:1])).shape[1]
    return nn.Sequential(body, nn.Linear(n_features, split.n_classes))


def _optimizer(spec: RunSpec, params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """The optimiser named by the spec."""
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, weight_decay=spec.weight_decay)
    if spec.optimizer == "momentum":
        return torch.optim.SGD(params, lr=spec.lr, momentum=0.9, weight_decay=spec.weight_decay)
    if spec.optimizer == "adam":
        return torch.optim.Adam(params, lr=spec.lr, weight_decay=spec.weight_decay)
    raise ValueError(f"unknown optimizer {spec.optimizer!r}")


def _lr_factor(schedule: str, step: int, total: int) -> float:
    """Multiplier of the peak learning rate before optimiser step ``step`` (0-based)."""
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * step / total))
    if schedule == "step":
        return 0.1 ** ((step >= total // 2) + (step >= (3 * total) // 4))
    raise ValueError(f"unknown schedule {schedule!r}")


def _noisy_labels(y: np.ndarray, n_classes: int, fraction: float, seed: int) -> np.ndarray:
    """``y`` with a ``fraction`` of its entries replaced by a different class."""
    if fraction == 0.0:
        return y
    rng = np.random.default_rng([seed, 1])
    flip = rng.random(len(y)) < fraction
    offset = rng.integers(1, n_classes, size=len(y))
    return np.where(flip, (y + offset) % n_classes, y)


def _augment(x: torch.Tensor, kind: str, gen: torch.Generator) -> torch.Tensor:
    """A randomly augmented copy of the batch ``x`` (N, C, *spatial)."""
    if kind == "none":
        return x
    two_d = x.ndim == 4
    if kind == "noise":
        return x + (0.1 if two_d else 0.25) * torch.randn(x.shape, generator=gen)
    if kind == "shift":
        pad = 1 if two_d else 2
        n_spatial = x.ndim - 2
        padded = nn.functional.pad(x, (pad, pad) * n_spatial)
        shifts = torch.randint(0, 2 * pad + 1, (x.shape[0], n_spatial), generator=gen)
        out = torch.empty_like(x)
        for offset in torch.unique(shifts, dim=0):
            rows = (shifts == offset).all(dim=1)
            if two_d:
                i, j = int(offset[0]), int(offset[1])
                out[rows] = padded[rows, :, i:i + x.shape[2], j:j + x.shape[3]]
            else:
                i = int(offset[0])
                out[rows] = padded[rows, :, i:i + x.shape[2]]
        return out
    raise ValueError(f"unknown augmentation {kind!r}")


def _eval_steps(total_steps: int, n_evals: int) -> np.ndarray:
    """Distinct, roughly log-spaced optimiser steps in [1, total_steps], ending at the last."""
    return np.unique(np.round(np.geomspace(1, total_steps, n_evals)).astype(np.int64))


def train_curve(spec: RunSpec) -> dict:
    """Train one run and return its validation curve.

    Returns ``{"group": spec.dataset, "label": spec.label, "work": float64[n], "loss":
    float64[n]}``: ``work`` the cumulative training samples seen at each evaluation (strictly
    increasing, > 0), ``loss`` the mean validation cross-entropy there (clipped below at
    :data:`LOSS_FLOOR`). Runs on the CPU with one torch thread (the previous thread count is
    restored); raises ``FloatingPointError`` if the run diverges to a non-finite loss.
    """
    split = _load(spec.dataset)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(spec.seed)
        gen = torch.Generator().manual_seed(spec.seed)
        model = _model(spec, split)
        opt = _optimizer(spec, model.parameters())
        x_train = torch.from_numpy(split.x_train)
        y_train = torch.from_numpy(_noisy_labels(split.y_train, split.n_classes,
                                                 spec.label_noise, spec.seed))
        x_val, y_val = torch.from_numpy(split.x_val), torch.from_numpy(split.y_val)
        n_train = len(y_train)
        steps_per_epoch = math.ceil(n_train / spec.batch_size)
        total_steps = spec.epochs * steps_per_epoch
        evals = set(_eval_steps(total_steps, spec.n_evals).tolist())
        work: list[float] = []
        loss: list[float] = []
        step, seen = 0, 0
        for _ in range(spec.epochs):
            order = torch.randperm(n_train, generator=gen)
            for start in range(0, n_train, spec.batch_size):
                idx = order[start:start + spec.batch_size]
                for group in opt.param_groups:
                    group["lr"] = spec.lr * _lr_factor(spec.schedule, step, total_steps)
                model.train()
                batch_loss = nn.functional.cross_entropy(
                    model(_augment(x_train[idx], spec.augment, gen)), y_train[idx])
                opt.zero_grad()
                batch_loss.backward()
                opt.step()
                step += 1
                seen += len(idx)
                if step in evals:
                    model.eval()
                    with torch.no_grad():
                        val = float(nn.functional.cross_entropy(model(x_val), y_val))
                    if not math.isfinite(val):
                        raise FloatingPointError(f"{spec.label}: non-finite validation loss "
                                                 f"after {seen} samples")
                    work.append(float(seen))
                    loss.append(max(val, LOSS_FLOOR))
    finally:
        torch.set_num_threads(threads)
    return {"group": spec.dataset, "label": spec.label,
            "work": np.asarray(work, dtype=np.float64), "loss": np.asarray(loss, dtype=np.float64)}


_RUNS_PER_VARIANT: dict[str, int] = {"digits": 16, "digits-parity": 12, "mnist1d": 16,
                                     "mnist1d-noisy": 12, "mnist1d-shuffled": 14}
"""Sampled runs per variant (each variant also gets two seed replicates of its first run)."""

_LR_RANGE: dict[str, tuple[float, float]] = {"sgd": (1e-2, 1.0), "momentum": (3e-3, 0.3),
                                             "adam": (3e-4, 3e-2)}
"""Log-uniform peak learning-rate range per optimiser; the top of each range is too high."""


def _make_specs() -> tuple[RunSpec, ...]:
    """The fixed run list: per variant, runs drawn from ``random.Random(variant index)``
    (only ``random()`` is used, whose stream Python keeps stable across versions), then two
    more seeds of the variant's first run."""
    specs: list[RunSpec] = []
    for v, dataset in enumerate(VARIANTS):
        rng = random.Random(v)

        def pick(options: tuple, rng: random.Random = rng):
            return options[int(rng.random() * len(options))]

        digits = dataset.startswith("digits")
        drawn: list[RunSpec] = []
        for i in range(_RUNS_PER_VARIANT[dataset]):
            optimizer = pick(("sgd", "momentum", "momentum", "adam", "adam"))
            lo, hi = _LR_RANGE[optimizer]
            lr = float(f"{lo * (hi / lo) ** rng.random():.2g}")
            drawn.append(RunSpec(
                dataset=dataset,
                width=pick((8, 16, 32) if digits else (16, 32, 64)),
                depth=pick((1, 2, 3) if digits else (2, 3, 4)),
                optimizer=optimizer, lr=lr,
                batch_size=pick((16, 32, 64, 128) if digits else (32, 64, 128, 256)),
                weight_decay=pick((0.0, 0.0, 1e-4, 1e-3, 1e-2)),
                schedule=pick(("constant", "constant", "cosine", "step")),
                augment=pick(("none", "none", "none", "shift", "noise")),
                label_noise=pick((0.0, 0.0, 0.0, 0.0, 0.1, 0.3)),
                seed=i,
                epochs=pick((30, 50, 80) if digits else (20, 30, 40))))
        replicates = [replace(drawn[0], seed=100 + k) for k in range(2)]
        specs += drawn + replicates
    return tuple(specs)


SPECS: tuple[RunSpec, ...] = _make_specs()
"""Every run of the bank, in a fixed order (grouped by variant, see :data:`VARIANTS`)."""


def generate(specs: Iterable[RunSpec] = SPECS, progress: bool = True) -> list[dict]:
    """Train every spec in order and return the curves (:func:`train_curve`; progress lines
    on stderr)."""
    return train_all(specs, train_curve, progress)


if __name__ == "__main__":  # --out FILE.npz [--limit N] [--quiet]
    generator_main(__doc__.splitlines()[0], SPECS, generate)
