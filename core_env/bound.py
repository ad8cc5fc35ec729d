"""A clairvoyant upper bound on the number of tasks any scheduler can complete in an episode.

The workload of an episode (arrivals, deadlines, caps, scaling exponents, node speeds and every
task's observed-loss path) is a function of the seed alone (SPEC §3), so the least cumulative
work at which a task's *observed* loss reaches its target is known in advance. This module
solves a relaxation of the scheduling problem that every schedule of the simulator
(:mod:`core_env.dynamics`) satisfies, and maximises the number of tasks that receive their
least work w_j. With ``e_j = min(d_j, max_steps)``, N nodes of total speed S, and the
concave envelope h_j of the most work k nodes can give task j in one slot (segments i with
decreasing slopes; ``k**alpha_j`` interpolated between whole k for unit speeds)::

    max  sum_j z_j
    s.t. sum_{t in [a_j, e_j), i} slope_{j,i} n_{j,t,i} >= w_j z_j     every task j
         sum_{j,i} n_{j,t,i}                         <= N           every slot t
         sum_{j,i} slope_{j,i} n_{j,t,i}             <= S           every slot t
         0 <= n_{j,t,i} <= length_{j,i},  z_j in {0, 1}

where sum_i n_{j,t,i} is the (fractional) number of nodes task j gets in slot t and
sum_i slope_{j,i} n_{j,t,i} <= h_j(nodes) its work. ``scaling="linear"`` takes alpha_j = 1 in
the envelope (``k**alpha <= k``: each node adds at most its speed), which is looser.

Solved with SciPy's HiGHS interface (:func:`scipy.optimize.milp`): the LP relaxation first
(always), then the MILP under a node limit (deterministic) and a wall-clock time limit (safety
net). The bound reported is the floor of the smallest valid upper bound found (the MILP's dual
bound, or the LP value); :class:`BoundResult` says which was used and the MILP gap. Why each
relaxed constraint is valid, and where the bound is loose, is in ``docs/bound.md``.

Example::

    from core_env.bound import clairvoyant_bound
    res = clairvoyant_bound("CoRE-v0", seed=0)
    print(res.bound, res.n_tasks, res.method)   # at most res.bound of res.n_tasks can succeed
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import LinearConstraint, milp
from scipy.sparse import coo_matrix

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import first_crossing
from core_env.presets import make_config
from core_env.workload import Workload, generate_workload, validate_workload

LOSS_TOL = 1e-4
"""Slack (log-loss units) added to every target before the least work is computed. The
simulator interpolates the loss in float32; its rounding error is below 1e-5 here, so a task
the simulator declares successful always has an exact loss within this slack of its target."""

WORK_RTOL = 1e-4
"""Relative slack taken off every least work: the simulator accumulates work and computes
gains in float32 (relative error about 1e-5 over an episode), so it may credit a task with
slightly more work than the exact sum of its gains."""

SCALINGS = ("linear", "concave")
"""Work models: ``linear`` uses ``k**alpha <= k`` (the issue's relaxation); ``concave`` the
concave envelope of ``k**alpha`` over whole node counts (tighter, still valid)."""

METHODS = ("milp", "milp_limit", "lp")
"""How the bound was proven: ``milp`` = MILP solved to optimality; ``milp_limit`` = the MILP
hit its node or time limit and its dual bound was the tightest; ``lp`` = the LP relaxation's
value was the tightest (or the MILP gave nothing usable)."""


class BoundResult(NamedTuple):
    """The clairvoyant bound of one episode and how it was obtained."""

    bound: int
    """Upper bound on the number of tasks any schedule completes."""
    n_tasks: int
    """Tasks in the workload (they all arrive, so this is ``info["episode"]["arrived"]``)."""
    candidates: int
    """Tasks that can succeed on their own (finite least work, reachable in their window at
    full parallelism); the others are fixed at ``z_j = 0`` before solving."""
    method: str
    """One of :data:`METHODS`."""
    lp_value: float
    """Optimal value of the LP relaxation (fractional z)."""
    milp_dual: float | None
    """The MILP's proven upper bound (``None`` if the MILP was not run or gave none)."""
    milp_primal: int | None
    """The best integer solution of the relaxation the MILP found (``None`` if none)."""
    milp_gap: float | None
    """``(bound - milp_primal) / bound`` (0 when the MILP closed the gap; ``None`` without a
    MILP solution)."""
    lp_seconds: float
    """Wall-clock seconds of the LP solve."""
    milp_seconds: float
    """Wall-clock seconds of the MILP solve (0 if not run)."""
    scaling: str
    """One of :data:`SCALINGS`."""
    block: int = 1
    """Slots per time block of the relaxation (1: every slot has its own capacity rows;
    larger: the time-aggregated relaxation of large clusters, see :func:`solve_bound`)."""

    @property
    def rate(self) -> float:
        """Bound on the completion rate: ``bound / n_tasks`` (0 for an empty workload)."""
        return self.bound / self.n_tasks if self.n_tasks else 0.0


def required_work(workload: Workload, switch_cost: float = 0.0) -> np.ndarray:
    """Least cumulative work at which each task's observed loss can be at or below its target.

    The observed loss is the piecewise-linear interpolation (in log work) of ``log_loss``,
    flat below the first grid point; the target is compared in float32, as the simulator
    does. Slacks :data:`LOSS_TOL` and :data:`WORK_RTOL` make the result a lower bound on the
    work the simulator needs despite its float32 rounding. When every gain a task can get is
    a whole multiple of one node speed v (all speeds equal, no switching cost, and
    ``alpha_j == 1`` or a cap of one node), the result is rounded up to a multiple of v.

    Args:
        workload: the episode's workload.
        switch_cost: the largest switching cost of a task (rounding needs 0).

    Returns:
        float64[M] least work (0 if any positive work succeeds, inf if the target is never
        reached).
    """
    m = workload.n_tasks
    if m == 0:
        return np.zeros(0)
    target = np.asarray(workload.log_target, dtype=np.float32).astype(np.float64)
    table = np.asarray(workload.log_loss, dtype=np.float32).astype(np.float64)
    level = target + LOSS_TOL
    w = first_crossing(table, level)
    w = np.where(table[:, 0] <= level, 0.0, w)  # flat start below the target: any work
    w = w * (1.0 - WORK_RTOL)
    speeds = np.asarray(workload.speeds, dtype=np.float32).astype(np.float64)
    if switch_cost == 0.0 and speeds.size and np.all(speeds == speeds[0]):
        v = speeds[0]
        alpha32 = np.asarray(workload.alpha, dtype=np.float32)
        whole = (alpha32 == np.float32(1.0)) | (np.minimum(workload.cap, speeds.size) == 1)
        whole &= np.isfinite(w)
        w[whole] = v * np.ceil(w[whole] / v - 1e-9)
    return w


def _gain_segments(speeds_desc: np.ndarray, alpha: float, kmax: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The concave envelope of the most work k nodes give a task in one slot.

    g(k) = (sum of the k fastest speeds) * k**(alpha - 1) for k = 0..kmax (what step 4 of
    the dynamics gives k nodes without switching). Its upper concave envelope h over
    [0, kmax] is piecewise linear with decreasing slopes.

    Returns:
        ``(slopes, lengths)``: float64[S] slope (work per node) and length (nodes) of each
        rising segment, left to right; h(n) = sum_i slope_i * clip(n - start_i, 0, length_i)
        up to the envelope's maximum (with unequal speeds, g can fall: adding a slow node to
        a fast one at alpha < 1 loses work; those segments are dropped, the maximum kept).
    """
    k = np.arange(kmax + 1, dtype=np.float64)
    g = np.concatenate([[0.0], np.cumsum(speeds_desc[:kmax]) * pmath.pow(k[1:], alpha - 1.0)])
    hull: list[int] = []
    for i in range(kmax + 1):  # upper hull, monotone chain from the left
        while len(hull) >= 2:
            i0, i1 = hull[-2], hull[-1]
            if (g[i1] - g[i0]) * (k[i] - k[i0]) <= (g[i] - g[i0]) * (k[i1] - k[i0]):
                hull.pop()
            else:
                break
        hull.append(i)
    h = np.asarray(hull)
    lengths = k[h[1:]] - k[h[:-1]]
    slopes = (g[h[1:]] - g[h[:-1]]) / lengths
    keep = slopes > 0  # past its maximum the envelope falls (a slow extra node): never useful
    return slopes[keep], lengths[keep]


MAX_LP_VARIABLES = 400_000
"""The automatic time block (``block=None``) is the shortest that keeps the LP within this many
variables (about 20 s of HiGHS here); CoRE-v0 needs about 40,000, so it keeps one slot per
block up to a few hundred nodes."""


def solve_bound(workload: Workload, config: CoreConfig, *, scaling: str = "concave",
                time_limit: float = 10.0, node_limit: int = 2000, use_milp: bool = True,
                block: int | None = 1) -> BoundResult:
    """The clairvoyant bound of a given workload (see the module docstring for the model).

    Args:
        workload: the episode's workload (``workload.speeds`` gives the nodes).
        config: the configuration it runs under (uses ``max_steps``, and ``switch_cost``
            where the workload has no costs of its own).
        scaling: ``"linear"`` or ``"concave"`` (:data:`SCALINGS`).
        time_limit: wall-clock seconds allowed to the MILP (a safety net; hitting it makes
            the result depend on the machine, and ``method`` says ``milp_limit`` or ``lp``).
        node_limit: branch-and-bound nodes allowed to the MILP (deterministic).
        use_milp: False = report the LP relaxation only.
        block: slots per time block. With b > 1 the variables are a task's node-slots per
            block of b consecutive slots (at most ``length_i`` times the slots of its window
            in the block) and the capacity rows are per block (N and S times its slots):
            every schedule's per-slot solution sums into a feasible one, so the bound stays
            valid, only looser, with about b times fewer variables. ``None``: the shortest
            block within :data:`MAX_LP_VARIABLES`.

    Returns:
        A :class:`BoundResult`.

    Raises:
        ValueError: unknown scaling, a non-positive limit, or a workload that does not fit
            ``config``.
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling: expected one of {SCALINGS}, got {scaling!r}")
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit: expected a positive number of seconds, got {time_limit!r}")
    if isinstance(node_limit, bool) or not isinstance(node_limit, int) or node_limit < 1:
        raise ValueError(f"node_limit: expected a positive integer, got {node_limit!r}")
    if not isinstance(config, CoreConfig):
        raise ValueError(f"config: expected a CoreConfig, got {type(config).__name__}")
    if block is not None and (isinstance(block, bool) or not isinstance(block, int)
                              or block < 1):
        raise ValueError(f"block: expected None or an integer >= 1, got {block!r}")
    workload = validate_workload(workload, config)
    m = workload.n_tasks
    speeds = np.sort(workload.speeds.astype(np.float32).astype(np.float64))[::-1]
    costs = workload.switch_cost
    w = required_work(workload, float(np.max(costs, initial=0.0)) if costs is not None
                      else config.cluster.switch_cost)
    start = workload.arrival
    length = np.maximum(np.minimum(workload.deadline, config.max_steps) - start, 0)
    kmax = np.minimum(workload.cap, speeds.size)
    alpha = workload.alpha.astype(np.float32).astype(np.float64)
    segs = [_gain_segments(speeds, float(alpha[j]) if scaling == "concave" else 1.0,
                           int(kmax[j])) for j in range(m)]
    per_slot = np.array([float(pmath.rowsum(sl * ln)) for sl, ln in segs])  # most work in one slot
    cand = np.flatnonzero(np.isfinite(w) & (length > 0) & (per_slot * length >= w))
    if cand.size == 0:
        return BoundResult(0, m, 0, "lp", 0.0, None, None, None, 0.0, 0.0, scaling)
    # one variable per (candidate, time block of its window, envelope segment): node-slots
    # used on it (a block is one slot unless ``block`` > 1)
    nz = cand.size
    seg_n = np.array([segs[j][0].size for j in cand])
    first, end = start[cand], start[cand] + length[cand]  # window [first, end)
    t0 = int(first.min())
    if block is None:
        block = 1
        while (((end - 1 - t0) // block - (first - t0) // block + 1) * seg_n).sum() \
                > MAX_LP_VARIABLES:
            block += 1
    b_first, b_last = (first - t0) // block, (end - 1 - t0) // block
    n_blk = b_last - b_first + 1
    per_task = n_blk * seg_n
    v_task = np.repeat(np.arange(nz), per_task)
    blocks = [np.arange(b_first[c], b_last[c] + 1) for c in range(nz)]
    overlap = [np.minimum(end[c], t0 + (blk + 1) * block) - np.maximum(first[c], t0 + blk * block)
               for c, blk in enumerate(blocks)]  # slots of the window in each block
    v_slot = np.concatenate([np.repeat(blk, seg_n[c]) for c, blk in enumerate(blocks)])
    v_slope = np.concatenate([np.tile(segs[j][0], n_blk[c]) for c, j in enumerate(cand)])
    v_len = np.concatenate([np.tile(segs[j][1], n_blk[c]) * np.repeat(overlap[c], seg_n[c])
                            for c, j in enumerate(cand)])
    nv = v_task.size
    col = nz + np.arange(nv)
    n_slots = int(v_slot.max()) + 1  # blocks
    slot_row = v_slot
    horizon = int(end.max())
    block_slots = np.minimum(t0 + (np.arange(n_slots) + 1) * block, horizon) - (
        t0 + np.arange(n_slots) * block)  # slots in each block (the last may be shorter)
    # rows: [0, nz) work of each task; then nodes per block; then speed per block
    rows = np.concatenate([v_task, np.arange(nz), nz + slot_row, nz + n_slots + slot_row])
    cols = np.concatenate([col, np.arange(nz), col, col])
    vals = np.concatenate([v_slope, -w[cand], np.ones(nv), v_slope])
    lb = np.concatenate([np.zeros(nz), np.full(2 * n_slots, -np.inf)])
    ub = np.concatenate([np.full(nz, np.inf), float(speeds.size) * block_slots,
                         float(speeds.sum()) * block_slots])
    a = coo_matrix((vals, (rows, cols)), shape=(nz + 2 * n_slots, nz + nv)).tocsr()
    cons = LinearConstraint(a, lb, ub)
    obj = np.concatenate([-np.ones(nz), np.zeros(nv)])
    bounds = (np.zeros(nz + nv), np.concatenate([np.ones(nz), v_len]))
    tic = time.perf_counter()
    lp = milp(obj, integrality=np.zeros(nz + nv), bounds=bounds, constraints=cons)
    lp_seconds = time.perf_counter() - tic
    if lp.status != 0 or lp.fun is None:
        raise RuntimeError(f"the LP relaxation failed ({lp.message}); please report this "
                           f"workload")
    lp_value = float(-lp.fun)
    best, method = _floor(lp_value), "lp"
    milp_dual = milp_primal = gap = None
    milp_seconds = 0.0
    if use_milp:
        integrality = np.concatenate([np.ones(nz), np.zeros(nv)])
        tic = time.perf_counter()
        res = milp(obj, integrality=integrality, bounds=bounds, constraints=cons,
                   options={"time_limit": float(time_limit), "node_limit": node_limit,
                            "mip_rel_gap": 1e-6})
        milp_seconds = time.perf_counter() - tic
        if res.x is not None:
            milp_primal = int(round(float(-res.fun)))
        dual = getattr(res, "mip_dual_bound", None)
        if dual is not None and math.isfinite(dual):
            milp_dual = float(-dual)
            if _floor(milp_dual) <= best:
                best = _floor(milp_dual)
                method = "milp" if milp_primal == best else "milp_limit"
        if milp_primal is not None:
            gap = (best - milp_primal) / best if best > 0 else 0.0
    return BoundResult(best, m, int(nz), method, lp_value, milp_dual, milp_primal, gap,
                       lp_seconds, milp_seconds, scaling, int(block))


def _floor(value: float) -> int:
    """Floor of an upper bound on an integer count, tolerant of solver round-off."""
    return int(math.floor(value + 1e-6))


def clairvoyant_bound(preset: str | CoreConfig = "CoRE-v0", seed: int = 0, *,
                      scaling: str = "concave", time_limit: float = 10.0, node_limit: int = 2000,
                      use_milp: bool = True, block: int | None = None,
                      **overrides: Any) -> BoundResult:
    """Upper bound on the completions of any scheduler in the episode of ``seed``.

    The workload is drawn exactly as ``CoreSchedulerEnv.reset(seed=seed)`` draws it, so the
    bound applies to every policy run with that seed.

    Args:
        preset: a preset id or a full :class:`CoreConfig`.
        seed: the episode seed.
        scaling, time_limit, node_limit, use_milp, block: see :func:`solve_bound` (here
            ``block=None`` by default: one slot per block unless the LP would be too large).
        **overrides: flat configuration overrides for a preset id (``n_nodes=8``, ...).

    Returns:
        A :class:`BoundResult`.

    Raises:
        ValueError: unknown preset or override, overrides with a full config, bad options.
    """
    if isinstance(preset, CoreConfig):
        if overrides:
            raise ValueError(f"overrides: expected none with a full CoreConfig, got "
                             f"{sorted(overrides)}")
        cfg = preset
    else:
        cfg = make_config(preset, **overrides)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    wl = generate_workload(cfg, np.random.default_rng(int(seed)))
    return solve_bound(wl, cfg, scaling=scaling, time_limit=time_limit, node_limit=node_limit,
                       use_milp=use_milp, block=block)
