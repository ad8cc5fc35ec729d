"""The networks of the MARL adapters' shared actors and critics: :func:`mlp`,
:class:`SharedTableMLP` (the first layer on the shared task table once per env) and
:class:`SlotSharedActor` (one network per visible task's row: independent of K);
:func:`actor_network` rebuilds the actor a model file describes."""

from __future__ import annotations

from typing import Any

import torch

ACTIVATIONS = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}
"""Activation names of :func:`mlp`."""


def mlp(sizes: list[int], activation: str = "tanh") -> torch.nn.Sequential:
    """Linear layers of ``sizes`` (input, hidden..., output) with ``activation`` between
    them. Applied to ``[..., N, D]`` it acts on each node alone with the same weights (the
    parameter-shared decentralised actor)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {sorted(ACTIVATIONS)}, got "
                         f"{activation!r}")
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(ACTIVATIONS[activation]())
    return torch.nn.Sequential(*layers)


class SharedTableMLP(torch.nn.Module):
    """An :func:`mlp` over every node's observation ``[..., N, D]`` whose columns from
    ``own`` on (the task table) are the same for every node: its first layer multiplies that
    part once per environment instead of N times (the same function as ``mlp(sizes)`` up to
    float rounding, and the same weights: :attr:`net` is that mlp, whose ``state_dict`` is
    what a model file stores). On CoRE-v0 the table is 512 of a node's 556 columns.

    Raises:
        ValueError: ``own`` not inside the input size.
    """

    def __init__(self, sizes: list[int], own: int, activation: str = "tanh") -> None:
        super().__init__()
        if not 0 < own < sizes[0]:
            raise ValueError(f"own: expected 1..{sizes[0] - 1} (columns before the shared "
                             f"task table), got {own}")
        self.net, self.own = mlp(sizes, activation), own

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, rest = self.net[0], list(self.net)[1:]
        assert isinstance(first, torch.nn.Linear)
        w, own, linear = first.weight, self.own, torch.nn.functional.linear
        # contiguous operands: a strided one sends linear down a slow path
        h = (linear(x[..., :own].contiguous(), w[:, :own].contiguous(), first.bias)
             + linear(x[..., 0, own:].contiguous(), w[:, own:].contiguous()).unsqueeze(-2))
        for layer in rest:
            h = layer(h)
        return h


class SlotSharedActor(torch.nn.Module):
    """An actor that does not depend on K: task k's logit is one network of (the node's own
    columns, task k's row of the table), the same weights for every visible task; idle's is a
    second network of the own columns. ``x float32[..., D] -> logits float32[..., K + 1]``
    for any K (the table's rows are ``task_size`` wide after the first ``own`` columns)."""

    def __init__(self, own: int, task_size: int, hidden: list[int],
                 activation: str = "tanh") -> None:
        super().__init__()
        self.own, self.task_size = own, task_size
        self.score = mlp([own + task_size, *hidden, 1], activation)
        self.idle = mlp([own, *hidden, 1], activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        own = x[..., : self.own]
        tasks = x[..., self.own:].unflatten(-1, (-1, self.task_size))  # [..., K, F]
        pair = torch.cat([own.unsqueeze(-2).expand(*tasks.shape[:-1], self.own), tasks], -1)
        return torch.cat([self.idle(own), self.score(pair).squeeze(-1)], -1)


def actor_network(spec: dict[str, Any]) -> torch.nn.Module:
    """The actor a model file's ``config["actor"]`` describes: ``{"kind": "slot_shared",
    "own", "task_size", "hidden", "activation"}`` (:class:`SlotSharedActor`) or, without a
    kind (``"mlp"``), ``{"sizes", "activation"}`` (:func:`mlp`).

    Raises:
        ValueError: another kind, or a spec without its entries."""
    kind = spec.get("kind", "mlp")
    try:
        if kind == "slot_shared":
            return SlotSharedActor(int(spec["own"]), int(spec["task_size"]),
                                   [int(h) for h in spec["hidden"]], spec["activation"])
        if kind == "mlp":
            return mlp(list(spec["sizes"]), spec["activation"])
    except KeyError as e:
        raise ValueError(f"actor: a {kind} spec without {e}") from None
    raise ValueError(f"actor: expected kind 'mlp' or 'slot_shared', got {kind!r}")
