"""What the ``sb3-classic`` job kind and the ``sb3-rl`` curve bank share without importing
Stable-Baselines3: the algorithm names, the environments and the loss of a return.

The loss of a mean undiscounted episode return ``R`` on ``env_id`` is the normalised return
gap ``max((R_best - R) / (R_best - R_worst), LOSS_FLOOR)`` with the fixed per-environment
constants :data:`RETURN_RANGE` (``tools/data/rl_curves.py`` says how they were chosen)::

    normalised_loss(250.0, "CartPole-v1")     # 0.5: half-way from 0 to 500
"""

from __future__ import annotations

import numpy as np

ALGOS: tuple[str, ...] = ("ppo", "a2c")
"""The algorithms, by the names job variants and bank specs use (SB3's ``PPO`` and ``A2C``,
see :func:`core_env.live.sb3_jobs.sb3_model`)."""

LOSS_FLOOR = 0.01
"""Lower clip of the loss, so that ``log(loss)`` stays finite."""

RETURN_RANGE: dict[str, tuple[float, float]] = {
    "CartPole-v1": (0.0, 500.0),
    "Acrobot-v1": (-500.0, -60.0),
    "Pendulum-v1": (-1600.0, -150.0),
}
"""Per environment ``(R_worst, R_best)`` of the loss normalisation."""


def normalised_loss(returns: np.ndarray, env_id: str) -> np.ndarray:
    """Loss of mean episode returns: ``max((R_best - R) / (R_best - R_worst), LOSS_FLOOR)``."""
    worst, best = RETURN_RANGE[env_id]
    gap = (best - np.asarray(returns, dtype=np.float64)) / (best - worst)
    return np.maximum(gap, LOSS_FLOOR)
