"""Greedy MARA inference in numpy: the MAT's encoder and greedy decoder on a snapshot of its
weights, for single-environment scheduling (:class:`~mara_agents.mat.mara_policy.MARAPolicy`).

At batch size 1 the MAT's tensors are tiny, so torch's per-operation dispatch, not
arithmetic, would be the cost. :class:`NumpyMAT` computes what :meth:`MAT.act` with
``deterministic=True`` computes (the same layers, masks and pointer score; tested to give the
same actions and logits to float32 rounding). Its decoder recomputes the conditioning
embedding ``phi(c_ij)`` only for the two tokens a node's choice changes (the chosen one and
the previous node's), and with numba installed (the ``fast`` extra) that loop runs compiled
(:mod:`mara_agents.mat._decode_numba`; :data:`DECODER` says which). :class:`NumpyEnsemble`
decodes with several MATs at once, their weights stacked along a leading member axis.

Training never uses this path: rollouts sample through :meth:`MAT.act` and updates use
:meth:`MAT.evaluate`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mara_agents.blas import single_blas_thread
from mara_agents.mat.model import N_COND

if TYPE_CHECKING:
    from mara_agents.mat.model import MAT, Inputs

_NEG = np.float32(-1e9)

_compiled_decode: Callable[..., Any] | None
try:
    from mara_agents.mat._decode_numba import decode_one as _compiled_decode
except ImportError:  # numba not installed: the numpy loop
    _compiled_decode = None

DECODER = "numba" if _compiled_decode is not None else "numpy"
"""The greedy decoding loop in use: ``"numba"`` (compiled, when numba is installed) or
``"numpy"`` (:meth:`NumpyMAT.decode_numpy`, the reference)."""


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5
                ) -> np.ndarray:
    """``nn.LayerNorm`` over the last axis: ``x.mean`` written as its sum divided by the
    count (numpy's own arithmetic, without its per-call bookkeeping), in-place otherwise."""
    n = np.float32(x.shape[-1])
    mu = np.add.reduce(x, -1, keepdims=True) / n
    xc = x - mu
    var = np.add.reduce(xc * xc, -1, keepdims=True) / n
    var += np.float32(eps)
    out = xc / np.sqrt(var)
    out *= w
    out += b
    return out


class _Attention:
    """``nn.MultiheadAttention(batch_first=True)`` in inference (no dropout, no weights)."""

    def __init__(self, sd: dict[str, np.ndarray], prefix: str, heads: int) -> None:
        w, b = sd[prefix + "in_proj_weight"], sd[prefix + "in_proj_bias"]
        d = w.shape[1]
        self.heads, self.hd = heads, d // heads
        self.wq, self.wk, self.wv = (np.ascontiguousarray(w[i * d:(i + 1) * d].T)
                                     for i in range(3))
        self.bq, self.bk, self.bv = (b[i * d:(i + 1) * d] for i in range(3))
        self.wo = np.ascontiguousarray(sd[prefix + "out_proj.weight"].T)
        self.bo = sd[prefix + "out_proj.bias"]
        self.scale = np.float32(1.0 / math.sqrt(self.hd))

    def __call__(self, q_in: np.ndarray, kv_in: np.ndarray, pad: np.ndarray | None
                 ) -> np.ndarray:
        b, lq, d = q_in.shape
        lk = kv_in.shape[1]
        h, hd = self.heads, self.hd
        q = ((q_in @ self.wq + self.bq) * self.scale).reshape(b, lq, h, hd).transpose(0, 2, 1, 3)
        k = (kv_in @ self.wk + self.bk).reshape(b, lk, h, hd).transpose(0, 2, 3, 1)
        v = (kv_in @ self.wv + self.bv).reshape(b, lk, h, hd).transpose(0, 2, 1, 3)
        s = q @ k  # [b, h, lq, lk]
        if pad is not None:  # + -inf at padded keys, + 0 elsewhere (exact)
            s += np.where(pad, np.float32(-np.inf), np.float32(0.0))[:, None, None, :]
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        out = (s @ v).transpose(0, 2, 1, 3).reshape(b, lq, d)
        return out @ self.wo + self.bo


class _MLP:
    """``Linear -> ReLU -> Linear`` (optionally after a LayerNorm)."""

    def __init__(self, sd: dict[str, np.ndarray], first: str, second: str,
                 norm: str | None = None) -> None:
        self.w1 = np.ascontiguousarray(sd[first + ".weight"].T)
        self.b1 = sd[first + ".bias"]
        self.w2 = np.ascontiguousarray(sd[second + ".weight"].T)
        self.b2 = sd[second + ".bias"]
        self.norm = (sd[norm + ".weight"], sd[norm + ".bias"]) if norm else None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.norm is not None:
            x = _layer_norm(x, *self.norm)
        return np.maximum(x @ self.w1 + self.b1, 0.0) @ self.w2 + self.b2


class NumpyMAT:
    """A numpy snapshot of a :class:`~mara_agents.mat.MAT` for greedy decoding.

    The snapshot copies the weights: rebuild it after the model changes.

    Args:
        model: the MAT (its ``config`` decides MAT-Dec vs autoregressive).
    """

    def __init__(self, model: MAT) -> None:
        sd = {k: v.detach().cpu().numpy().astype(np.float32, copy=True)
              for k, v in model.state_dict().items()}
        cfg = model.config
        self.autoregressive = cfg.autoregressive
        self.n_nodes = model.n_nodes
        self.d = cfg.d_model
        self.task_in = _MLP(sd, "task_in.0", "task_in.2")
        self.node_in = _MLP(sd, "node_in.0", "node_in.2")
        self.idle = sd["idle"]
        self.task_layers = []
        for i in range(cfg.enc_layers):
            p = f"task_layers.{i}."
            self.task_layers.append((
                (sd[p + "norm1.weight"], sd[p + "norm1.bias"]),
                _Attention(sd, p + "self_attn.", cfg.heads),
                _MLP(sd, p + "linear1", p + "linear2", norm=p + "norm2")))
        self.node_layers = []
        for i in range(cfg.enc_layers):
            self.node_layers.append((
                (sd[f"node_norm1.{i}.weight"], sd[f"node_norm1.{i}.bias"]),
                _Attention(sd, f"node_self.{i}.", cfg.heads),
                (sd[f"node_norm2.{i}.weight"], sd[f"node_norm2.{i}.bias"]),
                _Attention(sd, f"node_cross.{i}.", cfg.heads),
                _MLP(sd, f"node_ff.{i}.1", f"node_ff.{i}.3", norm=f"node_ff.{i}.0")))
        self.wq, self.bq = sd["q_node.weight"].T.copy(), sd["q_node.bias"]
        self.wk, self.bk = sd["k_tok.weight"].T.copy(), sd["k_tok.bias"]
        self.wa, self.ba = sd["a_node.weight"].T.copy(), sd["a_node.bias"]
        self.wat = sd["a_tok.weight"].T.copy()
        self.phi_w, self.phi_b = sd["phi.0.weight"].T.copy(), sd["phi.0.bias"]

    def encode(self, glob: np.ndarray, nodes: np.ndarray, tasks: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Node embeddings h float32[B, N, d], token embeddings float32[B, K+1, d] and the
        padding mask bool[B, K+1] (:meth:`MAT.encode` without the values)."""
        b, k = tasks.shape[:2]
        g_t = np.broadcast_to(glob[:, None, :], (b, k, glob.shape[1]))
        tok = self.task_in(np.concatenate([tasks, g_t], axis=-1))
        tok = np.concatenate([np.broadcast_to(self.idle, (b, 1, self.d)), tok], axis=1)
        pad = np.concatenate([np.zeros((b, 1), dtype=bool), tasks[..., 0] <= 0.5], axis=1)
        for norm1, attn, ff in self.task_layers:
            z = _layer_norm(tok, *norm1)
            tok = tok + attn(z, z, pad)
            tok = tok + ff(tok)
        g_n = np.broadcast_to(glob[:, None, :], (b, nodes.shape[1], glob.shape[1]))
        h = self.node_in(np.concatenate([nodes, g_n], axis=-1))
        for norm1, sa, norm2, ca, ff in self.node_layers:
            z = _layer_norm(h, *norm1)
            h = h + sa(z, z, None)
            z = _layer_norm(h, *norm2)
            h = h + ca(z, tok, pad)
            h = h + ff(h)
        return h, tok, pad

    @single_blas_thread
    def act(self, x: Inputs) -> np.ndarray:
        """Greedy joint actions int64[B, N] (:meth:`MAT.act` with ``deterministic=True``)."""
        glob, nodes, tasks = x.glob.numpy(), x.nodes.numpy(), x.tasks.numpy()
        mask, speed, cap = x.mask.numpy(), x.speed.numpy(), x.cap.numpy()
        h, tok, _ = self.encode(glob, nodes, tasks)
        qk = (h @ self.wq + self.bq) @ (tok @ self.wk + self.bk).transpose(0, 2, 1)
        qk /= np.float32(math.sqrt(self.d))
        a_node = h @ self.wa + self.ba  # [B, N, m]
        a_tok = tok @ self.wat  # [B, K+1, m]
        b, n, k1 = mask.shape
        actions = np.zeros((b, n), dtype=np.int64)
        if not self.autoregressive:  # MAT-Dec: zero conditioning, own masks only
            phi = np.tanh(np.broadcast_to(self.phi_b, a_tok.shape))
            s = qk + ((a_node[:, :, None, :] + a_tok[:, None]) * phi[:, None]).sum(-1)
            return np.where(mask, s, _NEG).argmax(-1)
        for e in range(b):  # a Python loop per environment: scalar bookkeeping is cheapest
            actions[e] = self._decode_one(qk[e], a_node[e], a_tok[e], mask[e], speed[e], cap[e])
        return actions

    def _decode_one(self, qk: np.ndarray, a_node: np.ndarray, a_tok: np.ndarray,
                    mask: np.ndarray, speed: np.ndarray, cap: np.ndarray) -> np.ndarray:
        """The autoregressive greedy decoding of one environment: compiled when numba is
        installed (``DECODER``), else :meth:`decode_numpy`."""
        if _compiled_decode is None:
            return self.decode_numpy(qk, a_node, a_tok, mask, speed, cap)
        c = np.ascontiguousarray
        return _compiled_decode(c(qk, dtype=np.float32), c(a_node, dtype=np.float32),
                                c(a_tok, dtype=np.float32), c(mask, dtype=np.bool_),
                                c(speed, dtype=np.float32), c(cap, dtype=np.float32),
                                c(self.phi_w, dtype=np.float32),
                                c(self.phi_b, dtype=np.float32), self.n_nodes)

    def decode_numpy(self, qk: np.ndarray, a_node: np.ndarray, a_tok: np.ndarray,
                     mask: np.ndarray, speed: np.ndarray, cap: np.ndarray) -> np.ndarray:
        """The autoregressive greedy decoding of one environment in numpy (the reference of
        the compiled loop).

        The bookkeeping (counts, capacity left, previous choice) is in Python numbers and the
        speed sums in float32 scalars, as :meth:`MAT._cond` accumulates them; the
        conditioning values are then the same float32 numbers (divisions of exact values are
        correctly rounded either way)."""
        n, k1 = mask.shape
        nn_ = float(self.n_nodes)
        count = [0.0] * k1
        speed_sum = [np.float32(0.0)] * k1
        left = [nn_] + [float(c) for c in cap]
        prev = [0.0] * k1
        cond = np.zeros((k1, N_COND), dtype=np.float32)
        cond[:, 2] = np.asarray(left, dtype=np.float32) / np.float32(nn_)
        phi = np.tanh(cond @ self.phi_w + self.phi_b)  # [K+1, m]
        cap_ok = np.asarray(left) > 0.5
        cap_ok[0] = True  # idle is always within capacity
        legal = mask & cap_ok  # [N, K+1]; a column is closed for later nodes when it fills
        actions = np.zeros(n, dtype=np.int64)
        last = 0
        for i in range(n):
            s = qk[i] + ((a_node[i] + a_tok) * phi).sum(-1)
            a = int(np.where(legal[i], s, _NEG).argmax())
            actions[i] = a
            count[a] += 1.0
            speed_sum[a] = speed_sum[a] + speed[i]
            left[a] -= 1.0
            if a and left[a] <= 0.5:
                legal[i + 1:, a] = False
            prev[last] = 0.0
            prev[a] = 1.0
            cols = [last, a] if last != a else [a]  # only these tokens' conditioning changed
            c = np.array([[count[j] / nn_, speed_sum[j] / nn_, left[j] / nn_, prev[j]]
                          for j in cols], dtype=np.float32)
            phi[cols] = np.tanh(c @ self.phi_w + self.phi_b)
            last = a
        return actions


def _stack(items: list[Any]) -> Any:
    """The members' snapshots merged along a leading member axis M: weight matrices become
    [M, in, out] and vectors (biases, norms, the idle token) [M, 1, n], so ``x @ w + b`` on
    x[M, L, in] is every member's layer at once; plain numbers must agree."""
    first = items[0]
    if isinstance(first, np.ndarray):
        a = np.stack(items)
        return a if first.ndim == 2 else a.reshape(len(items), 1, -1)
    if isinstance(first, (tuple, list)):
        return type(first)(_stack(list(z)) for z in zip(*items, strict=False))
    if isinstance(first, (_Attention, _MLP, NumpyMAT)):
        merged = copy.copy(first)
        merged.__dict__ = {k: _stack([it.__dict__[k] for it in items]) for k in first.__dict__}
        return merged
    if any(it != first for it in items):
        raise ValueError(f"members differ in a setting ({items})")
    return first


class NumpyEnsemble:
    """Greedy decoding with several MATs (:func:`mara_agents.mat.ensemble_act` with
    ``deterministic=True``; the same actions, tested).

    The ensemble's score of action j at node position i is the mean of the members'
    pointer scores; its argmax is the argmax of the summed log-softmaxes (each member's
    normaliser is the same for every action). The encoders run at once on weights stacked
    along a leading member axis (:func:`_stack`). The mean score is the single decoder's
    ``qk + ((a_node + a_tok) * phi).sum(-1)`` with the members' ``a`` and ``phi`` columns
    concatenated (each divided by M) and their ``qk`` averaged, so the decoding loop is
    :meth:`NumpyMAT._decode_one` on M times wider columns: about one member's cost.

    Args:
        models: the member MATs: autoregressive, with the same sizes and layout.

    Raises:
        ValueError: no members, a MAT-Dec member, or members of different sizes.
    """

    def __init__(self, models: Sequence[MAT]) -> None:
        if not models:
            raise ValueError("models: an ensemble needs at least one MAT")
        for j, m in enumerate(models):
            if not m.config.autoregressive:
                raise ValueError(f"models[{j}]: a MAT-Dec member; the ensemble decodes "
                                 f"autoregressively")
            if m.config != models[0].config or (m.n_nodes, m.n_slots) != (
                    models[0].n_nodes, models[0].n_slots):
                raise ValueError(f"models[{j}]: sizes {m.config.to_dict()} with "
                                 f"{m.n_nodes} nodes and {m.n_slots} slots differ from "
                                 f"member 0's")
        self.members = len(models)
        self.net = _stack([NumpyMAT(m) for m in models])
        # the decoder: phi's columns of all members side by side
        self.decoder = copy.copy(self.net)
        self.decoder.phi_w = self._side_by_side(self.net.phi_w)  # [N_COND, M*m]
        self.decoder.phi_b = self.net.phi_b.reshape(-1)  # [M*m]

    @staticmethod
    def _side_by_side(a: np.ndarray) -> np.ndarray:
        """[M, L, m] -> [L, M*m] (member j's columns at j*m .. (j+1)*m - 1)."""
        return np.ascontiguousarray(a.transpose(1, 0, 2).reshape(a.shape[1], -1))

    @single_blas_thread
    def act(self, x: Inputs) -> np.ndarray:
        """Greedy joint actions int64[B, N]."""
        glob, nodes, tasks = x.glob.numpy(), x.nodes.numpy(), x.tasks.numpy()
        mask, speed, cap = x.mask.numpy(), x.speed.numpy(), x.cap.numpy()
        net, m = self.net, self.members
        inv = np.float32(1.0 / m)
        actions = np.zeros(mask.shape[:2], dtype=np.int64)
        for e in range(mask.shape[0]):  # members take the batch axis, one environment at a time
            h, tok, _ = net.encode(*(np.broadcast_to(a[e], (m, *a.shape[1:]))
                                     for a in (glob, nodes, tasks)))
            qk = (h @ net.wq + net.bq) @ (tok @ net.wk + net.bk).transpose(0, 2, 1)
            qk = qk.mean(0) / np.float32(math.sqrt(net.d))  # [N, K+1]
            a_node = self._side_by_side(h @ net.wa + net.ba) * inv  # [N, M*m]
            a_tok = self._side_by_side(tok @ net.wat) * inv  # [K+1, M*m]
            actions[e] = self.decoder._decode_one(qk, a_node, a_tok, mask[e], speed[e], cap[e])
        return actions
