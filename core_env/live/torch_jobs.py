"""The torch job kind ``cnn-digits`` (:class:`CNNDigitsJob`): install the ``jobs-torch`` extra
(``pip install -e ".[jobs-torch,live]"``). :mod:`core_env.live.jobs` imports this module only
when the kind is asked for, so ``core_env`` itself never needs torch::

    job = make_job(JobSpec("cnn-digits", {"channels": 8}, seed=0))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core_env.live.jobs import MLPDigitsJob
from core_env.live.scaling import scaled_lr
from core_env.utils.checks import check_int

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - the jobs-torch extra installs it
    raise ImportError(f"the cnn-digits job kind needs torch: pip install -e "
                      f"'.[jobs-torch]' ({e})") from e


class CNNDigitsJob(MLPDigitsJob):
    """A small convolutional network on the digits split of :class:`MLPDigitsJob`, in torch.

    Two 3x3 convolutions of ``channels`` channels with ReLU, a 2x2 max-pool and a linear
    layer to the 10 classes, trained with minibatch SGD with momentum (the update of
    :class:`MLPDigitsJob`, on torch's gradients). The initial weights come from a
    ``torch.Generator`` seeded with the job's seed, the minibatches from the same numpy
    generator as the MLP's, so the run is determined by the seed (training runs on one torch
    thread, whatever the process's setting, so that the sums are the same in every
    process). Work units, nodes, ``lr_scaling`` and the observed loss are as for
    :class:`MLPDigitsJob`.

    Args:
        channels: convolution channels. lr, momentum, batch, unit_samples, lr_scaling: as
            for :class:`MLPDigitsJob`.
    """

    def __init__(self, channels: int = 8, lr: float = 0.05, momentum: float = 0.9,
                 batch: int = 16, unit_samples: int = 256, lr_scaling: str = "none") -> None:
        super().__init__(hidden=1, lr=lr, momentum=momentum, batch=batch,
                         unit_samples=unit_samples, lr_scaling=lr_scaling)
        self.channels = check_int("channels", channels, minimum=1)

    def setup(self, seed: int) -> None:
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
        p = self.params
        h = F.relu(F.conv2d(x, p["c1"], p["c1b"], padding=1))
        h = F.max_pool2d(F.relu(F.conv2d(h, p["c2"], p["c2b"], padding=1)), 2)
        return F.linear(h.flatten(1), p["fc"], p["fcb"])

    def loss(self) -> float:
        with torch.no_grad():
            return float(F.cross_entropy(self._logits(self.xv), torch.from_numpy(self.yv)))

    def train(self, units: int, nodes: int) -> float:
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
        p, v = self.params, self.velocity
        for _ in range(steps):
            idx = torch.from_numpy(self.rng.integers(0, len(self.y), bsz))
            for t in p.values():
                t.requires_grad_(True)
            loss = F.cross_entropy(self._logits(self.x[idx]), y_all[idx])
            grads = torch.autograd.grad(loss, list(p.values()))
            with torch.no_grad():
                for (k, t), g in zip(p.items(), grads, strict=False):
                    v[k] = self.momentum * v[k] - lr * g
                    p[k] = (t + v[k]).detach()
            self.samples += bsz

    def load(self, blob: bytes) -> None:
        super().load(blob)
        self.params = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in
                       self.params.items()}
        self.velocity = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in
                         self.velocity.items()}
