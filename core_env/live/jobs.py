"""Training jobs the live runtime drives (SPEC §8): the :class:`TrainingJob` protocol, job
specs, the kind registry and the numpy job kinds.

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
that make curves differ) and ``seed``. A built-in kind's module is imported when the kind is
asked for, so ``cnn-digits`` needs torch (the ``jobs-torch`` extra) and ``sb3-classic``
Stable-Baselines3 (``jobs-sb3``) only when they are used::

    job = make_job(JobSpec("mlp-digits", {"hidden": 32}, seed=1))
    losses = [job.train(1, nodes) for nodes in (1, 2, 4)]
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np

from core_env.live.datasets import digits_split, mnist1d_split
from core_env.live.scaling import check_lr_scaling, scaled_lr
from core_env.utils.checks import check_int, check_number, fail

JOB_KINDS: dict[str, str] = {
    "mlp-digits": "core_env.live.jobs:MLPDigitsJob",
    "mlp-mnist1d": "core_env.live.jobs:MLPMnist1DJob",
    "cnn-digits": "core_env.live.torch_jobs:CNNDigitsJob",
    "sb3-classic": "core_env.live.sb3_jobs:SB3ClassicJob",
}
"""Built-in job kinds: name -> the ``"package.module:Class"`` it stands for (imported by
:func:`job_class` when the kind is asked for)."""


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
            fail("kind", self.kind, "a job kind name")
        if not isinstance(self.variant, dict):
            raise ValueError(f"variant: expected a dict of keyword arguments, got "
                             f"{type(self.variant).__name__}")
        check_int("seed", self.seed, minimum=0, exact=True)


def job_class(kind: str) -> type:
    """The class of a job kind (a built-in name or ``"package.module:Class"``).

    Raises:
        ValueError: unknown name, or a spec that does not import or is not a class with
            the :class:`TrainingJob` methods.
        ImportError: a built-in kind whose extra is not installed (the message names it).
    """
    module_name, sep, attr = JOB_KINDS.get(kind, kind).partition(":")
    if kind in JOB_KINDS:
        return getattr(import_module(module_name), attr)
    if not sep or not module_name or not attr:
        raise ValueError(f"kind {kind!r}: expected one of {sorted(JOB_KINDS)} or "
                         f"'package.module:Class'")
    try:
        cls = getattr(import_module(module_name), attr)
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


def arrays_to_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The ``.npz`` bytes of ``arrays`` (read back by :func:`bytes_to_arrays`)."""
    buf = io.BytesIO()
    # cast: numpy's stub also types the names in **kwds as its keyword allow_pickle (a bool)
    np.savez(buf, **cast("dict[str, Any]", arrays))
    return buf.getvalue()


def bytes_to_arrays(blob: bytes) -> dict[str, np.ndarray]:
    """The arrays of :func:`arrays_to_bytes`."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def generator_state(rng: np.random.Generator) -> list[str]:
    """The state of a PCG64 generator as four decimal strings (its 128-bit state and
    increment, ``has_uint32``, ``uinteger``), for a job's :meth:`~TrainingJob.save`."""
    bitgen = rng.bit_generator.state
    return [str(bitgen["state"]["state"]), str(bitgen["state"]["inc"]),
            str(bitgen["has_uint32"]), str(bitgen["uinteger"])]


def generator_from_state(values: Any) -> np.random.Generator:
    """The generator whose :func:`generator_state` is ``values``."""
    state, inc, has_uint32, uinteger = (int(v) for v in values)
    rng = np.random.default_rng()
    rng.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                               "has_uint32": has_uint32, "uinteger": uinteger}
    return rng


class MLPDigitsJob:
    """A one-hidden-layer MLP on scikit-learn's bundled digits (8x8 images, 10 classes),
    trained with minibatch SGD with momentum in numpy (no torch).

    The split is :func:`~core_env.live.datasets.digits_split` (stratified 70/30, seed 0, the
    split of the ``real-vision`` bank's ``digits`` variant); the observed loss is the
    validation cross-entropy. A work unit is ``unit_samples`` training samples; with k nodes
    a step uses a batch of ``k * batch`` samples (synchronous data parallelism).

    Args:
        hidden: hidden units. lr: learning rate (of one node's batch). momentum: SGD
            momentum. batch: per-node batch size. unit_samples: samples per work unit (a
            multiple of ``batch``).
        lr_scaling: the learning rate with k nodes: ``"none"`` (lr), ``"sqrt"`` (lr *
            sqrt(k)) or ``"linear"`` (lr * k, the linear scaling rule of Goyal et al. 2017).
    """

    def __init__(self, hidden: int = 32, lr: float = 0.05, momentum: float = 0.9,
                 batch: int = 16, unit_samples: int = 256, lr_scaling: str = "none") -> None:
        self.hidden = check_int("hidden", hidden, minimum=1)
        self.lr = float(check_number("lr", lr, 0.0, lo_open=True))
        self.momentum = float(check_number("momentum", momentum, 0.0, 1.0, hi_open=True))
        self.batch = check_int("batch", batch, minimum=1)
        self.unit_samples = check_int("unit_samples", unit_samples, minimum=1)
        if unit_samples % batch:
            fail("unit_samples", unit_samples, f"a multiple of batch={batch}")
        self.lr_scaling = check_lr_scaling(lr_scaling)
        # numpy arrays here; CNNDigitsJob (core_env.live.torch_jobs) keeps torch tensors in the
        # same attributes (x, xv, params, velocity), which save() turns into arrays
        self.params: dict[str, Any] = {}
        self.velocity: dict[str, Any]
        self.x: Any
        self.xv: Any

    @staticmethod
    def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(x_train, y_train, x_val, y_val) of the fixed split."""
        return digits_split()

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
        state["rng"] = np.array(generator_state(self.rng))
        state["samples"] = np.array(self.samples)
        return arrays_to_bytes(state)

    def load(self, blob: bytes) -> None:
        state = bytes_to_arrays(blob)
        self.params = {k[2:]: a for k, a in state.items() if k.startswith("p_")}
        self.velocity = {k[2:]: a for k, a in state.items() if k.startswith("v_")}
        self.rng = generator_from_state(state["rng"])
        self.samples = int(state["samples"])


class MLPMnist1DJob(MLPDigitsJob):
    """The MLP of :class:`MLPDigitsJob` on MNIST-1D (Greydanus 2020: 10 classes of
    one-dimensional signals of length 40), built offline by the ``mnist1d`` package
    (:func:`~core_env.live.datasets.mnist1d_split` with its default arguments, the
    ``mnist1d`` variant of the ``real-vision`` bank: 4,000 training and 1,000 validation
    signals; the ``live`` extra). Work units, nodes, variants and the observed loss are as
    for :class:`MLPDigitsJob`.
    """

    @staticmethod
    def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(x_train, y_train, x_val, y_val) of MNIST-1D's own split."""
        return mnist1d_split()
