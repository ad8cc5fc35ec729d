"""Compiled kernels of the dynamics (used when numba is installed); those of the observations
are in :mod:`core_env._observe_numba` (re-exported here).

:mod:`core_env.dynamics` and :mod:`core_env.observe` hold the numpy implementation, the
reference: the kernels here compute the same IEEE-754 operations in the same order, one
environment and one slot at a time, so they give the same bits (float32 state, float64
arithmetic rounded once when stored, fdlibm's ``exp``/``log``/``log1p``/``pow`` from
:mod:`core_env._pmath_numba`, sums left to right). numba compiles without fast-math, so LLVM
neither reorders nor fuses them. ``tests/core_env/test_dynamics_numba.py`` compares the two backends
array by array on every state field, observation and reward; the reference-simulator and
golden-fingerprint tests run on the compiled path (the default when numba is installed).

Where a comment names a dtype, that is numpy's promotion in the reference (NEP 50: a Python
float next to a float32 array stays float32; a float32 *numpy scalar* next to an int64 array
gives float64).

The kernels are compiled on first use and cached on disk (``cache=True``: numba's
``__pycache__`` next to this file, or ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core_env._jit_options import JitOptions
from core_env._observe_numba import (  # noqa: F401 (re-exported)
    observe,
    switch_tenant_features,
    write_mask,
)
from core_env._pmath_numba import exp_scalar, log1p_scalar, log_scalar, pow_scalar

_JIT: JitOptions = {"cache": True, "error_model": "numpy", "boundscheck": False}

# task status codes and the slope lag (core_env.state; repeated as compile-time constants)
QUEUED, ACTIVE, SUCCEEDED, EXPIRED = 1, 2, 3, 4
RING = 5  # SLOPE_LAG + 1
OBSERVED, LOST, FAILED = 0, 1, 2
_F32_1E6 = np.float32(1e-6)


@njit(**_JIT)
def arrive(rows, t_, status, w_arrival, w_deadline, w_cap, w_alpha, w_log_target,
           next_task, queue_head, queued, arrived, expired, mean_speed, n_nodes,
           slot_task, slot_arrival, slot_deadline, slot_admitted, slot_cap, slot_alpha,
           slot_rate, slot_log_target, slot_work, slot_log1p_work, slot_log_loss,
           slot_first_log_loss, slot_psi, slot_slope, slot_n_obs, slot_nodes_last):
    """Steps 7-8 (:func:`core_env.dynamics.arrive`) for the rows where ``rows`` is True,
    then admission into free slots for every row."""
    bsz, k = slot_task.shape
    m = status.shape[1]
    for b in range(bsz):
        if not rows[b]:
            continue
        t = t_[b]
        for j in range(k):  # expiry of visible tasks
            if slot_task[b, j] >= 0 and slot_deadline[b, j] <= t:
                status[b, slot_task[b, j]] = EXPIRED
                slot_task[b, j] = -1
                slot_psi[b, j] = 0.0
                expired[b] += 1
        if queued[b] > 0:  # expiry of queued tasks
            n_due = 0
            for i in range(queue_head[b], next_task[b]):
                if status[b, i] == QUEUED and w_deadline[b, i] <= t:
                    status[b, i] = EXPIRED
                    n_due += 1
            if n_due:
                expired[b] += n_due
                queued[b] -= n_due
                _tighten_head(b, status, queue_head, next_task)
        while next_task[b] < m and w_arrival[b, next_task[b]] == t:  # arrivals
            status[b, next_task[b]] = QUEUED
            next_task[b] += 1
            arrived[b] += 1
            queued[b] += 1
    for b in range(bsz):  # admission (FIFO, lowest free slot first)
        n_free = 0
        for j in range(k):
            n_free += slot_task[b, j] < 0
        fill = min(n_free, queued[b])
        if fill <= 0:
            continue
        j = 0
        taken = 0
        for i in range(queue_head[b], next_task[b]):
            if taken == fill:
                break
            if status[b, i] != QUEUED:
                continue
            while slot_task[b, j] >= 0:
                j += 1
            status[b, i] = ACTIVE
            slot_task[b, j] = i
            slot_arrival[b, j] = w_arrival[b, i]
            slot_deadline[b, j] = w_deadline[b, i]
            slot_admitted[b, j] = t_[b]
            slot_cap[b, j] = w_cap[b, i]
            slot_alpha[b, j] = w_alpha[b, i]
            slot_rate[b, j] = (pow_scalar(np.float64(min(w_cap[b, i], n_nodes)),
                                          np.float64(w_alpha[b, i]))
                               * np.float64(mean_speed[b]))
            slot_log_target[b, j] = w_log_target[b, i]
            slot_work[b, j] = 0.0
            slot_log1p_work[b, j] = 0.0
            slot_log_loss[b, j] = 0.0
            slot_first_log_loss[b, j] = 0.0
            slot_psi[b, j] = 0.0
            slot_slope[b, j] = 0.0
            slot_n_obs[b, j] = 0
            slot_nodes_last[b, j] = 0
            taken += 1
        queued[b] -= fill
        _tighten_head(b, status, queue_head, next_task)


@njit(**_JIT)
def _tighten_head(b, status, queue_head, next_task):
    """The row's queue head at its oldest queued task (or next_task if none)."""
    head = next_task[b]
    for i in range(queue_head[b], next_task[b]):
        if status[b, i] == QUEUED:
            head = i
            break
    queue_head[b] = head


@njit(**_JIT)
def resolve(actions, slot_task, slot_cap, slot_alpha, slot_work, slot_n_obs, last_task,
            held_task, held_slot, w_keep, speed, a, task_of, count, work, illegal, conflicts,
            switches, restores, busy):
    """Steps 1-4: legal and capped actions ``a``/``task_of`` [B, N], and per slot the node
    count and the new cumulative work (float32) ``count``/``work`` [B, K]."""
    bsz, n = actions.shape
    k = slot_task.shape[1]
    speed_sum = np.zeros(k + 1)
    picks = np.zeros(k + 1, dtype=np.int64)
    for b in range(bsz):
        speed_sum[:] = 0.0
        picks[:] = 0
        for j in range(k):
            count[b, j] = 0
        for i in range(n):
            ai = actions[b, i]
            ti = slot_task[b, ai - 1] if ai > 0 else -1
            if ai > 0 and ti < 0:  # 1. a masked action runs as idle
                illegal[b] += 1
                ai = 0
            if ai > 0:  # 2. the cap: the lowest-numbered pickers keep the task
                rank = picks[ai]
                picks[ai] += 1
                if rank >= slot_cap[b, ai - 1]:
                    conflicts[b] += 1
                    ai = 0
                    ti = -1
            a[b, i] = ai
            task_of[b, i] = ti
            if ai > 0:  # 3. switching cost, 4. delivered speeds summed in node order
                busy[b] += 1
                d = speed[b, i]
                if last_task[b, i] >= 0 and ti != last_task[b, i]:
                    switches[b] += 1
                if slot_n_obs[b, ai - 1] > 0 and ti != held_task[b, i]:  # a restore
                    restores[b] += 1
                    d = d * w_keep[b, ti]  # float32
                held_task[b, i] = ti
                held_slot[b, i] = ai - 1
                speed_sum[ai] += np.float64(d)
                count[b, ai - 1] += 1
        for j in range(k):
            c = count[b, j]
            if c > 0:  # gain = speed sum * c**(alpha - 1)
                alpha = np.float64(slot_alpha[b, j])
                gain = speed_sum[j + 1] * exp_scalar((alpha - 1.0) * log_scalar(np.float64(c)))
                work[b, j] = np.float32(np.float64(slot_work[b, j]) + gain)


@njit(**_JIT)
def table_losses(count, work, slot_task, w_log_loss, grid0, inv_step, grid_size, log_loss):
    """Step 5 in the simulator: the float64 observed ln loss of each trained slot, read off
    its task's noise path at the new work (``log_loss`` [B, K])."""
    bsz, k = count.shape
    for b in range(bsz):
        for j in range(k):
            if count[b, j] > 0:
                lw = np.float32(log_scalar(np.float64(work[b, j])))
                x = (np.float64(lw) - grid0) * inv_step
                x = min(max(x, 0.0), grid_size - 1.0)
                i0 = min(np.int64(x), grid_size - 2)
                frac = x - i0
                row = w_log_loss[b, slot_task[b, j]]
                lo = np.float64(row[i0])
                log_loss[b, j] = lo + (np.float64(row[i0 + 1]) - lo) * frac


@njit(**_JIT)
def apply(count, work, log_loss, outcome, a, task_of, status, slot_task, slot_work,
          slot_log1p_work, slot_log_loss, slot_first_log_loss, slot_psi, slot_slope,
          slot_n_obs, slot_nodes_last, slot_log_target, ring_log_work, ring_log_loss,
          hist_log_work, hist_log_loss, last_task, completed, expired, successes):
    """Steps 5-6 from the observed losses and outcomes of the trained slots, and the
    bookkeeping for the next observation (``last_task``, ``slot_nodes_last``)."""
    bsz, k = count.shape
    n = a.shape[1]
    for b in range(bsz):
        successes[b] = 0
        for j in range(k):
            c = count[b, j]
            slot_nodes_last[b, j] = c
            if c == 0 or outcome[b, j] == LOST:
                continue
            if outcome[b, j] == FAILED:  # the job leaves its slot and counts as expired
                status[b, slot_task[b, j]] = EXPIRED
                slot_task[b, j] = -1
                slot_psi[b, j] = 0.0
                expired[b] += 1
                continue
            w = work[b, j]
            slot_work[b, j] = w
            slot_log1p_work[b, j] = log1p_scalar(np.float64(w))
            lw = np.float32(log_scalar(np.float64(w)))
            ll = log_loss[b, j]
            n_obs = slot_n_obs[b, j]
            first = ll if n_obs == 0 else np.float64(slot_first_log_loss[b, j])
            back = max(n_obs - (RING - 1), 0) % RING
            dw = lw - ring_log_work[b, j, back]  # float32
            if n_obs > 0 and dw > _F32_1E6:
                slot_slope[b, j] = (ll - np.float64(ring_log_loss[b, j, back])) / np.float64(dw)
            else:
                slot_slope[b, j] = 0.0
            ring = n_obs % RING
            ring_log_work[b, j, ring] = lw
            ring_log_loss[b, j, ring] = ll
            slot_first_log_loss[b, j] = first
            slot_log_loss[b, j] = ll
            hist_log_work[b, j, n_obs] = lw
            hist_log_loss[b, j, n_obs] = ll
            slot_n_obs[b, j] = n_obs + 1
            target = np.float64(slot_log_target[b, j])
            gap = max(first - target, np.float64(_F32_1E6))
            slot_psi[b, j] = min(max((first - ll) / gap, 0.0), 1.0)
            if ll <= target:  # 6. success
                status[b, slot_task[b, j]] = SUCCEEDED
                slot_task[b, j] = -1
                slot_psi[b, j] = 0.0
                successes[b] += 1
        completed[b] += successes[b]
        for i in range(n):
            last_task[b, i] = task_of[b, i]


@njit(**_JIT)
def finish(a, task_of, slot_task, slot_psi, last_slot, t, queued, arrival_slots, max_steps,
           beta, successes, phi, ep_return, reward, terminated, truncated):
    """After time advanced and arrivals: ``last_slot``, the episode end and the reward."""
    bsz, k = slot_task.shape
    n = a.shape[1]
    for b in range(bsz):
        for i in range(n):
            ai = a[b, i]
            still = ai > 0 and slot_task[b, ai - 1] == task_of[b, i]
            last_slot[b, i] = ai - 1 if still else -1
        empty = True
        phi_new = 0.0
        for j in range(k):
            if slot_task[b, j] >= 0:
                empty = False
            p = np.float64(slot_psi[b, j])
            phi_new = p if j == 0 else phi_new + p  # left to right, as pmath.rowsum
        term = t[b] >= arrival_slots and queued[b] == 0 and empty
        trunc = (not term) and t[b] >= max_steps
        if term or trunc:
            phi_new = 0.0
        r = np.float64(successes[b]) + beta * (phi_new - phi[b])
        phi[b] = phi_new
        ep_return[b] += r
        reward[b] = r
        terminated[b] = term
        truncated[b] = trunc
