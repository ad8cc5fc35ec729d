"""Compiled kernels of the dynamics and the observations (used when numba is installed).

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


@njit(**_JIT)
def observe(t_, queued, last_task, last_slot, speed, status, w_deadline, queue_head,
            next_task, slot_task, slot_arrival, slot_deadline, slot_cap, slot_alpha,
            slot_rate, slot_log1p_work, slot_log_loss, slot_log_target, slot_psi, slot_slope,
            slot_n_obs, slot_nodes_last, tcol, gcol, ncol, inv_w, w, inv_n, inv_k,
            max_steps, arrival_slots, max_speed, work_norm, node_index, table, glob, nodes):
    """:meth:`core_env.observe.Observer._compute_tables`: the task table, the global and the
    node blocks, written into the given buffers (numpy broadcasts them into observations:
    its copies run at memory speed, faster than a compiled loop here)."""
    bsz, k = slot_task.shape
    n = speed.shape[1]
    f = table.shape[2]
    third = np.float32(1.0 / 3.0)
    quarter = np.float32(0.25)
    for b in range(bsz):
        t = t_[b]
        active = np.float32(0.0)
        for j in range(k):
            for c in range(f):
                table[b, j, c] = 0.0
            if slot_task[b, j] < 0:
                continue
            active += np.float32(1.0)
            left = slot_deadline[b, j] - t
            window = slot_deadline[b, j] - slot_arrival[b, j]
            gap = (slot_log_loss[b, j] - slot_log_target[b, j]) * quarter  # float32
            gap = min(max(gap, np.float32(-1.0)), np.float32(1.0))
            gap = gap * np.float32(slot_n_obs[b, j] > 0)
            slope = min(max(slot_slope[b, j] * third, np.float32(-1.0)), np.float32(1.0))
            reach = log1p_scalar(slot_rate[b, j] * np.float64(max(left, 0))) * work_norm
            row = table[b, j]
            row[tcol[0]] = 1.0
            row[tcol[1]] = min(np.float64(left) * np.float64(inv_w), 1.0)
            row[tcol[2]] = min(np.float64(t - slot_arrival[b, j]) * np.float64(inv_w), 1.0)
            row[tcol[3]] = np.float32(left * 4 <= window)
            row[tcol[4]] = gap
            row[tcol[5]] = slot_psi[b, j]
            row[tcol[6]] = min(slot_log1p_work[b, j] * work_norm, 1.0)
            row[tcol[7]] = slope
            row[tcol[8]] = np.float64(slot_nodes_last[b, j]) * np.float64(inv_n)
            row[tcol[9]] = np.float32(min(slot_cap[b, j], n)) * inv_n  # float32
            row[tcol[10]] = slot_alpha[b, j]
            row[tcol[11]] = min(reach, 1.0)
        urgency = np.float32(1.0)
        if queued[b] > 0:
            dl = np.iinfo(np.int64).max
            for i in range(queue_head[b], next_task[b]):
                if status[b, i] == QUEUED and w_deadline[b, i] < dl:
                    dl = w_deadline[b, i]
            urgency = min(max(np.float64(dl - t) / np.float64(w), 0.0), 1.0)
        busy = 0
        for i in range(n):
            busy += last_task[b, i] >= 0
        gl = glob[b]
        gl[gcol[0]] = min(np.float64(t) / np.float64(max_steps), 1.0)
        gl[gcol[1]] = np.float32(t < arrival_slots)
        gl[gcol[2]] = min(np.float64(queued[b]) * (0.25 / k), 1.0)
        gl[gcol[3]] = active * inv_k  # float32
        gl[gcol[4]] = np.float64(busy) * np.float64(inv_n)
        gl[gcol[5]] = urgency
        for i in range(n):
            nd = nodes[b, i]
            nd[ncol[0]] = speed[b, i] / max_speed  # float32
            nd[ncol[1]] = node_index[i]
            nd[ncol[2]] = np.float32(last_task[b, i] < 0)
            nd[ncol[3]] = np.float64(last_slot[b, i] + 1) * np.float64(inv_k)


@njit(**_JIT)
def switch_tenant_features(slot_task, held_task, held_slot, w_switch_cost, switch_cost,
                           w_tenant, status, shares, n_tenants, gcol_cost, ncol_held,
                           tcol_cost, tcol_holders, tcol_tenant, inv_k, inv_n, inv_g, glob,
                           nodes, table):
    """:meth:`core_env.observe.Observer._switch_features` and ``_tenant_features``: the
    switching-cost columns (SPEC §9) and, with ``n_tenants`` > 0, the tenant columns (SPEC
    §10; ``tcol_tenant`` = the tenant, share and lag columns), zero without tenants."""
    bsz, k = slot_task.shape
    n = held_slot.shape[1]
    m = w_tenant.shape[1]
    g = max(n_tenants, 1)
    holders = np.zeros(k, dtype=np.int64)
    done = np.zeros(g, dtype=np.int64)
    won = np.zeros(g, dtype=np.int64)
    lag = np.zeros(g, dtype=np.float64)
    for b in range(bsz):
        glob[b, gcol_cost] = switch_cost[b]
        holders[:] = 0
        for i in range(n):
            hs = held_slot[b, i]
            held = hs >= 0 and slot_task[b, max(hs, 0)] == held_task[b, i]
            # int64 times a float32 scalar: float64, rounded once when stored
            nodes[b, i, ncol_held] = np.float64(hs + 1 if held else 0) * np.float64(inv_k)
            if held:
                holders[hs] += 1
        for j in range(k):
            present = slot_task[b, j] >= 0
            table[b, j, tcol_cost] = (w_switch_cost[b, slot_task[b, j]] if present
                                      else np.float32(0.0))
            table[b, j, tcol_holders] = np.float64(holders[j]) * np.float64(inv_n)
        if n_tenants == 0:
            for j in range(k):
                for c in range(3):
                    table[b, j, tcol_tenant[c]] = 0.0
            continue
        done[:] = 0
        won[:] = 0
        for i in range(m):
            st = status[b, i]
            if st == SUCCEEDED:
                won[w_tenant[b, i]] += 1
            if st == SUCCEEDED or st == EXPIRED:
                done[w_tenant[b, i]] += 1
        total_won = 0
        total_done = 0
        for x in range(g):  # integer sums: exact in any order
            total_won += won[x]
            total_done += done[x]
        overall = np.float64(total_won) / np.float64(max(total_done, 1))
        for x in range(g):
            lag[x] = (overall - np.float64(won[x]) / np.float64(max(done[x], 1))
                      if done[x] > 0 else 0.0)
        for j in range(k):
            if slot_task[b, j] < 0:
                for c in range(3):
                    table[b, j, tcol_tenant[c]] = 0.0
                continue
            x = w_tenant[b, slot_task[b, j]]
            table[b, j, tcol_tenant[0]] = np.float64(x + 1) * np.float64(inv_g)
            table[b, j, tcol_tenant[1]] = shares[x]
            table[b, j, tcol_tenant[2]] = min(max(lag[x], -1.0), 1.0)


@njit(**_JIT)
def write_mask(slot_task, mask):
    """:meth:`core_env.observe.Observer.write_mask`: idle and every occupied slot, for
    every node (int8[B, N, K + 1])."""
    bsz, k = slot_task.shape
    n = mask.shape[1]
    for b in range(bsz):
        for i in range(n):
            mask[b, i, 0] = 1
            for j in range(k):
                mask[b, i, j + 1] = 1 if slot_task[b, j] >= 0 else 0
