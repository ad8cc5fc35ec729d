"""How a job's learning rate changes with the nodes it trains on (the ``lr_scaling`` variant
of the built-in job kinds)."""

from __future__ import annotations

import math

LR_SCALINGS = ("none", "sqrt", "linear")
"""``"none"``: lr; ``"sqrt"``: lr * sqrt(k); ``"linear"``: lr * k (the linear scaling rule of
Goyal et al. 2017)."""


def check_lr_scaling(value: str) -> str:
    """``value`` if it is one of :data:`LR_SCALINGS`; raises ValueError otherwise."""
    if value not in LR_SCALINGS:
        raise ValueError(f"lr_scaling: expected 'none', 'sqrt' or 'linear', got {value!r}")
    return value


def scaled_lr(lr: float, scaling: str, nodes: int) -> float:
    """The learning rate of a job with ``lr`` on one node, trained on ``nodes`` nodes."""
    return lr * {"none": 1.0, "sqrt": math.sqrt(nodes), "linear": float(nodes)}[scaling]
