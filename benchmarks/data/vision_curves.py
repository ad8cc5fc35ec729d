"""Real vision learning curves: small CNNs trained on scikit-learn digits and MNIST-1D.

Each run trains one small convolutional network (torch, CPU, one thread) and records the
validation cross-entropy at roughly log-spaced numbers of training samples seen (dense early,
so a curve covers the fast early drop and the late plateau). The noise is kept as measured:
no smoothing. The curves form a bank that a scheduler simulator replays: one simulated job
follows one real curve (validation loss against work, work = training samples seen).

Data-set variants (the unit of the train / held-out split; every variant has a train /
validation split fixed by a seed, so all runs of a variant are scored on the same rows):

* ``digits``: ``sklearn.datasets.load_digits`` (8x8 images, 10 classes, 1797 images), a
  stratified 70/30 split (seed 0), pixels scaled to [0, 1]; 2-D CNNs.
* ``digits-parity``: the same images and split, labels odd / even (2 classes).
* ``mnist1d``: MNIST-1D built offline with its default arguments (5000 signals of length 40,
  10 classes, its own 80/20 split); 1-D CNNs.
* ``mnist1d-noisy``: MNIST-1D built offline with more noise (correlated 0.4 instead of 0.25,
  i.i.d. 0.1 instead of 0.02), more shear (1.0 instead of 0.75) and another seed (7); it
  plateaus higher and overfits sooner.
* ``mnist1d-shuffled``: MNIST-1D with default arguments but a fixed permutation of the 40
  positions (``shuffle_seq``), which breaks the locality a convolution relies on.

Held-out split (:data:`HELD_OUT_GROUPS`): ``digits-parity`` and ``mnist1d-noisy``. Each is a
near shift of a variant kept for training (same inputs, another task; same generator, another
difficulty), one from each input family, so the held-out curves test whether what is learnt on
the training variants carries over to new loss scales (a 2-class initial loss of ln 2, a
higher noise floor) without leaving the domain altogether.

The MNIST-1D variants are built with ``mnist1d.data.make_dataset`` only (never its download
path). ``make_dataset`` reseeds the global ``random`` and ``numpy`` generators; their states
are restored afterwards.

Runs (:data:`SPECS`) vary width, depth, optimiser (plain SGD, SGD with momentum, Adam),
learning rate (including too-high ones that make a curve noisy or drift back up), learning-rate
schedule (constant, cosine, step drops), batch size, weight decay, training-label noise,
augmentation and seed. A few too-high learning rates kill the network (the loss stays at or
returns to ln(classes)); such curves are kept as measured. Every run is deterministic on a
given machine (seeded, CPU, one thread), so rerunning a spec gives the same curve.

    python -m benchmarks.data.vision_curves --out /tmp/banks_raw/real-vision.npz [--limit N]
"""

from __future__ import annotations

import functools
import math
import random
import sys
import time
from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np
import torch
from torch import nn

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
    """The fixed train / validation split of a data-set variant (cached)."""
    if dataset in ("digits", "digits-parity"):
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        x = (digits.images / 16.0).astype(np.float32)[:, None]
        y = digits.target.astype(np.int64)
        x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.3, random_state=0,
                                                  stratify=y)
        if dataset == "digits-parity":
            return _Split(x_tr, y_tr % 2, x_va, y_va % 2, 2)
        return _Split(x_tr, y_tr, x_va, y_va, 10)
    if dataset in ("mnist1d", "mnist1d-noisy", "mnist1d-shuffled"):
        from mnist1d.data import get_dataset_args, make_dataset

        args = get_dataset_args()
        if dataset == "mnist1d-noisy":
            args.corr_noise_scale = 0.4
            args.iid_noise_scale = 0.1
            args.shear_scale = 1.0
            args.seed = 7
        elif dataset == "mnist1d-shuffled":
            args.shuffle_seq = True
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            data = make_dataset(args)
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
        return _Split(data["x"].astype(np.float32)[:, None], data["y"].astype(np.int64),
                      data["x_test"].astype(np.float32)[:, None],
                      data["y_test"].astype(np.int64), 10)
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
    """Train every spec in order (see :func:`train_curve`); ``progress`` prints one line per
    run to stderr."""
    specs = tuple(specs)
    curves = []
    start = time.perf_counter()
    for i, spec in enumerate(specs):
        curves.append(train_curve(spec))
        if progress:
            loss = curves[-1]["loss"]
            print(f"[{i + 1}/{len(specs)} {time.perf_counter() - start:6.1f}s] {spec.label}: "
                  f"loss {loss[0]:.3f} -> {loss[-1]:.3f} (min {loss.min():.3f})",
                  file=sys.stderr, flush=True)
    return curves


def main(argv: list[str] | None = None) -> None:
    """Command line: generate the bank (or its first ``--limit`` runs) and write it as
    ``--out FILE.npz`` (``benchmarks.data.raw.generator_main``)."""
    from benchmarks.data.raw import generator_main

    generator_main(__doc__.splitlines()[0], SPECS, generate, argv)


if __name__ == "__main__":
    main()
