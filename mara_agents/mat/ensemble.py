"""Decoding several MATs as one (an ensemble of training runs; ``experiments/``).

At every node position each member scores the K + 1 actions given the same earlier choices,
and the ensemble follows the mean of their scores (the normalised geometric mean of their
distributions).
"""

from __future__ import annotations

import torch

from mara_agents.mat.model import MAT, Inputs


def ensemble_act(models: list[MAT], x: Inputs, deterministic: bool = True,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Decode one joint action with an ensemble of MATs.

    At every node position each member scores the K + 1 actions given the same earlier
    choices (the same conditioning and sequential mask), and the ensemble's distribution
    is the normalised geometric mean of the members' distributions, i.e. the softmax of
    the mean of their scores. Greedy decoding takes its argmax; sampling draws from it.
    One member gives :meth:`MAT.act`'s actions.

    Returns:
        int64[B, N] actions.

    Raises:
        ValueError: no members, or members whose node or slot counts differ.
    """
    if not models:
        raise ValueError("models: an ensemble needs at least one MAT")
    first = models[0]
    for j, m in enumerate(models[1:], 1):
        if (m.n_nodes, m.n_slots) != (first.n_nodes, first.n_slots):
            raise ValueError(f"models[{j}]: {m.n_nodes} nodes and {m.n_slots} slots, "
                             f"member 0 has {first.n_nodes} and {first.n_slots}")
    parts = []
    for m in models:
        h, tok, _ = m.encode(x)
        parts.append(m._pointer(h, tok))
    return decode_scores(models, parts, x, deterministic, generator)


def decode_scores(models: list[MAT],
                  parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], x: Inputs,
                  deterministic: bool = True, generator: torch.Generator | None = None
                  ) -> torch.Tensor:
    """:func:`ensemble_act`'s node-by-node decoding, given each member's pointer parts
    (``MAT._pointer`` of its encoding; member j's parts may come from inputs of its own
    that share ``x``'s masks, caps and speeds, e.g. other forecast columns). Returns
    int64[B, N] actions.

    Raises:
        ValueError: no members, or not one parts tuple per member."""
    if not models or len(parts) != len(models):
        raise ValueError(f"parts: expected one (qk, a_node, a_tok) per member, got "
                         f"{len(parts)} for {len(models)} members")
    first = models[0]
    b, n, k1 = x.mask.shape
    left0 = first._left0(x.cap)
    count = torch.zeros(b, k1)
    speed_sum = torch.zeros(b, k1)
    prev = torch.zeros(b, k1)
    actions = torch.zeros(b, n, dtype=torch.long)
    rows = torch.arange(b)
    everything = torch.ones(b, k1, dtype=torch.bool)
    for i in range(n):
        total = torch.zeros(b, k1)
        legal = x.mask[:, i]
        for m, (qk, a_node, a_tok) in zip(models, parts, strict=False):
            cond, cap_ok = m._cond(count, speed_sum, left0, prev)
            legal = legal & cap_ok
            total = total + m._logits(qk[:, i], a_node[:, i], a_tok, cond, everything)
        logits = (total / len(models)).masked_fill(~legal, -1e9)
        if deterministic:
            a = logits.argmax(dim=-1)
        else:
            a = torch.multinomial(torch.softmax(logits, dim=-1), 1,
                                  generator=generator).squeeze(-1)
        actions[:, i] = a
        count[rows, a] += 1.0
        speed_sum[rows, a] += x.speed[:, i]
        prev = torch.zeros(b, k1)
        prev[rows, a] = 1.0
    return actions
