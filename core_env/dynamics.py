"""One simulator step for a whole batch, vectorised (SPEC §3, "one step").

This is the only implementation of the dynamics: the PettingZoo env, the Gymnasium view and
the batched simulator all call :func:`step`. Resolution order inside a step:

1. an action the mask forbids (an empty slot) runs as idle and is counted (``illegal``);
2. if more nodes pick a task than its cap allows, the lowest-numbered nodes keep it and the
   rest idle (``conflicts``);
3. switching cost (SPEC §9): a node that does not hold its task's state (the node last
   trained another task, or none) restores it and delivers (1 - c_j) of its work, unless the
   task has never trained (nothing to restore); a node then holds the last task it trained.
   ``restores`` counts the node-slots that restored, ``switches`` those that trained a
   different task than in the previous slot, whatever the costs are;
4. a task trained by k nodes gains ``sum(speeds * restore factors) * k**(alpha - 1)``;
5. its observed loss is read off its noise path at the new cumulative work (or, in live
   mode, comes from really training the job: a ``loss_hook``, see :class:`TrainedSlots`);
6. tasks whose observed loss <= target succeed (reward +1 each) and free their slots;
7. time advances; unfinished tasks (visible or queued) whose deadline has come expire;
8. arrivals of the new slot join the FIFO queue; free slots fill in arrival order.

Then the episode terminates once arrivals are over and no task is visible or queued, or is
truncated at ``max_steps``. The reward is ``C_t + beta * (Phi(s_{t+1}) - Phi(s_t))`` with
Phi the sum of the visible tasks' log-progress and Phi := 0 at the end of an episode.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from core_env import pmath
from core_env.curves import GRID_SIZE, GRID_STEP, LOG_WORK_GRID
from core_env.rewards import log_progress
from core_env.state import ACTIVE, EXPIRED, QUEUED, SLOPE_LAG, SUCCEEDED, BatchState

# the step's types and statistics live in core_env.step_types; they stay importable from here
from core_env.step_types import (  # noqa: F401 (re-exported)
    BACKENDS,
    EPISODE_KEYS,
    FAILED,
    LOST,
    OBSERVED,
    LossHook,
    StepParams,
    StepResult,
    TrainedSlots,
    check_backend,
    default_backend,
    episode_stats,
)


def arrive(s: BatchState, rows: np.ndarray | None = None, backend: str = "numpy") -> None:
    """Steps 7-8 at the current slot ``s.t``: expire due tasks, queue arrivals, fill slots.

    Args:
        rows: bool[B] environments to process (``None`` = all).
        backend: one of :data:`BACKENDS` (``StepParams.backend``).
    """
    if backend == "numba":
        return _compiled_arrive(s, rows)
    t = s.t
    # 7. expiry of visible tasks
    due = (s.slot_task >= 0) & (s.slot_deadline <= t[:, None])
    if rows is not None:
        due &= rows[:, None]
    if due.any():
        db, dk = np.nonzero(due)
        s.status[db, s.slot_task[db, dk]] = EXPIRED
        s.slot_task[db, dk] = -1
        s.slot_psi[db, dk] = 0.0
        np.add.at(s.expired, db, 1)
    # 7. expiry of queued tasks (only rows with a queue)
    has_queue = s.queued > 0
    if rows is not None:
        has_queue &= rows
    qrows = np.flatnonzero(has_queue)
    if qrows.size:
        idx, queued = queue_window(s, qrows)
        qdue = queued & (s.w_deadline[qrows[:, None], idx] <= t[qrows, None])
        qb, qw = np.nonzero(qdue)
        if qb.size:
            s.status[qrows[qb], idx[qb, qw]] = EXPIRED
            n_qdue = np.bincount(qb, minlength=qrows.size)
            s.expired[qrows] += n_qdue
            s.queued[qrows] += -n_qdue
            _tighten_head(s, qrows, idx, queued & ~qdue)
    # 8. arrivals: tasks are sorted by arrival, so they come from the next_task pointer
    m = s.status.shape[1]
    env = np.arange(s.batch_size) if rows is None else np.flatnonzero(rows)
    while env.size:
        idx = np.minimum(s.next_task[env], m - 1)
        hit = (s.w_arrival[env, idx] == t[env]) & (s.next_task[env] < m)
        env, idx = env[hit], idx[hit]
        s.status[env, idx] = QUEUED
        s.next_task[env] += 1
        s.arrived[env] += 1
        s.queued[env] += 1
    _admit(s)


def queue_window(s: BatchState, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The queued tasks of some environments, oldest first.

    Every queued task of a row lies in [queue_head, next_task) (tasks arrive in row order
    and leave the queue oldest first, except expiries), so only that window is scanned.

    Args:
        rows: int[R] environment indices.

    Returns:
        ``(idx, queued)``: int64[R, W] task rows of the window and bool[R, W] whether each
        is queued (False past a row's window).
    """
    head = s.queue_head[rows]
    nxt = s.next_task[rows]
    width = int((nxt - head).max()) if rows.size else 0
    idx = head[:, None] + np.arange(width)
    valid = idx < nxt[:, None]
    idx = np.minimum(idx, s.status.shape[1] - 1)
    return idx, valid & (s.status[rows[:, None], idx] == QUEUED)


def _tighten_head(s: BatchState, rows: np.ndarray, idx: np.ndarray, queued: np.ndarray) -> None:
    """Move each row's queue head to its oldest remaining queued task (or next_task)."""
    if idx.shape[1] == 0:
        return
    first = idx[np.arange(rows.size), queued.argmax(axis=1)]
    s.queue_head[rows] = np.where(queued.any(axis=1), first, s.next_task[rows])


def _admit(s: BatchState) -> None:
    """Fill free slots with the oldest queued tasks (FIFO), lowest free slot first."""
    free = s.slot_task < 0
    n_free = free.sum(axis=1)
    fill = np.minimum(n_free, s.queued)
    if not fill.any():
        return
    rows = np.flatnonzero(fill)
    idx, queued = queue_window(s, rows)
    rank = np.cumsum(queued, axis=1) - 1
    take = queued & (rank < fill[rows, None])
    tb, tw = np.nonzero(take)
    tm = idx[tb, tw]
    r = rank[tb, tw]
    _tighten_head(s, rows, idx, queued & ~take)
    fb, fk = np.nonzero(free[rows])
    nth_free = np.empty((rows.size, free.shape[1]), dtype=np.int64)
    nth_free[fb, np.cumsum(free[rows], axis=1)[fb, fk] - 1] = fk  # r-th free slot of a row
    slot = nth_free[tb, r]
    b = rows[tb]
    s.status[b, tm] = ACTIVE
    s.queued[rows] -= fill[rows]
    s.slot_task[b, slot] = tm
    s.slot_arrival[b, slot] = s.w_arrival[b, tm]
    s.slot_deadline[b, slot] = s.w_deadline[b, tm]
    s.slot_admitted[b, slot] = s.t[b]
    s.slot_cap[b, slot] = s.w_cap[b, tm]
    s.slot_alpha[b, slot] = s.w_alpha[b, tm]
    s.slot_rate[b, slot] = pmath.pow(np.minimum(s.w_cap[b, tm], s.speed.shape[1]),
                                     s.w_alpha[b, tm]) * s.mean_speed[b].astype(np.float64)
    s.slot_log_target[b, slot] = s.w_log_target[b, tm]
    for arr in (s.slot_work, s.slot_log1p_work, s.slot_log_loss, s.slot_first_log_loss,
                s.slot_psi, s.slot_slope, s.slot_n_obs, s.slot_nodes_last):
        arr[b, slot] = 0


def step(s: BatchState, actions: np.ndarray, p: StepParams,
         loss_hook: LossHook | None = None
         ) -> StepResult:
    """Advance every environment of the batch by one slot, in place.

    Args:
        s: the batch state.
        actions: int[B, N], validated to lie in [0, K].
        p: constants of the dynamics.
        loss_hook: where observed losses come from instead of the workload's noise paths
            (live mode): called once with the :class:`TrainedSlots`, it returns
            ``(log_loss, outcome)``, float64[T] ln loss and int[T] :data:`OBSERVED` /
            :data:`LOST` / :data:`FAILED` per task (``log_loss`` is ignored where the
            outcome is not OBSERVED), or ``(log_loss, outcome, work)`` with float32[T] the
            cumulative work each task really reached (live mode's wall clock; it replaces
            the model's ``TrainedSlots.work`` where the outcome is OBSERVED).

    Returns:
        The :class:`StepResult`. Environments that finished are left in their final state;
        resetting them is the caller's job.
    """
    if p.backend == "numba":
        return _compiled_step(s, actions, p, loss_hook)
    bsz, n = actions.shape
    k = p.n_slots
    rows = np.arange(bsz)[:, None]
    a = actions.astype(np.int64, copy=True)
    # 1. masked actions run as idle
    task_of = np.where(a > 0, s.slot_task[rows, a - 1], -1)  # task row picked, -1 = none
    illegal = (a > 0) & (task_of < 0)
    a[illegal] = 0
    # 2. parallelism caps, lowest node first: a node's rank among the nodes that picked the
    # same slot comes from a stable sort of the flat [B, K+1] slot indices.
    keys = (rows * (k + 1) + a).ravel()
    picks = np.bincount(keys, minlength=bsz * (k + 1))
    first = np.cumsum(picks) - picks  # sorted position of each slot's first picker
    order = np.argsort(keys, kind="stable")
    before = np.empty(bsz * n, dtype=np.int64)
    before[order] = np.arange(bsz * n) - first[keys[order]]
    over = (a > 0) & (before.reshape(bsz, n) >= s.slot_cap[rows, a - 1])
    a[over] = 0
    task_of[over] = -1
    train = a > 0
    # 3. switching cost: a restore wherever the node does not hold a task that trained before
    switched = train & (s.last_task >= 0) & (task_of != s.last_task)
    started = np.where(train, s.slot_n_obs[rows, a - 1] > 0, False)
    restored = started & (task_of != s.held_task)
    delivered = np.where(train, s.speed, np.float32(0.0))
    rb, ri = np.nonzero(restored)
    delivered[rb, ri] *= s.w_keep[rb, task_of[rb, ri]]
    s.held_task[:] = np.where(train, task_of, s.held_task)
    s.held_slot[:] = np.where(train, a - 1, s.held_slot)
    # 4. work: per-slot sums over nodes (bincount keeps a fixed, batch-independent order)
    flat = (rows * (k + 1) + a).ravel()
    speed_sum = np.bincount(flat, weights=delivered.ravel(), minlength=bsz * (k + 1))
    count = np.bincount(flat, minlength=bsz * (k + 1)).reshape(bsz, k + 1)[:, 1:]
    speed_sum = speed_sum.reshape(bsz, k + 1)[:, 1:]
    tb, tk = np.nonzero(count)
    ti = tb * k + tk  # flat [B, K] index of every trained slot (1-D takes are fast)
    cnt = count[tb, tk]
    # (float64 with portable math, rounded to the float32 state once: see core_env.pmath)
    alpha = s.slot_alpha.ravel()[ti].astype(np.float64)
    gain = speed_sum[tb, tk] * pmath.exp((alpha - 1.0) * pmath.log_whole(cnt))  # cnt**(alpha-1)
    work = (s.slot_work.ravel()[ti] + gain).astype(np.float32)
    task = s.slot_task.ravel()[ti]
    trained_ti, trained_cnt = ti, cnt
    failed_ti = ti[:0]
    if loss_hook is not None:  # live mode: the losses come from real training
        hook_ll, outcome, work = _hooked(loss_hook, TrainedSlots(tb, tk, task, cnt, work, a))
        failed_ti = ti[outcome == FAILED]
        keep = outcome == OBSERVED
        tb, tk, ti, cnt = tb[keep], tk[keep], ti[keep], cnt[keep]
        work, task = work[keep], task[keep]
        hook_ll = np.asarray(hook_ll, dtype=np.float64)[keep]
    s.slot_work.ravel()[ti] = work
    s.slot_log1p_work.ravel()[ti] = pmath.log1p(work)
    # 5. observed loss at the new cumulative work
    log_work = pmath.log(work).astype(np.float32)
    if loss_hook is None:
        x = (log_work.astype(np.float64) - LOG_WORK_GRID[0]) * (1.0 / GRID_STEP)
        x = np.minimum(np.maximum(x, 0.0), GRID_SIZE - 1.0)
        i0 = np.minimum(x.astype(np.int64), GRID_SIZE - 2)
        frac = x - i0
        gi = (tb * s.w_log_loss.shape[1] + task) * GRID_SIZE + i0
        table = s.w_log_loss.ravel()
        lo = table[gi].astype(np.float64)
        ll = lo + (table[gi + 1] - lo) * frac  # float64
    else:
        ll = hook_ll
    n_obs = s.slot_n_obs.ravel()[ti]
    first = np.where(n_obs == 0, ll, s.slot_first_log_loss.ravel()[ti])
    r = SLOPE_LAG + 1
    back = ti * r + np.maximum(n_obs - SLOPE_LAG, 0) % r
    dw = log_work - s.ring_log_work.ravel()[back]
    has_slope = (n_obs > 0) & (dw > 1e-6)
    s.slot_slope.ravel()[ti] = np.where(
        has_slope, (ll - s.ring_log_loss.ravel()[back]) / np.where(has_slope, dw, 1.0), 0.0)
    ring = ti * r + n_obs % r
    s.ring_log_work.ravel()[ring] = log_work
    s.ring_log_loss.ravel()[ring] = ll
    s.slot_first_log_loss.ravel()[ti] = first
    s.slot_log_loss.ravel()[ti] = ll
    hi = ti * s.hist_log_work.shape[2] + n_obs
    s.hist_log_work.ravel()[hi] = log_work
    s.hist_log_loss.ravel()[hi] = ll
    s.slot_n_obs.ravel()[ti] = n_obs + 1
    target = s.slot_log_target.ravel()[ti]
    s.slot_psi.ravel()[ti] = log_progress(first, ll, target)
    # 6. successes
    ok = ll <= target
    si = ti[ok]
    sb = tb[ok]
    s.status[sb, task[ok]] = SUCCEEDED
    s.slot_task.ravel()[si] = -1
    s.slot_psi.ravel()[si] = 0.0
    successes = np.bincount(sb, minlength=bsz)
    s.completed += successes
    if failed_ti.size:  # failed jobs leave their slots and count as expired
        fb = failed_ti // k
        s.status[fb, s.slot_task.ravel()[failed_ti]] = EXPIRED
        s.slot_task.ravel()[failed_ti] = -1
        s.slot_psi.ravel()[failed_ti] = 0.0
        np.add.at(s.expired, fb, 1)
    # bookkeeping for the next observation
    s.slot_nodes_last.fill(0)
    s.slot_nodes_last.ravel()[trained_ti] = trained_cnt
    s.last_task[:] = task_of
    s.illegal += illegal.sum(axis=1)
    s.conflicts += over.sum(axis=1)
    s.switches += switched.sum(axis=1)
    s.restores += restored.sum(axis=1)
    s.busy += train.sum(axis=1)
    # 7-8. time advances, expiry, arrivals, admission
    s.t += 1
    arrive(s)
    still = train & (s.slot_task[rows, a - 1] == task_of)
    s.last_slot[:] = np.where(still, a - 1, -1)
    # episode end and reward
    terminated = (s.t >= p.arrival_slots) & (s.queued == 0) & (s.slot_task < 0).all(axis=1)
    truncated = ~terminated & (s.t >= p.max_steps)
    phi_new = pmath.rowsum(s.slot_psi)  # in slot order, whatever B is
    phi_new[terminated | truncated] = 0.0
    reward = successes + p.beta * (phi_new - s.phi)
    s.phi[:] = phi_new
    s.ep_return += reward
    return StepResult(reward=reward, successes=successes, terminated=terminated,
                      truncated=truncated)


_GRID0, _INV_STEP = float(LOG_WORK_GRID[0]), 1.0 / GRID_STEP
"""The grid position's constants, as the numpy step computes them."""


def _hooked(loss_hook: Callable, trained: TrainedSlots
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A loss hook's ``(log_loss, outcome, work)``: the model's work where it returned only
    two arrays, or where the outcome is not OBSERVED (see :func:`step`)."""
    res = loss_hook(trained)
    outcome = np.asarray(res[1])
    work = trained.work
    if len(res) == 3:
        real = np.asarray(res[2], dtype=np.float32)
        if real.shape != work.shape or not np.isfinite(real).all() or (real <= 0).any():
            raise ValueError(f"loss_hook: work must be float32[{work.shape[0]}] of positive "
                             f"finite values, got {real!r}")
        work = np.where(outcome == OBSERVED, real, work)
    return res[0], outcome, work


def _compiled_step(s: BatchState, actions: np.ndarray, p: StepParams,
                   loss_hook: Callable | None) -> StepResult:
    """:func:`step` on the compiled kernels of :mod:`core_env._dynamics_numba` (the same result)."""
    from core_env._dynamics_numba import apply, finish, resolve, table_losses

    actions = np.ascontiguousarray(actions, dtype=np.int64)
    bsz, n = actions.shape
    k = p.n_slots
    a = np.empty((bsz, n), dtype=np.int64)
    task_of = np.empty((bsz, n), dtype=np.int64)
    count = np.empty((bsz, k), dtype=np.int64)
    work = np.zeros((bsz, k), dtype=np.float32)
    resolve(actions, s.slot_task, s.slot_cap, s.slot_alpha, s.slot_work, s.slot_n_obs,
            s.last_task, s.held_task, s.held_slot, s.w_keep, s.speed, a, task_of, count, work,
            s.illegal, s.conflicts, s.switches, s.restores, s.busy)
    log_loss = np.zeros((bsz, k))
    outcome = np.zeros((bsz, k), dtype=np.int8)
    if loss_hook is None:
        table_losses(count, work, s.slot_task, s.w_log_loss, _GRID0, _INV_STEP, GRID_SIZE,
                     log_loss)
    else:  # live mode: the losses come from real training
        tb, tk = np.nonzero(count)
        hook_ll, out, hook_work = _hooked(loss_hook, TrainedSlots(
            tb, tk, s.slot_task[tb, tk], count[tb, tk], work[tb, tk], a))
        outcome[tb, tk] = out
        log_loss[tb, tk] = np.asarray(hook_ll, dtype=np.float64)
        work[tb, tk] = hook_work
    successes = np.empty(bsz, dtype=np.int64)
    apply(count, work, log_loss, outcome, a, task_of, s.status, s.slot_task, s.slot_work,
          s.slot_log1p_work, s.slot_log_loss, s.slot_first_log_loss, s.slot_psi, s.slot_slope,
          s.slot_n_obs, s.slot_nodes_last, s.slot_log_target, s.ring_log_work, s.ring_log_loss,
          s.hist_log_work, s.hist_log_loss, s.last_task, s.completed, s.expired, successes)
    s.t += 1
    _compiled_arrive(s, None)
    reward = np.empty(bsz)
    terminated = np.empty(bsz, dtype=np.bool_)
    truncated = np.empty(bsz, dtype=np.bool_)
    finish(a, task_of, s.slot_task, s.slot_psi, s.last_slot, s.t, s.queued, p.arrival_slots,
           p.max_steps, p.beta, successes, s.phi, s.ep_return, reward, terminated, truncated)
    return StepResult(reward=reward, successes=successes, terminated=terminated,
                      truncated=truncated)


def _compiled_arrive(s: BatchState, rows: np.ndarray | None) -> None:
    """:func:`arrive` on the compiled kernel."""
    from core_env._dynamics_numba import arrive

    if rows is None:
        rows = np.ones(s.batch_size, dtype=np.bool_)
    arrive(np.ascontiguousarray(rows, dtype=np.bool_), s.t, s.status, s.w_arrival,
           s.w_deadline, s.w_cap, s.w_alpha, s.w_log_target, s.next_task, s.queue_head,
           s.queued, s.arrived, s.expired, s.mean_speed, s.speed.shape[1], s.slot_task,
           s.slot_arrival, s.slot_deadline, s.slot_admitted, s.slot_cap, s.slot_alpha,
           s.slot_rate, s.slot_log_target, s.slot_work, s.slot_log1p_work, s.slot_log_loss,
           s.slot_first_log_loss, s.slot_psi, s.slot_slope, s.slot_n_obs, s.slot_nodes_last)
