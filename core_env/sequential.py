"""Sequential decoding over the batched simulator (SPEC §12): the nodes of a slot choose in
index order, node i under its *sequential mask* (:func:`core_env.masks.sequential_mask`: its own
mask with the tasks whose cap nodes 0..i-1 used up removed), so a joint action never exceeds a
cap. The caps are resolved lowest-node-first, as the env resolves conflicts.

For a policy whose per-node logits do not depend on the earlier nodes' choices (a shared actor
that scores each node from its own observation), decoding node by node is masking and sampling
one node after the other; the joint log-probability is the sum of the nodes' conditional
log-probabilities under the realised masks. :func:`sample` draws the joint action (or the
greedy one: the arg-max of each node under its running mask), :func:`evaluate` scores given
actions by replaying the masks they realise (teacher forcing), so PPO's ratio between rollout
and update is exact: ``evaluate(logits, mask, cap, sample(...).actions).log_prob`` equals the
sampled log-probability.

    >>> from core_env import make_batched
    >>> from core_env.sequential import batch_capacity, sample
    >>> benv = make_batched("CoRE-Small-v0", num_envs=4, seed=0, observations="blocks")
    >>> obs, mask = benv.reset()
    >>> logits = np.zeros(mask.shape)                      # uniform: a random policy
    >>> u = np.random.default_rng(0).random(mask.shape[:2])
    >>> out = sample(logits, mask, batch_capacity(benv, obs), u)
    >>> out.actions.shape, out.log_prob.shape, out.masks.shape
    ((4, 4), (4,), (4, 4, 9))

The kernels are compiled by numba (``cache=True``), work in float64 whatever the logits'
float type and use :mod:`core_env.pmath`'s portable exp and log, so a seed decodes the same
actions on every machine.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from core_env._jit_options import JitOptions
from core_env._pmath_numba import exp_scalar, log_scalar

_JIT: JitOptions = {"cache": True, "error_model": "numpy"}


class Decoded(NamedTuple):
    """A decoded joint action: ``actions`` int64[B, N], ``log_prob`` float64[B] (the sum of the
    nodes' conditional log-probabilities) and ``masks`` int8[B, N, K + 1] (each node's realised
    sequential mask)."""

    actions: np.ndarray
    log_prob: np.ndarray
    masks: np.ndarray


@njit(**_JIT)
def _decode(logits, mask, capacity, u, mode, actions, log_prob, masks):  # pragma: no cover
    """mode 0: sample with the uniforms ``u`` (inverse CDF), 1: greedy (first arg-max), 2:
    teacher-forced (``actions`` given). Returns (b, i) of the first node without a legal
    action (for mode 2: whose given action is illegal), or (-1, -1)."""
    n_env, n_nodes, k1 = logits.shape
    used = np.zeros(k1 - 1, dtype=np.int64)
    for b in range(n_env):
        used[:] = 0
        log_prob[b] = 0.0
        for i in range(n_nodes):
            best = -np.inf
            best_a = -1
            for a in range(k1):
                m = mask[b, i, a] != 0
                if a > 0 and used[a - 1] >= capacity[b, a - 1]:
                    m = False
                masks[b, i, a] = 1 if m else 0
                if m and (best_a < 0 or logits[b, i, a] > best):
                    best = float(logits[b, i, a])
                    best_a = a
            if best_a < 0:
                return b, i
            total = 0.0
            for a in range(k1):
                if masks[b, i, a]:
                    total += exp_scalar(float(logits[b, i, a]) - best)
            lse = best + log_scalar(total)
            if mode == 1:
                pick = best_a
            elif mode == 0:
                pick = -1
                acc = 0.0
                for a in range(k1):
                    if masks[b, i, a]:
                        pick = a  # the last legal action if rounding leaves u above the sum
                        acc += exp_scalar(float(logits[b, i, a]) - lse)
                        if u[b, i] < acc:
                            break
            else:
                pick = actions[b, i]
                if pick < 0 or pick >= k1 or masks[b, i, pick] == 0:
                    return b, i
            actions[b, i] = pick
            log_prob[b] += float(logits[b, i, pick]) - lse
            if pick > 0:
                used[pick - 1] += 1
    return -1, -1


def _check(logits: Any, mask: Any, capacity: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lg, mk, cap = np.asarray(logits), np.asarray(mask), np.asarray(capacity)
    if lg.ndim != 3 or not np.issubdtype(lg.dtype, np.floating):
        raise ValueError(f"logits: expected a float array [B, N, K + 1], got {lg.dtype} "
                         f"{lg.shape}")
    if mk.shape != lg.shape:
        raise ValueError(f"mask: expected the logits' shape {lg.shape}, got {mk.shape}")
    want = (lg.shape[0], lg.shape[2] - 1)
    if cap.shape != want or not np.issubdtype(cap.dtype, np.integer):
        raise ValueError(f"capacity: expected an integer array of shape {want} (B, K), got "
                         f"{cap.dtype} {cap.shape}")
    return (np.ascontiguousarray(lg), np.ascontiguousarray(mk.astype(np.int8, copy=False)),
            np.ascontiguousarray(cap.astype(np.int64, copy=False)))


def _run(logits: Any, mask: Any, capacity: Any, u: np.ndarray, mode: int,
         actions: np.ndarray) -> Decoded:
    lg, mk, cap = _check(logits, mask, capacity)
    log_prob = np.empty(lg.shape[0], dtype=np.float64)
    masks = np.empty(lg.shape, dtype=np.int8)
    b, i = _decode(lg, mk, cap, u, mode, actions, log_prob, masks)
    if b >= 0:
        if mode == 2:
            raise ValueError(f"actions[{b}, {i}] (env {b}, node_{i}): {actions[b, i]} is not "
                             f"legal under the node's sequential mask "
                             f"{masks[b, i].tolist()}")
        raise ValueError(f"mask[{b}, {i}] (env {b}, node_{i}): no legal action (idle, action "
                         f"0, should always be legal)")
    return Decoded(actions, log_prob, masks)


def sample(logits: Any, mask: Any, capacity: Any, u: Any = None,
           greedy: bool = False) -> Decoded:
    """Decode a joint action node by node under sequential masks.

    Args:
        logits: float[B, N, K + 1], each node's unmasked action scores.
        mask: int8/bool[B, N, K + 1], each node's own mask (the env's).
        capacity: int[B, K], each visible task's cap (:func:`batch_capacity`).
        u: float[B, N] uniforms in [0, 1) (node i of env b picks the first legal action whose
            cumulative probability exceeds ``u[b, i]``); ignored when ``greedy``.
        greedy: each node's most probable legal action (the first of equals) instead.

    Returns:
        :class:`Decoded`.

    Raises:
        ValueError: bad shapes or types (naming the argument), or a node without a legal
            action.
    """
    lg = np.asarray(logits)
    if greedy:
        uu = np.zeros(lg.shape[:2], dtype=np.float64)
    else:
        if u is None:
            raise ValueError("u: expected float[B, N] uniforms when sampling, got None")
        uu = np.ascontiguousarray(u, dtype=np.float64)
        if uu.shape != lg.shape[:2]:
            raise ValueError(f"u: expected shape {lg.shape[:2]}, got {uu.shape}")
    actions = np.zeros(lg.shape[:2], dtype=np.int64)
    return _run(lg, mask, capacity, uu, 1 if greedy else 0, actions)


def evaluate(logits: Any, mask: Any, capacity: Any, actions: Any) -> Decoded:
    """Score a given joint action under the sequential masks it realises (teacher forcing:
    the masks are :func:`core_env.masks.sequential_masks`).

    Returns:
        :class:`Decoded` with ``actions`` as given (int64).

    Raises:
        ValueError: as :func:`sample`, or an action illegal under its node's sequential mask
            (naming the env and node).
    """
    lg = np.asarray(logits)
    acts = np.array(actions, dtype=np.int64)
    if acts.shape != lg.shape[:2]:
        raise ValueError(f"actions: expected shape {lg.shape[:2]}, got {acts.shape}")
    return _run(lg, mask, capacity, np.zeros(lg.shape[:2]), 2, acts)


def batch_capacity(benv: Any, obs: Any) -> np.ndarray:
    """int64[B, K] caps of the visible tasks from a :class:`~core_env.batched.BatchedCoreEnv`'s
    observation (full float32[B, N, D] or :class:`~core_env.observe.ObsBlocks`), as
    :meth:`core_env.layout.Layout.capacity` decodes them."""
    layout = benv.layout
    if hasattr(obs, "tasks"):
        return layout.table_capacity(np.asarray(obs.tasks))
    return layout.capacity(np.asarray(obs)[:, 0])


def state_capacity(benv: Any, states: Any) -> np.ndarray:
    """int64[..., K] caps from global states (:meth:`~core_env.batched.BatchedCoreEnv.states`,
    whose last K x F columns are the task table)."""
    layout = benv.layout
    return state_capacity_of(np.asarray(states), layout.n_slots, layout.task_size,
                             layout.task_column("cap"), layout.n_nodes).astype(np.int64)


def state_capacity_of(states: Any, n_slots: int, task_size: int, cap_column: int,
                      n_nodes: int) -> Any:
    """:func:`state_capacity` from the sizes alone (works on numpy arrays and torch tensors:
    float caps, rounded, in the input's type)."""
    table = states[..., states.shape[-1] - n_slots * task_size:]
    table = table.reshape(*states.shape[:-1], n_slots, task_size)
    return (table[..., cap_column] * n_nodes).round()
