"""The FM forecaster's representation and network: prefix encoder + velocity MLP (SPEC §4).

Representation
--------------
For a task observed up to cumulative work ``s_now`` with latest observed loss ``y_now``:

* **Future trajectory** ``x`` (float[H]): the observed log-loss on a fixed grid of future
  log-work offsets ``d_j = D_max * j / H``, j = 1..H (``D_max`` = ``max_log_ratio``, ln 32 by
  default, so a 10% prefix, which needs about 10x more work, is inside the horizon),
  relative to the current loss and divided by a fixed scale::

      x_j = (ln l(s_now * exp(d_j)) - ln y_now) / x_scale

  ``x_0 = 0`` at ``d_0 = 0`` is implicit. Training targets come from the *observed* noise
  path (a case's ``log_loss_table`` on :data:`core_env.curves.LOG_WORK_GRID`, linearly
  interpolated), since success is decided by the observed loss.
* **Prefix features** (float[3 L + 3]): the last ``L`` = ``history_len`` observations, each
  ``(ln s_i - ln s_now, (ln l_i - ln y_now) / x_scale, valid)`` (oldest first, right-aligned:
  the latest observation is always the last row; missing rows are zeros), then three
  scalars: ``(ln s_now - log_work_center) / log_work_scale``, the target gap
  ``(ln eps - ln y_now) / x_scale`` and ``n_obs / L``.

Network
-------
``c = encoder(features)`` (an MLP, once per task), then the velocity field
``v_theta(t, x_t, c)`` is an MLP over ``x_t`` whose every hidden layer also receives the
context and a sinusoidal time embedding as additive biases::

    a_1 = silu(W_1 x_t + A_1 c + B_1 tau(t) + b_1)
    a_k = silu(W_k a_{k-1} + A_k c + B_k tau(t) + b_k),   k = 2..layers
    v   = W_out a_layers + b_out

which equals concatenating ``[x_t, c, tau(t)]`` into every layer, but lets the sampler compute
``A_k c`` once per task and ``B_k tau(t)`` once per ODE step (the per-sample cost is only the
``W`` products).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from core_env.curves import grid_position
from core_env.forecast.protocol import HistoryBatch
from core_env.utils.checks import check_ints

SOLVERS = ("euler", "midpoint")
"""Fixed-step ODE solvers of :meth:`FlowForecastNet.sample`."""


def solver_times(steps: int, solver: str) -> np.ndarray:
    """The times at which a fixed-step solver evaluates the velocity on [0, 1]:
    float32[steps] ``i dt`` (Euler) or float32[2 steps] ``i dt / 2`` (midpoint), dt = 1 / steps.

    Raises:
        ValueError: an unknown solver or ``steps < 1``.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver: expected one of {SOLVERS}, got {solver!r}")
    if steps < 1:
        raise ValueError(f"steps: expected >= 1, got {steps}")
    if solver == "euler":
        return np.arange(steps, dtype=np.float32) * np.float32(1.0 / steps)
    return np.arange(2 * steps, dtype=np.float32) * np.float32(0.5 / steps)


@dataclass(frozen=True)
class ModelConfig:
    """Representation and network sizes (stored as JSON in every checkpoint)."""

    history_len: int = 16
    """L: observations of the prefix the encoder sees (the latest ones)."""
    horizon: int = 32
    """H: points of the future trajectory."""
    max_log_ratio: float = math.log(32.0)
    """D_max: the trajectory covers future work up to s_now * exp(D_max)."""
    x_scale: float = 0.5
    """Log-loss differences are divided by this (trajectory points have std about 1)."""
    log_work_center: float = 2.0
    """Centre of the ln s_now feature."""
    log_work_scale: float = 2.0
    """Scale of the ln s_now feature."""
    enc_hidden: int = 256
    """Width of the encoder MLP."""
    enc_layers: int = 3
    """Hidden layers of the encoder MLP (>= 1)."""
    ctx_dim: int = 128
    """Size of the context vector c."""
    hidden: int = 48
    """Width of the velocity MLP (its per-sample cost grows with hidden**2)."""
    layers: int = 2
    """Hidden layers of the velocity MLP (>= 1)."""
    time_freqs: int = 8
    """Frequencies of the time embedding tau(t) = [sin(pi 2^k t), cos(pi 2^k t)]."""

    def __post_init__(self) -> None:
        check_ints(self, ("history_len", "horizon", "enc_hidden", "enc_layers", "ctx_dim",
                          "hidden", "layers", "time_freqs"), 1)
        for name in ("max_log_ratio", "x_scale", "log_work_scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name}: expected a finite number > 0, got {v!r}")
        if not (isinstance(self.log_work_center, (int, float))
                and math.isfinite(self.log_work_center)):
            raise ValueError(f"log_work_center: expected a finite number, "
                             f"got {self.log_work_center!r}")

    @property
    def feature_dim(self) -> int:
        """Length of the prefix feature vector, 3 L + 3."""
        return 3 * self.history_len + 3

    @property
    def offsets(self) -> np.ndarray:
        """float64[H]: the future log-work offsets d_j = D_max * j / H, j = 1..H."""
        return self.max_log_ratio * np.arange(1, self.horizon + 1) / self.horizon

    def to_dict(self) -> dict[str, int | float]:
        """JSON-able fields."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: on missing or unknown fields or invalid values.
        """
        if not isinstance(d, dict):
            raise ValueError(f"model config: expected a dict, got {type(d).__name__}")
        names = {f.name for f in fields(cls)}
        if set(d) != names:
            raise ValueError(f"model config: expected fields {sorted(names)}, got "
                             f"{sorted(d)} (missing {sorted(names - set(d))}, unknown "
                             f"{sorted(set(d) - names)})")
        return cls(**d)


def prefix_features(batch: HistoryBatch, log_targets: np.ndarray, cfg: ModelConfig
                    ) -> np.ndarray:
    """Encoder inputs of every task (see the module docstring).

    Args:
        batch: n padded histories (tasks with length 0 get all-zero observation rows).
        log_targets: float[n] ln eps.
        cfg: the representation.

    Returns:
        float32[n, 3 L + 3].
    """
    n, width = batch.log_work.shape
    L = cfg.history_len
    x_now, y_now = batch.last()
    length = batch.length
    idx = length[:, None] - L + np.arange(L)[None, :]  # [n, L], oldest first
    valid = (idx >= 0) & (idx < length[:, None])
    safe = np.clip(idx, 0, max(width - 1, 0))
    rows = np.arange(n)[:, None]
    if width:
        dx = np.where(valid, batch.log_work[rows, safe] - x_now[:, None], 0.0)
        dy = np.where(valid, batch.log_loss[rows, safe] - y_now[:, None], 0.0) / cfg.x_scale
    else:
        dx = dy = np.zeros((n, L))
    scalars = np.stack([
        np.where(length > 0, (x_now - cfg.log_work_center) / cfg.log_work_scale, 0.0),
        np.where(length > 0, (np.asarray(log_targets) - y_now) / cfg.x_scale, 0.0),
        length / L], axis=1)
    out = np.concatenate([np.stack([dx, dy, valid.astype(np.float64)], axis=2).reshape(n, 3 * L),
                          scalars], axis=1)
    return out.astype(np.float32)


def future_trajectories(log_loss_table: np.ndarray, log_work_now: np.ndarray,
                        log_loss_now: np.ndarray, cfg: ModelConfig) -> np.ndarray:
    """Normalised future trajectories ``x`` of tabulated observed paths (training targets).

    Args:
        log_loss_table: float[n, G] observed log-loss on ``core_env.curves.LOG_WORK_GRID``.
        log_work_now: float[n] ln s_now.
        log_loss_now: float[n] ln y_now.
        cfg: the representation.

    Returns:
        float32[n, H]: ``(ln l(s_now e^{d_j}) - ln y_now) / x_scale``.
    """
    table = np.asarray(log_loss_table, dtype=np.float64)
    n = table.shape[0]
    i0, w = grid_position(np.asarray(log_work_now)[:, None] + cfg.offsets[None, :])
    rows = np.arange(n)[:, None]
    lo = table[rows, i0]
    ll = lo + (table[rows, i0 + 1] - lo) * w
    return ((ll - np.asarray(log_loss_now)[:, None]) / cfg.x_scale).astype(np.float32)


class FlowForecastNet(nn.Module):
    """Prefix encoder and conditional velocity field v_theta(t, x_t, c).

    Build with :meth:`create` (explicitly seeded initialisation, no global RNG).
    """

    freqs: Tensor  # a buffer (register_buffer in __init__)

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        enc: list[nn.Module] = []
        width = cfg.feature_dim
        for _ in range(cfg.enc_layers):
            enc += [nn.Linear(width, cfg.enc_hidden), nn.SiLU()]
            width = cfg.enc_hidden
        enc.append(nn.Linear(width, cfg.ctx_dim))
        self.encoder = nn.Sequential(*enc)
        self.ctx_proj = nn.Linear(cfg.ctx_dim, cfg.layers * cfg.hidden)
        self.time_proj = nn.Linear(2 * cfg.time_freqs, cfg.layers * cfg.hidden, bias=False)
        self.x_in = nn.Linear(cfg.horizon, cfg.hidden, bias=False)
        self.hidden_layers = nn.ModuleList(
            [nn.Linear(cfg.hidden, cfg.hidden, bias=False) for _ in range(cfg.layers - 1)])
        self.out = nn.Linear(cfg.hidden, cfg.horizon)
        self.register_buffer("freqs", math.pi * 2.0 ** torch.arange(cfg.time_freqs,
                                                                     dtype=torch.float32),
                             persistent=False)

    @classmethod
    def create(cls, cfg: ModelConfig, generator: torch.Generator) -> FlowForecastNet:
        """A new network initialised from ``generator`` (built on the meta device, so torch's
        global generator is never used)."""
        with torch.device("meta"):
            net = cls(cfg)
        net = net.to_empty(device="cpu")
        net.reset_parameters(generator)
        return net

    def reset_parameters(self, generator: torch.Generator) -> None:
        """PyTorch's default Linear initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn
        from ``generator``; the output layer starts at zero."""
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    bound = 1.0 / math.sqrt(m.in_features)
                    m.weight.uniform_(-bound, bound, generator=generator)
                    if m.bias is not None:
                        m.bias.uniform_(-bound, bound, generator=generator)
            self.out.weight.zero_()
            self.out.bias.zero_()
            self.freqs.copy_(math.pi * 2.0 ** torch.arange(self.cfg.time_freqs,
                                                           dtype=torch.float32))

    # ------------------------------------------------------------------ pieces
    def encode(self, features: Tensor) -> Tensor:
        """Context of every task: float[B, 3L+3] -> float[B, ctx_dim]."""
        return self.encoder(features)

    def context_bias(self, c: Tensor) -> Tensor:
        """``A_k c + b_k`` of every hidden layer: float[B, ctx_dim] -> float[B, layers, hidden]."""
        return self.ctx_proj(c).view(c.shape[0], self.cfg.layers, self.cfg.hidden)

    def time_bias(self, t: Tensor) -> Tensor:
        """``B_k tau(t)`` of every hidden layer: float[T] -> float[T, layers, hidden]."""
        arg = t[:, None] * self.freqs[None, :]
        emb = torch.cat([torch.sin(arg), torch.cos(arg)], dim=1)
        return self.time_proj(emb).view(t.shape[0], self.cfg.layers, self.cfg.hidden)

    def velocity(self, x: Tensor, bias: Tensor) -> Tensor:
        """The velocity MLP given the summed per-layer biases.

        Args:
            x: float[..., H] points x_t.
            bias: float[..., layers, hidden] (context + time biases), broadcastable
                against x's leading dimensions.

        Returns:
            float[..., H].
        """
        a = F.silu(self.x_in(x) + bias[..., 0, :])
        for k, layer in enumerate(self.hidden_layers, start=1):
            a = F.silu(layer(a) + bias[..., k, :])
        return self.out(a)

    def _velocity_inplace(self, x: Tensor, bias: Tensor) -> Tensor:
        """:meth:`velocity` with in-place bias and activation (inference only, no autograd)."""
        a = torch.matmul(x, self.x_in.weight.T)
        a += bias[..., 0, :]
        F.silu(a, inplace=True)
        # (an nn.ModuleList of nn.Linear: its type says Module)
        for k, layer in enumerate(cast("Iterable[nn.Linear]", self.hidden_layers), start=1):
            a = torch.matmul(a, layer.weight.T)
            a += bias[..., k, :]
            F.silu(a, inplace=True)
        return self.out(a)

    # ------------------------------------------------------------------ training / sampling
    def forward(self, t: Tensor, x_t: Tensor, features: Tensor) -> Tensor:
        """v_theta(t, x_t, c(features)), one time per row (training).

        Args:
            t: float[B] times.
            x_t: float[B, H] points on the path.
            features: float[B, 3L+3] prefix features.

        Returns:
            float[B, H] velocities.
        """
        bias = self.context_bias(self.encode(features)) + self.time_bias(t)
        return self.velocity(x_t, bias)

    def sample(self, features: Tensor, x0: Tensor, steps: int, solver: str = "euler"
               ) -> Tensor:
        """Integrate dx/dt = v_theta(t, x, c) from t = 0 to 1 with a fixed-step solver.

        The context (and its biases) is computed once per task, the time biases once per
        step; only the W products run per sample.

        Args:
            features: float[B, 3L+3] prefix features.
            x0: float[B, S, H] noise (S samples per task).
            steps: number of solver steps (>= 1).
            solver: ``"euler"`` or ``"midpoint"`` (two velocity evaluations per step).

        Returns:
            float[B, S, H] samples x_1 (normalised trajectories).
        """
        tb = self.time_bias(torch.from_numpy(solver_times(steps, solver)).to(x0.dtype))
        velocity = (self._velocity_inplace if not torch.is_grad_enabled() else self.velocity)
        ctx = self.context_bias(self.encode(features))[:, None]  # [B, 1, layers, hidden]
        dt = 1.0 / steps
        x = x0
        for i in range(steps):
            if solver == "euler":
                x = x + dt * velocity(x, ctx + tb[i])
            else:
                k1 = velocity(x, ctx + tb[2 * i])
                x = x + dt * velocity(x + (0.5 * dt) * k1, ctx + tb[2 * i + 1])
        return x
