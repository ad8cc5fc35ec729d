"""Training jobs the live runtime drives (SPEC §8): the :class:`TrainingJob` protocol, job
specs, and the built-in kinds.

A job is one real training run. The runtime never looks inside it; it only asks it to

* ``setup(seed)``: build the model, optimiser, data and generator from a seed;
* ``train(units, nodes)``: train for ``units`` work units with ``nodes``-way synchronous data
  parallelism, and return the observed loss (validation loss) afterwards;
* ``save() -> bytes`` and ``load(blob)``: serialise and restore everything that training
  depends on (parameters, optimiser state, generator state, counters), so that a job moved
  to another worker continues exactly as if it had stayed.

**Work units and nodes.** A work unit is a fixed amount of training in the kind's own unit
(here: samples seen). With k nodes a job trains k units per call of ``train(1, k)`` with a
k-times larger batch (synchronous data parallelism: k workers each compute the gradient of
their share of the batch and the gradients are averaged every step; computed in one process
it is the same arithmetic), so k nodes see k times the samples per slot in the same number
of optimiser steps, and progress per sample falls with k as it does in real clusters.

A job kind is named by a :class:`JobSpec`: ``kind`` is a built-in name of :data:`JOB_KINDS`
or ``"package.module:Class"`` (your own training loop: a class with the four methods,
constructed as ``Class(**variant)``), ``variant`` its keyword arguments (the hyperparameters
that make curves differ) and ``seed``.
"""

from __future__ import annotations

import functools
import importlib
import io
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from core_env.live.sb3_job import SB3ClassicJob
from core_env.live.scaling import check_lr_scaling, scaled_lr


@runtime_checkable
class TrainingJob(Protocol):
    """One real training run (see the module docstring)."""

    def setup(self, seed: int) -> None:
        """Create the run's state from ``seed``."""

    def train(self, units: int, nodes: int) -> float:
        """Train ``units`` work units on ``nodes`` nodes; return the observed loss."""

    def save(self) -> bytes:
        """Everything training depends on, serialised."""

    def load(self, blob: bytes) -> None:
        """Restore a state written by :meth:`save`."""


@dataclass(frozen=True)
class JobSpec:
    """What to build: a job kind, its hyperparameters and its seed.

    Attributes:
        kind: a name of :data:`JOB_KINDS` or ``"package.module:Class"``.
        variant: keyword arguments of the kind's constructor.
        seed: the seed of :meth:`TrainingJob.setup`.
    """

    kind: str
    variant: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError(f"kind: expected a job kind name, got {self.kind!r}")
        if not isinstance(self.variant, dict):
            raise ValueError(f"variant: expected a dict of keyword arguments, got "
                             f"{type(self.variant).__name__}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed: expected an integer >= 0, got {self.seed!r}")


def job_class(kind: str) -> type:
    """The class of a job kind (a built-in name or ``"package.module:Class"``).

    Raises:
        ValueError: unknown name, or a spec that does not import or is not a class with
            the :class:`TrainingJob` methods.
    """
    if kind in JOB_KINDS:
        return JOB_KINDS[kind]
    module_name, sep, attr = kind.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"kind {kind!r}: expected one of {sorted(JOB_KINDS)} or "
                         f"'package.module:Class'")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"kind {kind!r}: cannot import it ({e})") from e
    missing = [m for m in ("setup", "train", "save", "load") if not callable(getattr(cls, m,
                                                                                    None))]
    if missing:
        raise ValueError(f"kind {kind!r}: {attr} has no {', '.join(missing)} (see "
                         f"core_env.live.TrainingJob)")
    return cls


def make_job(spec: JobSpec) -> TrainingJob:
    """Build and set up the job of ``spec`` (a fresh run at its seed)."""
    try:
        job = job_class(spec.kind)(**spec.variant)
    except TypeError as e:
        raise ValueError(f"variant of {spec.kind!r}: {e}") from e
    job.setup(spec.seed)
    return job


def _arrays_to_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _bytes_to_arrays(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


class MLPDigitsJob:
    """A one-hidden-layer MLP on scikit-learn's bundled digits (8x8 images, 10 classes),
    trained with minibatch SGD with momentum in numpy (no torch).

    The split is fixed (stratified 70/30, seed 0, the split of the ``real-vision`` bank's
    ``digits`` variant), pixels scaled to [0, 1]; the observed loss is the validation
    cross-entropy. A work unit is ``unit_samples`` training samples; with k nodes a step
    uses a batch of ``k * batch`` samples (synchronous data parallelism).

    Args:
        hidden: hidden units. lr: learning rate (of one node's batch). momentum: SGD
            momentum. batch: per-node batch size. unit_samples: samples per work unit (a
            multiple of ``batch``).
        lr_scaling: the learning rate with k nodes: ``"none"`` (lr), ``"sqrt"`` (lr *
            sqrt(k)) or ``"linear"`` (lr * k, the linear scaling rule of Goyal et al. 2017).
    """

    def __init__(self, hidden: int = 32, lr: float = 0.05, momentum: float = 0.9,
                 batch: int = 16, unit_samples: int = 256, lr_scaling: str = "none") -> None:
        if unit_samples % batch:
            raise ValueError(f"unit_samples: expected a multiple of batch={batch}, got "
                             f"{unit_samples}")
        check_lr_scaling(lr_scaling)
        self.lr_scaling = lr_scaling
        self.hidden, self.lr, self.momentum = int(hidden), float(lr), float(momentum)
        self.batch, self.unit_samples = int(batch), int(unit_samples)
        self.params: dict[str, np.ndarray] = {}

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(x_train, y_train, x_val, y_val) of the fixed split (loaded once per process)."""
        try:
            from sklearn.datasets import load_digits
            from sklearn.model_selection import train_test_split
        except ImportError as e:  # pragma: no cover - the live extra installs it
            raise ImportError("the mlp-digits job needs scikit-learn: pip install -e "
                              "'.[live]'") from e
        x, y = load_digits(return_X_y=True)
        xt, xv, yt, yv = train_test_split(x / 16.0, y, test_size=0.3, random_state=0,
                                          stratify=y)
        return xt, yt, xv, yv

    def setup(self, seed: int) -> None:
        self.x, self.y, self.xv, self.yv = self.data()
        rng = np.random.default_rng(seed)
        d, h = self.x.shape[1], self.hidden
        self.params = {
            "w1": rng.normal(0.0, 1.0 / math.sqrt(d), (d, h)), "b1": np.zeros(h),
            "w2": rng.normal(0.0, 1.0 / math.sqrt(h), (h, 10)), "b2": np.zeros(10)}
        self.velocity = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.rng = rng
        self.samples = 0

    def _forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.params
        hid = np.maximum(x @ p["w1"] + p["b1"], 0.0)
        logits = hid @ p["w2"] + p["b2"]
        logits -= logits.max(axis=1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(axis=1, keepdims=True)
        return hid, prob

    def loss(self) -> float:
        """Validation cross-entropy."""
        _, prob = self._forward(self.xv)
        return float(-np.mean(np.log(prob[np.arange(len(self.yv)), self.yv] + 1e-12)))

    def train(self, units: int, nodes: int) -> float:
        p, v = self.params, self.velocity
        bsz = self.batch * nodes
        lr = scaled_lr(self.lr, self.lr_scaling, nodes)
        for _ in range(units * self.unit_samples // self.batch):
            idx = self.rng.integers(0, len(self.y), bsz)
            x, y = self.x[idx], self.y[idx]
            hid, prob = self._forward(x)
            grad = prob
            grad[np.arange(bsz), y] -= 1.0
            grad /= bsz
            grads = {"w2": hid.T @ grad, "b2": grad.sum(axis=0)}
            dh = (grad @ p["w2"].T) * (hid > 0)
            grads["w1"], grads["b1"] = x.T @ dh, dh.sum(axis=0)
            for k in p:
                v[k] = self.momentum * v[k] - lr * grads[k]
                p[k] = p[k] + v[k]
            self.samples += bsz
        return self.loss()

    def save(self) -> bytes:
        state = {f"p_{k}": np.asarray(a) for k, a in self.params.items()}  # numpy or torch
        state.update({f"v_{k}": np.asarray(a) for k, a in self.velocity.items()})
        bitgen = self.rng.bit_generator.state
        state["rng_state"] = np.array([bitgen["state"]["state"], bitgen["state"]["inc"]],
                                      dtype=object).astype(str)
        state["rng_extra"] = np.array([bitgen["has_uint32"], bitgen["uinteger"]])
        state["samples"] = np.array(self.samples)
        return _arrays_to_bytes(state)

    def load(self, blob: bytes) -> None:
        state = _bytes_to_arrays(blob)
        self.params = {k[2:]: a for k, a in state.items() if k.startswith("p_")}
        self.velocity = {k[2:]: a for k, a in state.items() if k.startswith("v_")}
        s, inc = (int(v) for v in state["rng_state"])
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = {
            "bit_generator": "PCG64", "state": {"state": s, "inc": inc},
            "has_uint32": int(state["rng_extra"][0]), "uinteger": int(state["rng_extra"][1])}
        self.samples = int(state["samples"])


class MLPMnist1DJob(MLPDigitsJob):
    """The MLP of :class:`MLPDigitsJob` on MNIST-1D (Greydanus 2020: 10 classes of
    one-dimensional signals of length 40), built offline by the ``mnist1d`` package
    (``make_dataset`` with its default arguments, the ``mnist1d`` variant of the
    ``real-vision`` bank: 4,000 training and 1,000 validation signals; the ``live`` extra).
    Work units, nodes, variants and the observed loss are as for :class:`MLPDigitsJob`.
    """

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(x_train, y_train, x_val, y_val) (built once per process)."""
        import random

        try:
            from mnist1d.data import get_dataset_args, make_dataset
        except ImportError as e:  # pragma: no cover - the live extra installs it
            raise ImportError("the mlp-mnist1d job needs mnist1d: pip install -e "
                              "'.[live]'") from e
        py_state, np_state = random.getstate(), np.random.get_state()
        try:  # make_dataset reseeds the global generators: leave them as they were
            d = make_dataset(get_dataset_args())
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
        return (d["x"].astype(np.float64), d["y"].astype(np.int64),
                d["x_test"].astype(np.float64), d["y_test"].astype(np.int64))


class CNNDigitsJob(MLPDigitsJob):
    """A small convolutional network on the same digits split, in torch (the ``agents``
    extra; imported when the job is built, so ``core_env`` does not need torch).

    Two 3x3 convolutions of ``channels`` channels with ReLU, a 2x2 max-pool and a linear
    layer to the 10 classes, trained with minibatch SGD with momentum (the update of
    :class:`MLPDigitsJob`, on torch's gradients). The initial weights come from a
    ``torch.Generator`` seeded with the job's seed, the minibatches from the same numpy
    generator as the MLP's, so the run is determined by the seed (training runs on one torch
    thread, whatever the process's setting, so that the sums are the same in every
    process). Work units, nodes,
    ``lr_scaling`` and the observed loss are as for :class:`MLPDigitsJob`.

    Args:
        channels: convolution channels. lr, momentum, batch, unit_samples, lr_scaling: as
            for :class:`MLPDigitsJob`.
    """

    def __init__(self, channels: int = 8, lr: float = 0.05, momentum: float = 0.9,
                 batch: int = 16, unit_samples: int = 256, lr_scaling: str = "none") -> None:
        super().__init__(hidden=1, lr=lr, momentum=momentum, batch=batch,
                         unit_samples=unit_samples, lr_scaling=lr_scaling)
        if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
            raise ValueError(f"channels: expected an integer >= 1, got {channels!r}")
        self.channels = channels

    def setup(self, seed: int) -> None:
        import torch

        x, self.y, xv, self.yv = self.data()
        self.x = torch.from_numpy(x.reshape(-1, 1, 8, 8).astype(np.float32))
        self.xv = torch.from_numpy(xv.reshape(-1, 1, 8, 8).astype(np.float32))
        gen = torch.Generator().manual_seed(seed)
        c = self.channels

        def init(*shape: int) -> torch.Tensor:  # He-uniform in the fan-in
            fan_in = math.prod(shape[1:])
            bound = math.sqrt(6.0 / fan_in)
            return (torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1) * bound

        self.params = {"c1": init(c, 1, 3, 3), "c1b": torch.zeros(c),
                       "c2": init(c, c, 3, 3), "c2b": torch.zeros(c),
                       "fc": init(10, c * 16), "fcb": torch.zeros(10)}
        self.velocity = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.rng = np.random.default_rng(seed)
        self.samples = 0

    def _logits(self, x: Any) -> Any:
        import torch.nn.functional as F

        p = self.params
        h = F.relu(F.conv2d(x, p["c1"], p["c1b"], padding=1))
        h = F.max_pool2d(F.relu(F.conv2d(h, p["c2"], p["c2b"], padding=1)), 2)
        return F.linear(h.flatten(1), p["fc"], p["fcb"])

    def loss(self) -> float:
        import torch
        import torch.nn.functional as F

        with torch.no_grad():
            return float(F.cross_entropy(self._logits(self.xv), torch.from_numpy(self.yv)))

    def train(self, units: int, nodes: int) -> float:
        import torch

        bsz = self.batch * nodes
        lr = scaled_lr(self.lr, self.lr_scaling, nodes)
        y_all = torch.from_numpy(self.y)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the same sums in every process (restored below)
        try:
            self._steps(units * self.unit_samples // self.batch, bsz, lr, y_all)
            return self.loss()
        finally:
            torch.set_num_threads(threads)

    def _steps(self, steps: int, bsz: int, lr: float, y_all: Any) -> None:
        import torch
        import torch.nn.functional as F

        p, v = self.params, self.velocity
        for _ in range(steps):
            idx = torch.from_numpy(self.rng.integers(0, len(self.y), bsz))
            for t in p.values():
                t.requires_grad_(True)
            loss = F.cross_entropy(self._logits(self.x[idx]), y_all[idx])
            grads = torch.autograd.grad(loss, list(p.values()))
            with torch.no_grad():
                for (k, t), g in zip(p.items(), grads):
                    v[k] = self.momentum * v[k] - lr * g
                    p[k] = (t + v[k]).detach()
            self.samples += bsz

    def load(self, blob: bytes) -> None:
        import torch

        super().load(blob)
        self.params = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in
                       self.params.items()}
        self.velocity = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in
                         self.velocity.items()}


JOB_KINDS: dict[str, type] = {"mlp-digits": MLPDigitsJob, "mlp-mnist1d": MLPMnist1DJob,
                               "cnn-digits": CNNDigitsJob, "sb3-classic": SB3ClassicJob}
"""Built-in job kinds by name."""
