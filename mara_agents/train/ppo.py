"""PPO's pure pieces (Schulman et al. 2017): generalised advantage estimation, the clipped
surrogate, a running normaliser for value targets and explained variance. Each is a
function of its inputs, checked by hand in ``tests/mara_agents/train/test_ppo.py``;
:mod:`mara_agents.train.trainer` puts them together."""

from __future__ import annotations

import math

import torch


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
        last_values: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016) over a rollout.

    Args:
        rewards: float[T, B] team rewards of each step.
        values: float[T, B, N] per-node values of the states the actions were taken in.
        dones: bool[T, B], True if the episode ended with that step (next value 0).
        last_values: float[B, N] values of the states after the last step.
        gamma, lam: discount and GAE lambda.

    Returns:
        ``(advantages, returns)``, float[T, B, N]; returns = advantages + values.
    """
    t_len = rewards.shape[0]
    adv = torch.zeros_like(values)
    running = torch.zeros_like(last_values)
    next_values = last_values
    for t in reversed(range(t_len)):
        live = (~dones[t]).float()[:, None]
        delta = rewards[t][:, None] + gamma * next_values * live - values[t]
        running = delta + gamma * lam * live * running
        adv[t] = running
        next_values = values[t]
    return adv, adv + values


def clipped_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                      clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped policy loss (to minimise) and the fraction of clipped ratios.

    ``loss = -mean(min(r A, clip(r, 1 - eps, 1 + eps) A))`` with ``r = exp(logp - old_logp)``.
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    loss = -torch.mean(torch.minimum(unclipped, clipped))
    frac = torch.mean(((ratio - 1.0).abs() > clip).float())
    return loss, frac


class RunningNorm:
    """Running mean and variance of a scalar stream (Chan et al. parallel update); used to
    normalise value targets."""

    def __init__(self) -> None:
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def update(self, x: torch.Tensor) -> None:
        x = x.detach().double().flatten()
        n = x.numel()
        if n == 0:
            return
        m, v = float(x.mean()), float(x.var(unbiased=False))
        total = self.count + n
        delta = m - self.mean
        self.mean += delta * n / total
        self.var = (self.var * self.count + v * n + delta * delta * self.count * n / total) / total
        self.count = total

    @property
    def std(self) -> float:
        return math.sqrt(max(self.var, 1e-8))

    def state(self) -> dict[str, float]:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load(self, d: dict[str, float]) -> None:
        self.mean, self.var, self.count = float(d["mean"]), float(d["var"]), float(d["count"])


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - pred] / Var[target] (NaN-free: 0 when the target is constant)."""
    var = float(target.var())
    return 0.0 if var < 1e-12 else 1.0 - float((target - pred).var()) / var
