"""MARA-fair's constraint (SPEC §10): PPO on a Lagrangian with one multiplier per tenant.

The constrained problem: maximise the expected completed tasks subject to, for every tenant
g, ``rate_g >= f * rate`` (its completion rate at least a fraction f of the overall rate).
With tenant g's expected arrivals a share ``s_g`` of all of them, the Lagrangian

    L = N + sum_g lam_g * (N_g / s_g - f * N)      (N: completions, N_g: tenant g's)

is a sum over completed tasks, so the reward stays a per-step count: a completion of tenant
g is worth ``w_g = 1 + lam_g / s_g - f * sum_h lam_h`` (:meth:`TenantLagrangian.weights`).
While a tenant lags, the others' completions are worth less than 1 (at most f * sum lam
less; below 0 once f * sum lam > 1): the constraint is on a ratio, and lowering the overall
rate is one way to meet it. The multipliers move by dual ascent on the measured gap, once per
PPO update and with a small step (the slower timescale of RCPO, Tessler et al. 2019, and
PPO-Lagrangian, Ray et al. 2019):
``lam_g <- clip(lam_g + lr * (f * rate - rate_g), 0, LAMBDA_MAX)``, the rates pooled over the
last ``window`` finished training episodes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

LAMBDA_MAX = 10.0
"""Upper bound of every multiplier (keeps the reward bounded while a constraint cannot be
met)."""


class TenantLagrangian:
    """Per-tenant Lagrange multipliers, their reward weights and their dual update.

    Args:
        shares: each tenant's share of the arrivals (the workload's ``tenant_shares``).
        fraction: f in (0, 1].
        lr: the multipliers' step per :meth:`update`.
        window: finished episodes whose counts the rates pool.
    """

    def __init__(self, shares: Sequence[float], fraction: float, lr: float,
                 window: int) -> None:
        self.shares = np.asarray(shares, dtype=np.float64)
        if self.shares.ndim != 1 or self.shares.size < 2 or (self.shares <= 0).any():
            raise ValueError(f"shares: expected two or more positive tenant shares, got "
                             f"{shares!r}")
        if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
            raise ValueError(f"fraction: expected a number in (0, 1], got {fraction!r}")
        self.fraction = float(fraction)
        self.lr = float(lr)
        self.lam = np.zeros(self.shares.size)
        self._recent: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=window)

    def weights(self) -> np.ndarray:
        """float64[G]: what a completion of each tenant is worth in the reward."""
        return 1.0 + self.lam / self.shares - self.fraction * self.lam.sum()

    def reward(self, tenant_successes: np.ndarray) -> np.ndarray:
        """float64[B] rewards of one step from its int[B, G] successes by tenant."""
        return np.asarray(tenant_successes, dtype=np.float64) @ self.weights()

    def observe(self, arrived: np.ndarray, completed: np.ndarray) -> None:
        """Add finished episodes' int[F, G] arrivals and completions by tenant."""
        for a, c in zip(np.asarray(arrived), np.asarray(completed), strict=False):
            self._recent.append((a, c))

    def rates(self) -> tuple[np.ndarray, float] | None:
        """The pooled completion rate of every tenant and overall, or None before any
        episode finished."""
        if not self._recent:
            return None
        arrived = np.sum([a for a, _ in self._recent], axis=0).astype(np.float64)
        completed = np.sum([c for _, c in self._recent], axis=0).astype(np.float64)
        overall = completed.sum() / max(arrived.sum(), 1.0)
        return completed / np.maximum(arrived, 1.0), float(overall)

    def update(self) -> dict[str, float]:
        """One dual-ascent step; returns the logged values (``lambda_g``, ``rate_g``,
        ``overall``, ``worst_ratio``), empty before any episode finished."""
        got = self.rates()
        if got is None:
            return {}
        rate, overall = got
        self.lam = np.clip(self.lam + self.lr * (self.fraction * overall - rate), 0.0,
                           LAMBDA_MAX)
        logs = {"overall": overall,
                "worst_ratio": float(rate.min() / overall) if overall > 0 else 0.0}
        for g in range(rate.size):
            logs[f"lambda_{g}"] = float(self.lam[g])
            logs[f"rate_{g}"] = float(rate[g])
        return logs

    def state(self) -> dict[str, Any]:
        return {"lambda": [float(x) for x in self.lam],
                "recent": [[a.tolist(), c.tolist()] for a, c in self._recent]}

    def load(self, state: dict[str, Any]) -> None:
        lam = np.asarray(state["lambda"], dtype=np.float64)
        if lam.shape != self.lam.shape:
            raise ValueError(f"fair state: expected {self.lam.size} multipliers, got "
                             f"{lam.size}")
        self.lam = lam
        self._recent.clear()
        for a, c in state["recent"]:
            self._recent.append((np.asarray(a, dtype=np.int64), np.asarray(c, dtype=np.int64)))
