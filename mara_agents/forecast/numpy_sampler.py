"""The FM sampler in numpy: :meth:`FlowForecastNet.sample` on a snapshot of the weights, for
single-environment inference (MARA in one env, ``backend="numpy"`` of
:class:`~mara_agents.forecast.FlowMatchingForecaster`).

A single environment re-forecasts one or two tasks per slot, so torch's per-operation
dispatch, not arithmetic, would be the cost. :class:`NumpySampler` computes what
:meth:`FlowForecastNet.sample` computes (the same layers and solver; tested equal to float32
rounding) and keeps the time biases of each ``(steps, solver)`` it has seen. SiLU is written
``u + u tanh(u)`` with ``u = x / 2`` (equal to ``x sigmoid(x)``, cannot overflow; the snapshot
halves the weights and biases that feed a SiLU, exactly), with the portable
:func:`~mara_agents.forecast._tanh.tanh_rational`. With numba installed (the ``fast`` extra)
the elementwise passes run compiled with the same float32 operations
(:mod:`mara_agents.forecast._sampler_numba`; :data:`KERNELS` says which).

The snapshot copies the weights: build a new one after the network changes (FM training's
validation forecaster keeps the torch path for that reason).
"""

from __future__ import annotations

from types import ModuleType
from typing import cast

import numpy as np
from torch import nn

from mara_agents.blas import single_blas_thread
from mara_agents.forecast._tanh import tanh_rational
from mara_agents.forecast.model import FlowForecastNet, solver_times

_HALF = np.float32(0.5)

_kernels: ModuleType | None
try:
    from mara_agents.forecast import _sampler_numba as _kernels
except ImportError:  # numba not installed: numpy's passes
    _kernels = None

KERNELS = "numba" if _kernels is not None else "numpy"
"""The elementwise passes in use: ``"numba"`` (compiled, the same bits) or ``"numpy"``."""


def _silu_half(u: np.ndarray) -> np.ndarray:
    """``silu(2 u)``, in place on a C-contiguous float32 array (returns it)."""
    if _kernels is not None and u.flags.c_contiguous:
        _kernels.silu_half(u.reshape(-1))  # a view
        return u
    t = tanh_rational(u)
    t *= u
    u += t
    return u


class NumpySampler:
    """A numpy snapshot of a :class:`FlowForecastNet`'s encoder and velocity field.

    Args:
        net: the network (its weights are copied).
    """

    def __init__(self, net: FlowForecastNet) -> None:
        def w(m: nn.Linear) -> np.ndarray:
            return np.ascontiguousarray(m.weight.detach().cpu().numpy().T, dtype=np.float32)

        def b(m: nn.Linear) -> np.ndarray:
            return m.bias.detach().cpu().numpy().astype(np.float32, copy=True)

        cfg = net.cfg
        self.layers, self.hidden = cfg.layers, cfg.hidden
        lin = [m for m in net.encoder if isinstance(m, nn.Linear)]
        # halved: every layer but the encoder's last feeds a SiLU
        self.encoder = [(w(m) * _HALF, b(m) * _HALF) for m in lin[:-1]]
        self.enc_out = (w(lin[-1]), b(lin[-1]))
        self.ctx_w, self.ctx_b = w(net.ctx_proj) * _HALF, b(net.ctx_proj) * _HALF
        self.time_w = w(net.time_proj) * _HALF
        self.freqs = net.freqs.detach().cpu().numpy().astype(np.float32, copy=True)
        self.x_in = w(net.x_in) * _HALF
        self.hidden_w = [w(cast(nn.Linear, m)) * _HALF for m in net.hidden_layers]
        self.out_w, self.out_b = w(net.out), b(net.out)
        # the Euler solver's shortcut (see _euler): the output layer followed by the input
        # layer, as one product, computed in float64 and rounded once
        self.out_in = (self.out_w.astype(np.float64) @ self.x_in).astype(np.float32)
        self.out_in_b = (self.out_b.astype(np.float64) @ self.x_in).astype(np.float32)
        self._time_bias: dict[tuple[int, str], np.ndarray] = {}

    def context_bias(self, features: np.ndarray) -> np.ndarray:
        """Half of :meth:`FlowForecastNet.context_bias` of the encoding: float32[B, layers,
        hidden] (C-contiguous)."""
        a = np.asarray(features, dtype=np.float32)
        for wi, bi in self.encoder:
            a = a @ wi
            a += bi
            _silu_half(a)
        a = a @ self.enc_out[0]
        a += self.enc_out[1]
        c = a @ self.ctx_w
        c += self.ctx_b
        return c.reshape(a.shape[0], self.layers, self.hidden)

    def time_bias(self, steps: int, solver: str) -> np.ndarray:
        """Half the time biases of the solver's evaluation times: float32[T, layers,
        hidden]."""
        key = (steps, solver)
        if key not in self._time_bias:
            t = solver_times(steps, solver)  # raises on a bad setting, so none is cached
            arg = t[:, None] * self.freqs[None, :]
            emb = np.concatenate([np.sin(arg), np.cos(arg)], axis=1)
            self._time_bias[key] = (emb @ self.time_w).reshape(t.shape[0], self.layers,
                                                               self.hidden)
        return self._time_bias[key]

    def velocity(self, x: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """float32[B, S, H] velocities at x float32[B, S, H] given half the biases float32[B,
        layers, hidden] (C-contiguous)."""
        v = self._out_product(x, bias)
        v += self.out_b
        return v

    def _hidden(self, y: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """The last hidden layer's activations (a new array) given the first layer's
        product ``y = x @ x_in``."""
        a = np.empty_like(y)
        self._bias_silu(y, bias, 0, a)
        for k, wk in enumerate(self.hidden_w, start=1):
            # into another array: LLVM vectorises the kernel only when out is not its input
            self._bias_silu(a @ wk, bias, k, a)
        return a

    def _out_product(self, x: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """:meth:`velocity` before the output layer's bias."""
        return self._hidden(x @ self.x_in, bias) @ self.out_w

    @staticmethod
    def _bias_silu(a: np.ndarray, bias: np.ndarray, layer: int, out: np.ndarray) -> None:
        """``out = silu(2 (a + bias[:, layer]))``, the bias broadcast over samples."""
        if _kernels is None:
            np.add(a, bias[:, None, layer], out=out)
            _silu_half(out)
        else:
            _kernels.bias_silu(a, bias, layer, out)

    @staticmethod
    def _euler_step(x: np.ndarray, v: np.ndarray, bias: np.ndarray, dt: np.float32) -> None:
        """``x += (v + bias) * dt`` in place (``v`` is overwritten)."""
        if _kernels is None:
            v += bias
            v *= dt
            x += v
        else:
            _kernels.euler_step(x, v, bias, dt)

    def _euler(self, ctx: np.ndarray, tb: np.ndarray, x0: np.ndarray, steps: int
               ) -> np.ndarray:
        """The Euler solver, through the input layer's product ``y = x @ x_in`` instead of
        ``x``: the velocity is affine in the last activations ``a`` (``a @ out_w + out_b``),
        so ``y`` steps by ``(a @ (out_w @ x_in) + out_b @ x_in) dt`` (one product instead of
        the output layer's and the next input layer's), and ``x_1 = x_0 + (sum_i a_i @ out_w
        + steps out_b) dt``. The same ODE solution; the rounding differs from stepping x."""
        dt = np.float32(1.0 / steps)
        y = x0 @ self.x_in
        total = np.zeros_like(y)
        for i in range(steps):
            a = self._hidden(y, ctx + tb[i])
            total += a
            if i + 1 < steps:
                self._euler_step(y, a @ self.out_in, self.out_in_b, dt)
        x = np.array(x0, dtype=np.float32)
        self._euler_step(x, total @ self.out_w, np.float32(steps) * self.out_b, dt)
        return x

    @single_blas_thread
    def sample(self, features: np.ndarray, x0: np.ndarray, steps: int, solver: str = "euler"
               ) -> np.ndarray:
        """:meth:`FlowForecastNet.sample` in numpy: float32[B, S, H] samples x_1.

        Args:
            features: float[B, 3L+3] prefix features.
            x0: float[B, S, H] noise.
            steps: solver steps (>= 1).
            solver: ``"euler"`` or ``"midpoint"``.
        """
        tb = self.time_bias(steps, solver)
        ctx = self.context_bias(features)  # [B, layers, hidden]
        x0 = np.asarray(x0, dtype=np.float32)
        if solver == "euler":
            return self._euler(ctx, tb, x0, steps)
        dt = np.float32(1.0 / steps)
        x = np.array(x0, dtype=np.float32)
        for i in range(steps):  # midpoint
            k1 = self.velocity(x, ctx + tb[2 * i])
            v = self.velocity(x + (np.float32(0.5) * dt) * k1, ctx + tb[2 * i + 1])
            v *= dt
            x += v
        return x
