"""From node counts to node actions: the stickiness knob and the node placement shared by
every baseline (SPEC §9).

A baseline decides how many nodes each task gets (``counts``); two steps turn that into one
action per node, both used by every baseline through
:meth:`~mara_agents.baselines.common.CentralPolicy.place`:

1. **Stickiness** (:func:`sticky_counts`, off at ``stickiness = 0``). A hysteresis on taking
   nodes away from a task, as preemptive cluster schedulers (Tiresias, Gandiva) limit
   preemption: a task that trained last slot on ``prev_j`` nodes and is wanted on fewer
   keeps all ``prev_j`` unless the shrink is larger than its threshold,

       ``prev_j - want_j > stickiness * c_j * prev_j``

   (the relative shrink must exceed ``stickiness * c_j``; c_j is the task's restore cost,
   the task column ``switch_cost``, or 1 in an environment without that column). A task
   whose restore is free (c_j = 0) is never held, so with free switching the counts are the
   policy's own. Growth is never held back: the nodes a task is given come from idle nodes
   or from tasks that gave them up, and a node left idle gains nothing. When the held nodes
   leave fewer nodes than the growing tasks want, the growth (nodes above a task's
   ``prev_j``, a new task's every node) is cut one node at a time, never below ``prev_j``:
   first where a node of growth costs a restore now (a task that has trained, work > 0,
   largest c_j first; a task's first slot restores nothing, and cutting it would turn its
   later scale-out into restores), then from the task with the most growth left, then the
   highest slot. The result respects the caps and the node total (the held tasks and the
   others at ``min(want_j, prev_j)`` use at most the nodes of last slot), and with
   ``stickiness = 0`` it is ``want`` itself.
2. **Placement** (:func:`assign_nodes`). Nodes stay on the task they trained last slot;
   with ``held_slot`` given (the node feature of the same name, used when the stickiness is
   positive or the episode's switching cost is), a free node next goes to the task whose
   state it holds (it trained it before and has idled since), so resuming restores nothing;
   the other free nodes fill the remaining counts, lowest slot first, taking first the nodes
   that hold no visible task's state, then those holding a task that trains this slot, and
   last those holding a paused task (whose state they keep for its return).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from core_env.utils.checks import check_number

if TYPE_CHECKING:
    from core_env.layout import Layout

__all__ = ["assign_nodes", "check_stickiness", "keep_nodes", "node_slots", "sticky_counts"]


def check_stickiness(value: object) -> float:
    """``float(value)`` if it is a finite real number >= 0 (not a bool), else ValueError."""
    return float(check_number("stickiness", value, 0.0))


def sticky_counts(want: np.ndarray, prev: np.ndarray, threshold: np.ndarray, total: int,
                  growth_cost: np.ndarray | None = None) -> np.ndarray:
    """The policy's node counts with shrinks up to ``threshold`` nodes held back.

    Args:
        want: int[K] the policy's node counts (within the caps, summing to at most
            ``total``).
        prev: int[K] nodes each slot's task trained on last slot (0 for a new task or an
            empty slot; within the caps, summing to at most ``total``).
        threshold: float[K] the largest shrink, in nodes, that is held back (``stickiness *
            c_j * prev_j``; 0 or less: none).
        total: N.
        growth_cost: float[K] what a node of growth costs each task now (its restore cost
            c_j once it has trained, 0 before: a task's first slot restores nothing);
            the costliest growth is cut first (default: 0 for every task).

    Returns:
        int64[K] counts: ``prev_j`` where ``0 < prev_j - want_j <= threshold_j``; otherwise
        ``want_j``, cut (never below ``prev_j``) while the total exceeds ``total``: one node
        at a time from the task with the costliest growth, then the most growth left, then
        the highest slot.
    """
    want = np.asarray(want, dtype=np.int64)
    prev = np.asarray(prev, dtype=np.int64)
    held = (prev > want) & (prev - want <= np.asarray(threshold, dtype=np.float64))
    counts = np.where(held, prev, want)
    excess = int(counts.sum()) - int(total)
    if excess > 0:
        growth = np.maximum(counts - prev, 0)
        slot = np.arange(counts.size)
        cost = (np.zeros(counts.size) if growth_cost is None
                else np.asarray(growth_cost, dtype=np.float64))
        for _ in range(excess):
            j = int(np.lexsort((-slot, -growth, -np.where(growth > 0, cost, -np.inf)))[0])
            growth[j] -= 1
            counts[j] -= 1
    return counts


def assign_nodes(counts: np.ndarray, last_slot: np.ndarray,
                 held_slot: np.ndarray | None = None) -> np.ndarray:
    """Map per-slot node counts to node actions, keeping nodes on their task.

    First every node whose last slot still needs nodes stays there (lowest node first);
    with ``held_slot``, every node still free whose held slot needs nodes goes there
    (lowest node first); then the remaining nodes fill the remaining counts, lowest slot
    first: in index order, or with ``held_slot`` first the nodes holding no visible task,
    then those holding a task with ``counts > 0``, then the rest (index order within each
    group). Nodes left over idle.

    Args:
        counts: int[K] nodes wanted per slot (non-negative, summing to at most N).
        last_slot: int[N] the slot each node trained last slot, -1 for none.
        held_slot: int[N] the slot of the task whose state each node holds, -1 for none
            (None: ignore, the placement of the free-switching environment).

    Returns:
        int64[N] actions: 0 = idle, k = train slot k - 1; slot k - 1 gets exactly
        ``counts[k - 1]`` nodes.

    Raises:
        ValueError: negative counts, or more nodes wanted than there are.
    """
    counts = np.asarray(counts, dtype=np.int64)
    last_slot = np.asarray(last_slot, dtype=np.int64)
    n, k = last_slot.shape[0], counts.shape[0]
    if np.any(counts < 0):
        raise ValueError(f"counts: expected non-negative node counts, got {counts.tolist()}")
    if counts.sum() > n:
        raise ValueError(f"counts: expected at most {n} nodes in total, got {int(counts.sum())}")
    need = counts.copy()
    actions = np.zeros(n, dtype=np.int64)
    prefs = [last_slot] if held_slot is None else [last_slot,
                                                    np.asarray(held_slot, dtype=np.int64)]
    for pref in prefs:
        for i in range(n):
            s = int(pref[i])
            if actions[i] == 0 and 0 <= s < k and need[s] > 0:
                actions[i] = s + 1
                need[s] -= 1
    free = np.flatnonzero(actions == 0)
    if held_slot is not None and free.size:
        h = np.asarray(held_slot, dtype=np.int64)[free]
        valid = (h >= 0) & (h < k)
        group = np.where(~valid, 0, np.where(counts[np.clip(h, 0, k - 1)] > 0, 1, 2))
        free = free[np.argsort(group, kind="stable")]
    wanted = np.repeat(np.arange(k), need)  # slot of each still-needed node, lowest first
    actions[free[: wanted.size]] = wanted + 1
    return actions


def node_slots(obs: np.ndarray, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """int64[..., N] ``(last_slot, held_slot)`` decoded from float32[..., N, D] per-node
    observations (each node's own row; -1 for none; ``held_slot`` all -1 in an environment
    without that feature)."""
    k = layout.n_slots
    last = np.rint(obs[..., layout.index("last_slot")] * k).astype(np.int64) - 1
    if "held_slot" not in {f.name for f in layout.node_features}:
        return last, np.full_like(last, -1)
    return last, np.rint(obs[..., layout.index("held_slot")] * k).astype(np.int64) - 1


def keep_nodes(actions: np.ndarray, last_slot: np.ndarray, held_slot: np.ndarray,
               mask: np.ndarray) -> np.ndarray:
    """int64[N] node actions with the per-task counts of ``actions``, placed by
    :func:`assign_nodes` (nodes stay on their last task, then go to the task whose state
    they hold); ``actions`` itself where that placement would break a node's
    ``mask`` (int[N, K+1]).

    With a switching cost this is what a cluster scheduler does with a decision of how many
    nodes each job gets: a move is made only where a job's count changes. On identical
    nodes without a switching cost the dynamics are the same as ``actions``'.
    """
    actions = np.asarray(actions, dtype=np.int64)
    counts = np.bincount(actions, minlength=mask.shape[-1])[1:]
    placed = assign_nodes(counts, last_slot, held_slot)
    if not np.asarray(mask)[np.arange(placed.size), placed].all():
        return actions
    return placed
