"""MARA's Multi-Agent Transformer (SPEC §5; Wen et al., NeurIPS 2022), factorised over tasks.

Every node sees the same global features and task table, plus its own few node features,
so the flat per-node observations are mostly copies. The model reads each thing once:

* **Tokens.** One token per task slot (its task features, forecast columns included, plus
  the global features) and one learned *idle* token, which is always present (so attention
  never sees an empty key set, and "idle" is chosen like any task). One token per node
  (its node features plus the global features).
* **Encoder.** ``enc_layers`` transformer layers over the task tokens (empty slots masked),
  then ``enc_layers`` layers in which node tokens attend to each other and to the task
  tokens. A value head on each node embedding gives the per-node values ``V_i`` (MAT's
  per-agent values; the reward is shared by the team).
* **Decoder (autoregressive).** Node i's logits over the K + 1 actions are a pointer score
  ``score(h_i, e_j, c_ij)`` of its embedding ``h_i`` against every action token ``e_j``,
  where ``c_ij`` describes what the earlier nodes 0..i-1 chose for token j: how many of
  them, the sum of their speeds, the capacity left after them and whether node i-1 chose
  it. For the scheduler these are what the earlier actions change (work delivered depends
  on the number and speeds of the nodes on a task), so they are MAT's conditioning on the
  previous actions in a form that does not depend on the node order. The sequential
  feasibility mask (:func:`core_env.masks.sequential_mask`'s rule: the node's own mask,
  and no task beyond its parallelism cap given the earlier choices) is applied at every
  position.
* **Two code paths**, as in the reference MAT: :meth:`MAT.act` decodes node by node
  (rollouts, sampling or greedy); :meth:`MAT.evaluate` scores given joint actions in one
  teacher-forced pass (PPO updates), recomputing the same per-position masks from the
  realised actions. Both call :meth:`MAT._logits`, so their log-probs agree exactly.

Inputs are tensors built by :func:`mara_agents.mat.inputs.split_observations` from the flat
observations of the forecast-wrapped environment (layout with the forecast columns).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import NamedTuple, cast

import torch
from torch import nn

from core_env.layout import Layout
from core_env.utils.checks import check_int

N_COND = 4
"""Columns of the conditioning c_ij (count, speed sum, capacity left, chosen by i-1)."""


@dataclass(frozen=True)
class MATConfig:
    """Sizes of the MAT (stored in every checkpoint)."""

    d_model: int = 64
    """Token width."""
    heads: int = 4
    """Attention heads (must divide d_model)."""
    enc_layers: int = 1
    """Transformer layers over tasks, then node-over-(nodes, tasks) layers."""
    ff: int = 128
    """Feed-forward width in the transformer layers."""
    dec_hidden: int = 8
    """Width m of the conditioning embedding phi(c_ij) in the pointer score."""
    autoregressive: bool = True
    """False gives the MAT-Dec ablation: every node's head sees neither the earlier nodes'
    choices nor the capacity they used (only its own mask); conflicts are then resolved by
    the environment's rule."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "autoregressive":
                if not isinstance(v, bool):
                    raise ValueError(f"autoregressive: expected a bool, got {v!r}")
                continue
            check_int(f.name, v, 1, exact=True)
        if self.d_model % self.heads:
            raise ValueError(f"heads: expected a divisor of d_model={self.d_model}, "
                             f"got {self.heads}")

    def to_dict(self) -> dict[str, int | bool]:
        return asdict(self)


class Inputs(NamedTuple):
    """Model inputs of B environments (torch tensors)."""

    glob: torch.Tensor  # float[B, G]
    nodes: torch.Tensor  # float[B, N, Fn]
    tasks: torch.Tensor  # float[B, K, Ft]
    mask: torch.Tensor  # bool[B, N, K+1], each node's own action mask
    cap: torch.Tensor  # float[B, K], effective parallelism caps (nodes)
    speed: torch.Tensor  # float[B, N], node speed feature (speed / max speed)


class MAT(nn.Module):
    """The MARA policy/value network (see the module docstring).

    Args:
        config: sizes.
        layout: the observation layout it is built for (feature counts, N, K).
    """

    def __init__(self, config: MATConfig, layout: Layout) -> None:
        super().__init__()
        self.config = config
        self.n_nodes, self.n_slots = layout.n_nodes, layout.n_slots
        self.sizes = (layout.global_size, layout.node_size, layout.task_size)
        d = config.d_model
        g, fn, ft = self.sizes
        self.task_in = nn.Sequential(nn.Linear(ft + g, d), nn.ReLU(), nn.Linear(d, d))
        self.node_in = nn.Sequential(nn.Linear(fn + g, d), nn.ReLU(), nn.Linear(d, d))
        self.idle = nn.Parameter(torch.zeros(d))

        def layer() -> nn.TransformerEncoderLayer:
            return nn.TransformerEncoderLayer(d, config.heads, config.ff, dropout=0.0,
                                              batch_first=True, norm_first=True)

        self.task_layers = nn.ModuleList(layer() for _ in range(config.enc_layers))
        self.node_self = nn.ModuleList(
            nn.MultiheadAttention(d, config.heads, batch_first=True)
            for _ in range(config.enc_layers))
        self.node_cross = nn.ModuleList(
            nn.MultiheadAttention(d, config.heads, batch_first=True)
            for _ in range(config.enc_layers))
        self.node_ff = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, config.ff), nn.ReLU(),
                          nn.Linear(config.ff, d)) for _ in range(config.enc_layers))
        self.node_norm1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(config.enc_layers))
        self.node_norm2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(config.enc_layers))
        self.value_head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.ReLU(),
                                        nn.Linear(d, 1))
        m = config.dec_hidden
        self.q_node = nn.Linear(d, d)
        self.k_tok = nn.Linear(d, d)
        self.a_node = nn.Linear(d, m)
        self.a_tok = nn.Linear(d, m, bias=False)
        self.phi = nn.Sequential(nn.Linear(N_COND, m), nn.Tanh())

    # ------------------------------------------------------------------ encoder
    def encode(self, x: Inputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Node embeddings float[B, N, d], action-token embeddings float[B, K+1, d] (idle
        first) and per-node values float[B, N]."""
        b = x.glob.shape[0]
        g_t = x.glob[:, None, :].expand(b, self.n_slots, -1)
        tok = self.task_in(torch.cat([x.tasks, g_t], dim=-1))
        tok = torch.cat([self.idle.expand(b, 1, -1), tok], dim=1)  # [B, K+1, d]
        present = x.tasks[..., 0] > 0.5  # the "present" column comes first
        pad = torch.cat([torch.zeros(b, 1, dtype=torch.bool), ~present], dim=1)
        for layer in self.task_layers:
            tok = layer(tok, src_key_padding_mask=pad)
        g_n = x.glob[:, None, :].expand(b, self.n_nodes, -1)
        h = self.node_in(torch.cat([x.nodes, g_n], dim=-1))
        for sa, ca, ff, n1, n2 in zip(self.node_self, self.node_cross, self.node_ff,
                                      self.node_norm1, self.node_norm2, strict=False):
            z = n1(h)
            h = h + sa(z, z, z, need_weights=False)[0]
            z = n2(h)
            h = h + ca(z, tok, tok, key_padding_mask=pad, need_weights=False)[0]
            h = h + ff(h)
        return h, tok, self.value_head(h).squeeze(-1)

    # ------------------------------------------------------------------ decoder
    def _pointer(self, h: torch.Tensor, tok: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The parts of the pointer score that do not depend on earlier actions:
        ``qk[B, N, K+1] = q_i . k_j / sqrt(d)``, ``a_i[B, N, m]`` and ``a_j[B, K+1, m]``."""
        q, k = self.q_node(h), self.k_tok(tok)
        qk = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.config.d_model)
        return qk, self.a_node(h), self.a_tok(tok)

    def _logits(self, qk: torch.Tensor, a_node: torch.Tensor, a_tok: torch.Tensor,
                cond: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """Masked pointer logits ``s_ij = q_i . k_j / sqrt(d) + (a_i + a_j) . phi(c_ij)``.

        qk: [..., K+1]; a_node: [..., m]; a_tok: [..., K+1, m] (broadcast);
        cond: [..., K+1, N_COND]; legal: bool[..., K+1]."""
        s = qk + ((a_node.unsqueeze(-2) + a_tok) * self.phi(cond)).sum(-1)
        return s.masked_fill(~legal, -1e9)

    def _cond(self, count: torch.Tensor, speed_sum: torch.Tensor, left0: torch.Tensor,
              prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Conditioning features and the capacity rule from the earlier choices.

        count, speed_sum, prev: float[..., K+1] (idle column included); left0: float[..., K+1]
        capacities with N for idle. Returns cond float[..., K+1, N_COND] and cap_ok
        bool[..., K+1]."""
        left = left0 - count
        cond = torch.stack([count / self.n_nodes, speed_sum / self.n_nodes,
                            left / self.n_nodes, prev], dim=-1)
        if not self.config.autoregressive:  # MAT-Dec: no conditioning, no capacity rule
            return torch.zeros_like(cond), torch.ones_like(left, dtype=torch.bool)
        cap_ok = left > 0.5
        cap_ok[..., 0] = True  # idle is always legal
        return cond, cap_ok

    def _left0(self, cap: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.full_like(cap[..., :1], float(self.n_nodes)), cap], dim=-1)

    def act(self, x: Inputs, deterministic: bool = False,
            generator: torch.Generator | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Decode the joint action node by node.

        Returns:
            ``(actions, log_probs, values)``: int64[B, N], float[B, N] log-probs of the
            chosen actions under the masked distributions, float[B, N] values.
        """
        h, tok, values = self.encode(x)
        b, n, k1 = x.mask.shape
        qk, a_node, a_tok = self._pointer(h, tok)
        left0 = self._left0(x.cap)
        count = torch.zeros(b, k1)
        speed_sum = torch.zeros(b, k1)
        prev = torch.zeros(b, k1)
        actions = torch.zeros(b, n, dtype=torch.long)
        logps = torch.zeros(b, n)
        rows = torch.arange(b)
        for i in range(n):
            cond, cap_ok = self._cond(count, speed_sum, left0, prev)
            logits = self._logits(qk[:, i], a_node[:, i], a_tok, cond, x.mask[:, i] & cap_ok)
            logp = torch.log_softmax(logits, dim=-1)
            if deterministic:
                a = logits.argmax(dim=-1)
            else:
                a = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
            actions[:, i] = a
            logps[:, i] = logp[rows, a]
            count[rows, a] += 1.0
            speed_sum[rows, a] += x.speed[:, i]
            prev = torch.zeros(b, k1)
            prev[rows, a] = 1.0
        return actions, logps, values

    def forced_logits(self, x: Inputs, actions: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced masked logits of every node position given joint actions
        int64[B, N]: node i's logits float[B, N, K+1] are conditioned on ``actions[:, :i]``
        and masked (-1e9) by the sequential mask they imply; also the values float[B, N]."""
        h, tok, values = self.encode(x)
        b, n, k1 = x.mask.shape
        onehot = torch.nn.functional.one_hot(actions, k1).float()  # [B, N, K+1]
        count = torch.cumsum(onehot, dim=1) - onehot  # earlier nodes only
        weighted = onehot * x.speed[..., None]
        speed_sum = torch.cumsum(weighted, dim=1) - weighted
        prev = torch.cat([torch.zeros(b, 1, k1), onehot[:, :-1]], dim=1)
        cond, cap_ok = self._cond(count, speed_sum, self._left0(x.cap)[:, None, :], prev)
        qk, a_node, a_tok = self._pointer(h, tok)
        return self._logits(qk, a_node, a_tok[:, None], cond, x.mask & cap_ok), values

    def evaluate(self, x: Inputs, actions: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Teacher-forced pass over given joint actions int64[B, N].

        Returns:
            ``(log_probs, entropy, values)``, each float[B, N].
        """
        logits, values = self.forced_logits(x, actions)
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, actions[..., None]).squeeze(-1)
        p = logp_all.exp()
        entropy = -(p * torch.where(p > 0, logp_all, torch.zeros_like(logp_all))).sum(-1)
        return logp, entropy, values


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def init_weights(model: MAT, generator: torch.Generator) -> None:
    """Seeded initialisation (no global RNG): Xavier-uniform weights, zero biases, small
    output layers (the initial policy is near uniform over legal actions)."""
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
            with torch.no_grad():
                p.uniform_(-bound, bound, generator=generator)
        else:
            with torch.no_grad():
                p.zero_() if "bias" in name or name == "idle" else p.fill_(1.0)
    with torch.no_grad():
        model.q_node.weight.mul_(0.1)
        model.a_node.weight.mul_(0.1)
        cast(nn.Linear, model.value_head[-1]).weight.mul_(0.01)
        model.idle.normal_(0.0, 0.1, generator=generator)
