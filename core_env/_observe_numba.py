"""Compiled kernels of the observations (used when numba is installed): the node, global and
task-table features, the tenant and switching-cost features, and the action mask.

:mod:`core_env.observe` holds the numpy implementation, the reference; these kernels compute
the same IEEE-754 operations in the same order (see :mod:`core_env._dynamics_numba`, the
step's kernels, for the conventions), so they give the same bits;
``tests/core_env/test_dynamics_numba.py`` compares the two backends. Compiled on first use and
cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core_env._jit_options import JitOptions
from core_env._pmath_numba import log1p_scalar

_JIT: JitOptions = {"cache": True, "error_model": "numpy", "boundscheck": False}

# task status codes (core_env.state; repeated as compile-time constants)
QUEUED, SUCCEEDED, EXPIRED = 1, 3, 4


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
