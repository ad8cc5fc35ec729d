"""Reward shaping: the log-progress potential (SPEC §3, "Reward").

The team reward is ``r_t = C_t + beta * (Phi(s_{t+1}) - Phi(s_t))`` where C_t counts the
slot's successes and ``Phi(s) = sum_j psi_j`` over the visible tasks, with

    psi_j = clip(ln(l_j^0 / y_j) / ln(l_j^0 / eps_j), 0, 1)

(log-progress from the first observed loss l_j^0 towards the target eps_j; y_j is the
latest observed loss; psi_j = 0 before the first observation). A task leaves the sum when it
succeeds or expires, and Phi := 0 at the first and at the final state, so the shaped return
of an episode telescopes to its number of successes for every beta. The summation itself is
in :func:`core_env.dynamics.step`; this module holds the per-task term.
"""

from __future__ import annotations

import numpy as np


def log_progress(first_log_loss: np.ndarray, log_loss: np.ndarray,
                 log_target: np.ndarray) -> np.ndarray:
    """psi = clip((ln l0 - ln y) / (ln l0 - ln eps), 0, 1), elementwise, float32.

    Where ``ln l0 <= ln eps`` the first observation already met the target, so the task
    succeeds in that step and leaves Phi; the denominator is floored at 1e-6 so the value
    stays finite in [0, 1] (it is 1 there).
    """
    gap = np.maximum(first_log_loss - log_target, np.float32(1e-6))
    return np.clip((first_log_loss - log_loss) / gap, np.float32(0.0), np.float32(1.0))
