"""Action masks (SPEC §3, "Observation, mask, state").

Nodes act simultaneously, so the per-agent mask in each observation only forbids what is
infeasible for that node alone: an empty slot. Idle (action 0) is always legal. The joint
constraint, each task's parallelism cap, is exposed by the pure functions below: given the
actions already chosen by nodes 0..i-1 they return node i's *sequential* mask, which an
autoregressive policy (such as MAT) applies while decoding. The env resolves caps
lowest-node-first, so decoding nodes in index order with these masks never causes a conflict.
"""

from __future__ import annotations

import numpy as np


def sequential_mask(action_mask: np.ndarray, capacity: np.ndarray,
                    earlier_actions: np.ndarray) -> np.ndarray:
    """Mask of the next node given the actions of the nodes before it.

    Args:
        action_mask: int8/bool[..., K + 1], the node's own mask from its observation.
        capacity: int[..., K], each visible task's parallelism cap (``cap`` column x N, see
            :meth:`core_env.layout.Layout.capacity`).
        earlier_actions: int[..., i], actions of nodes 0..i-1 (may be empty).

    Returns:
        int8[..., K + 1]: ``action_mask`` with the slots whose cap is used up set to 0.
    """
    action_mask = np.asarray(action_mask)
    k = action_mask.shape[-1] - 1
    earlier = np.asarray(earlier_actions, dtype=np.int64)
    used = (earlier[..., :, None] == np.arange(1, k + 1)).sum(axis=-2)
    out = action_mask.astype(np.int8, copy=True)
    out[..., 1:] &= (used < np.asarray(capacity)).astype(np.int8)
    return out


def sequential_masks(action_mask: np.ndarray, capacity: np.ndarray,
                     actions: np.ndarray) -> np.ndarray:
    """Every node's sequential mask under a realised joint action (teacher forcing).

    Args:
        action_mask: int8/bool[..., N, K + 1], per-node masks.
        capacity: int[..., K], parallelism caps of the visible tasks.
        actions: int[..., N], the joint action, decoded in node order.

    Returns:
        int8[..., N, K + 1]: row i is ``sequential_mask(mask[i], capacity, actions[:i])``.
    """
    action_mask = np.asarray(action_mask)
    k = action_mask.shape[-1] - 1
    onehot = np.asarray(actions, dtype=np.int64)[..., :, None] == np.arange(1, k + 1)
    used_before = np.cumsum(onehot, axis=-2) - onehot  # picks by nodes strictly before i
    out = action_mask.astype(np.int8, copy=True)
    out[..., 1:] &= (used_before < np.asarray(capacity)[..., None, :]).astype(np.int8)
    return out
