"""Workload generation: one episode's arrivals, tasks, curves and noise paths.

The workload is a pure function of the configuration and the episode's generator, never of
the actions taken, so every policy faces exactly the same tasks (and the same noise paths)
for a given seed. :func:`generate_workload` draws it; :func:`validate_workload` checks a
user-supplied one (e.g. a hand-made instance passed to ``reset(options={"workload": w})``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from core_env import pmath
from core_env.banks import trace_arrivals
from core_env.config import MAX_SWITCH_COST, CoreConfig
from core_env.curves import (
    FAMILIES,
    GRID_SIZE,
    curve_params,
    draw_curve_randomness,
    evaluate_curves,
    first_crossing,
)
from core_env.utils.checks import check_number


class Workload(NamedTuple):
    """Everything an episode will throw at the scheduler. M = number of tasks, G = grid size.

    Tasks are sorted by arrival slot (ties keep their order), which is the FIFO order of the
    queue.
    """

    arrival: np.ndarray  # int64[M], slot the task arrives in
    deadline: np.ndarray  # int64[M], first slot it may no longer train in (> arrival)
    log_target: np.ndarray  # float64[M], ln eps_j
    cap: np.ndarray  # int64[M], maximum parallelism p_j (>= 1)
    alpha: np.ndarray  # float64[M], scaling exponent in (0, 1]
    family: np.ndarray  # int8[M], index into core_env.curves.FAMILIES
    log_loss: np.ndarray  # float32[M, G], observed log-loss path on LOG_WORK_GRID
    true_log_loss: np.ndarray  # float32[M, G], hidden noise-free curve on LOG_WORK_GRID
    speeds: np.ndarray  # float64[N], node speeds for this episode
    switch_cost: np.ndarray | None = None  # float64[M], restore cost c_j (None: the config's)
    episode_switch_cost: float | None = None  # the episode's cost c (None: the config's)
    tenant: np.ndarray | None = None  # int8[M], each task's tenant (None: no tenants)

    @property
    def n_tasks(self) -> int:
        return int(self.arrival.shape[0])

    @property
    def required_work(self) -> np.ndarray:
        """float64[M]: s*_j, least work at which the hidden curve reaches the target."""
        return first_crossing(self.true_log_loss, self.log_target)

    @property
    def required_observed_work(self) -> np.ndarray:
        """float64[M]: least work at which the *observed* loss reaches the target (what
        success actually needs; inf if the noise path never gets there)."""
        return first_crossing(self.log_loss, self.log_target)


def node_speeds(cfg: CoreConfig, rng: np.random.Generator) -> np.ndarray:
    """float64[N] node speeds for one episode (draws from ``rng`` only for ``speed_choices``)."""
    c = cfg.cluster
    if c.node_speeds is not None:
        return np.asarray(c.node_speeds, dtype=np.float64)
    if c.speed_choices is not None:
        return rng.choice(np.asarray(c.speed_choices, dtype=np.float64), size=c.n_nodes)
    return np.ones(c.n_nodes)


class _Draw(NamedTuple):
    """The random part of one workload, before its curves are tabulated."""

    arrival: np.ndarray
    deadline: np.ndarray
    cap: np.ndarray
    alpha: np.ndarray
    speeds: np.ndarray
    s_star: np.ndarray  # the curves' draws (core_env.curves.draw_curve_randomness) and s*
    curve_uniforms: np.ndarray
    curve_knots: np.ndarray
    curve_white: np.ndarray
    switch_cost: np.ndarray
    episode_switch_cost: float
    tenant: np.ndarray | None = None


def switch_costs(cfg: CoreConfig, n_tasks: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, float]:
    """Each task's restore cost and the episode's cost c (SPEC §9): c is ``switch_cost`` or
    drawn from ``switch_cost_choices``; a task's cost is c times a factor drawn log-uniformly
    from ``switch_cost_spread`` (none drawn when the spread is one value), at most
    :data:`~core_env.config.MAX_SWITCH_COST`. Draws nothing without a switching cost, so the
    rest of a workload is the same with and without one."""
    c = cfg.cluster
    if not c.has_switch_cost:
        return np.zeros(n_tasks), 0.0
    scale = c.switch_cost
    if c.switch_cost_choices is not None:
        scale = float(rng.choice(np.asarray(c.switch_cost_choices, dtype=np.float64)))
    lo, hi = c.switch_cost_spread
    if lo == hi:
        factor = np.full(n_tasks, lo)
    else:
        log_lo, log_hi = pmath.log(np.array([lo, hi]))
        factor = pmath.exp(log_lo + (log_hi - log_lo) * rng.random(n_tasks))
    return np.minimum(scale * factor, MAX_SWITCH_COST), scale


def draw_arrivals(cfg: CoreConfig, rng: np.random.Generator) -> np.ndarray:
    """int64[M] arrival slots of one episode, sorted (Poisson counts per slot, or the
    trace's window and thinning)."""
    w = cfg.workload
    if w.arrivals == "poisson":
        counts = rng.poisson(w.arrival_rate, size=w.arrival_slots)
        arrival = np.repeat(np.arange(w.arrival_slots, dtype=np.int64), counts)
    else:
        arrival = trace_arrivals(rng, w.arrival_rate, w.arrival_slots)
    m = int(arrival.shape[0])
    if m > w.max_tasks:  # probability < 1e-20 by construction of max_tasks
        raise RuntimeError(f"{m} arrivals exceed the task table capacity {w.max_tasks}")
    return arrival


def draw_tasks(cfg: CoreConfig, u: np.ndarray, tenant: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each task's required work s* (log-uniform), parallelism cap and deadline slack from
    uniforms ``u[:, 0]``, ``u[:, 1]`` and ``u[:, 3]`` (``u[:, 2]`` is the scaling exponent's),
    from its tenant's ranges where ``tenant`` (int[M]) is given.

    Returns:
        ``(s_star, cap, slack)``.
    """
    w = cfg.workload
    if tenant is None:
        lo, hi = pmath.log(w.required_work[0]), pmath.log(w.required_work[1])
        s_star = pmath.exp(lo + (hi - lo) * u[:, 0])
        choices = np.asarray(w.parallelism_choices, dtype=np.int64)
        cap = choices[(u[:, 1] * len(choices)).astype(np.int64)]
        slack = w.deadline_slack[0] + (w.deadline_slack[1] - w.deadline_slack[0]) * u[:, 3]
        return s_star, cap, slack
    work, slack_range, caps = w.tenant_ranges()
    log_work = pmath.log(work)
    lo, hi = log_work[tenant, 0], log_work[tenant, 1]
    s_star = pmath.exp(lo + (hi - lo) * u[:, 0])
    cap = np.zeros(tenant.shape[0], dtype=np.int64)
    for g, choices in enumerate(caps):
        mine = tenant == g
        cap[mine] = choices[(u[mine, 1] * len(choices)).astype(np.int64)]
    s_lo, s_hi = slack_range[tenant, 0], slack_range[tenant, 1]
    slack = s_lo + (s_hi - s_lo) * u[:, 3]
    return s_star, cap, slack


def draw_tenants(cfg: CoreConfig, n_tasks: int, rng: np.random.Generator
                 ) -> np.ndarray | None:
    """int8[M] each task's tenant, drawn with the tenants' shares (one uniform per task); None
    (and nothing drawn) without tenants."""
    shares = cfg.workload.tenant_shares
    if not shares:
        return None
    edges = np.cumsum(np.asarray(shares, dtype=np.float64))[:-1]
    return np.searchsorted(edges, rng.random(n_tasks), side="right").astype(np.int8)


def deadline_windows(cfg: CoreConfig, s_star: np.ndarray, cap: np.ndarray, alpha: np.ndarray,
                     slack: np.ndarray) -> np.ndarray:
    """int64[M] slots from arrival to deadline: slack times the slots s* takes at the
    task's full (cluster-capped) parallelism, clipped to the configured window."""
    eff_cap = np.minimum(cap, cfg.cluster.n_nodes)
    window = np.ceil(slack * s_star / pmath.pow(eff_cap, alpha)).astype(np.int64)
    return np.clip(window, cfg.workload.window[0], cfg.workload.window[1])


def _draw(cfg: CoreConfig, rng: np.random.Generator) -> _Draw:
    w = cfg.workload
    speeds = node_speeds(cfg, rng)
    arrival = draw_arrivals(cfg, rng)
    u = rng.random((arrival.shape[0], 4))
    tenant = draw_tenants(cfg, arrival.shape[0], rng)
    s_star, cap, slack = draw_tasks(cfg, u, tenant)
    alpha = w.alpha_range[0] + (w.alpha_range[1] - w.alpha_range[0]) * u[:, 2]
    window = deadline_windows(cfg, s_star, cap, alpha, slack)
    u_curves, knots, white = draw_curve_randomness(rng, arrival.shape[0])
    cost, scale = switch_costs(cfg, arrival.shape[0], rng)
    return _Draw(arrival=arrival, deadline=arrival + window, cap=cap, alpha=alpha,
                 speeds=speeds, s_star=s_star, curve_uniforms=u_curves, curve_knots=knots,
                 curve_white=white, switch_cost=cost, episode_switch_cost=scale,
                 tenant=tenant)


def generate_workloads(cfg: CoreConfig, rngs: Sequence[np.random.Generator]) -> list[Workload]:
    """One workload per generator, drawn in order from each, with all curves computed and
    tabulated in a single vectorised pass over every task (what the batched simulator uses to
    reset many environments).

    Identical to ``[generate_workload(cfg, rng) for rng in rngs]``.
    """
    draws = [_draw(cfg, rng) for rng in rngs]
    if not draws:
        return []
    mix = cfg.workload.mix
    params = curve_params(mix, np.concatenate([d.s_star for d in draws]),
                          np.concatenate([d.curve_uniforms for d in draws]),
                          np.concatenate([d.curve_knots for d in draws]),
                          np.concatenate([d.curve_white for d in draws]))
    family, true_ll, obs_ll, log_target = evaluate_curves(params, mix)
    out, start = [], 0
    for d in draws:
        sl = slice(start, start + d.arrival.shape[0])
        start = sl.stop
        out.append(Workload(arrival=d.arrival, deadline=d.deadline, log_target=log_target[sl],
                            cap=d.cap, alpha=d.alpha, family=family[sl], log_loss=obs_ll[sl],
                            true_log_loss=true_ll[sl], speeds=d.speeds,
                            switch_cost=d.switch_cost,
                            episode_switch_cost=d.episode_switch_cost, tenant=d.tenant))
    return out


def generate_workload(cfg: CoreConfig, rng: np.random.Generator) -> Workload:
    """Draw one episode's workload (SPEC §3, §6).

    Order of draws: node speeds, arrivals (Poisson counts per slot, or the trace's window
    and thinning), then one block of uniforms
    giving each task's required work s* (log-uniform), parallelism cap, scaling exponent and
    deadline slack, the curve parameters and noise paths
    (:func:`core_env.curves.draw_curve_params`), and last the switching costs
    (:func:`switch_costs`; nothing without a switching cost).
    """
    return generate_workloads(cfg, [rng])[0]


LOG_LOSS_LIMIT = 700.0
"""Largest magnitude of a log-loss or log-target a workload may hold: the natural log of any
positive float64 loss lies within it (and it fits float32 exactly enough)."""


def validate_workload(wl: Workload, cfg: CoreConfig) -> Workload:
    """Check a user-supplied workload against ``cfg``; return it with canonical dtypes.

    Every value is checked against limits derived from the configuration before it is
    converted to the simulator's dtypes, and the conversion is checked too, so no value
    can overflow, wrap or round into something else (a cap of 1e30 wrapping to INT64_MIN, a
    log-loss of 1e300 becoming inf in float32).

    Raises:
        ValueError: naming the field and the first offending task.
    """
    if not isinstance(wl, Workload):
        raise ValueError(f"workload: expected a core_env.Workload, got {type(wl).__name__}")
    m = np.asarray(wl.arrival).shape[0] if np.ndim(wl.arrival) == 1 else -1
    if m < 0:
        raise ValueError("workload.arrival: expected a 1-D array")
    if m > cfg.workload.max_tasks:
        raise ValueError(f"workload: expected at most max_tasks={cfg.workload.max_tasks} "
                         f"tasks, got {m}")
    shapes = {"arrival": (m,), "deadline": (m,), "log_target": (m,), "cap": (m,),
              "alpha": (m,), "family": (m,), "log_loss": (m, GRID_SIZE),
              "true_log_loss": (m, GRID_SIZE), "speeds": (cfg.cluster.n_nodes,)}
    out = {}
    for name, shape in shapes.items():
        arr = np.asarray(getattr(wl, name))
        if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer)
                                         or np.issubdtype(arr.dtype, np.floating)):
            raise ValueError(f"workload.{name}: expected a real numeric array, got dtype "
                             f"{arr.dtype}")
        if arr.shape != shape:
            raise ValueError(f"workload.{name}: expected shape {shape}, got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            bad = int(np.argwhere(~np.isfinite(arr))[0][0])
            raise ValueError(f"workload.{name}: non-finite value at task/node {bad}")
        out[name] = arr

    w = cfg.workload
    cap_max = max(cfg.cluster.n_nodes, max(w.parallelism_choices),
                  *(max(c) for c in w.tenant_parallelism))
    arrival = out["arrival"]
    checks = [
        ("arrival", (arrival < 0) | (arrival >= w.arrival_slots),
         f"integer slots in [0, arrival_slots={w.arrival_slots})"),
        ("arrival", np.r_[False, np.diff(arrival) < 0], "non-decreasing arrival slots"),
        ("deadline", (out["deadline"] <= arrival)
         | (out["deadline"] - arrival > w.window[1]),
         f"deadline - arrival in [1, window[1]={w.window[1]}]"),
        ("cap", (out["cap"] < 1) | (out["cap"] > cap_max),
         f"a parallelism cap in [1, {cap_max}] (the larger of n_nodes and the largest "
         f"parallelism choice)"),
        ("alpha", (out["alpha"] <= 0) | (out["alpha"] > 1), "alpha in (0, 1]"),
        ("family", (out["family"] < 0) | (out["family"] >= len(FAMILIES)),
         f"a family index in [0, {len(FAMILIES)}) (core_env.curves.FAMILIES)"),
        ("speeds", (out["speeds"] <= 0) | (out["speeds"] > cfg.cluster.max_speed),
         f"node speeds in (0, max_speed={cfg.cluster.max_speed}] (set node_speeds or "
         f"speed_choices in the config for faster nodes)"),
    ]
    costs = wl.switch_cost
    if costs is None:
        costs = np.full(m, cfg.cluster.switch_cost)
    costs = np.asarray(costs)
    if not (np.issubdtype(costs.dtype, np.integer) or np.issubdtype(costs.dtype, np.floating)) \
            or costs.shape != (m,) or not np.all(np.isfinite(costs)):
        raise ValueError(f"workload.switch_cost: expected None or {m} finite restore costs, "
                         f"got {costs!r}")
    out["switch_cost"] = costs
    checks.append(("switch_cost", (costs < 0) | (costs > MAX_SWITCH_COST),
                   f"restore costs in [0, {MAX_SWITCH_COST}]"))
    scale = cfg.cluster.switch_cost if wl.episode_switch_cost is None else wl.episode_switch_cost
    if isinstance(scale, np.ndarray) and scale.ndim == 0:  # as a record file stores it
        scale = scale.item()
    check_number("workload.episode_switch_cost", scale, 0.0, MAX_SWITCH_COST)
    tenant = wl.tenant
    if tenant is not None or w.n_tenants:
        if tenant is None or w.n_tenants == 0:
            raise ValueError(f"workload.tenant: expected one tenant per task with the "
                             f"config's {w.n_tenants} tenants (and None without), got "
                             f"{'None' if tenant is None else 'tenants'}")
        tenant = np.asarray(tenant)
        if not np.issubdtype(tenant.dtype, np.integer) or tenant.shape != (m,):
            raise ValueError(f"workload.tenant: expected {m} integer tenant indices, got "
                             f"{tenant!r}")
        checks.append(("tenant", (tenant < 0) | (tenant >= w.n_tenants),
                       f"tenant indices in [0, {w.n_tenants})"))
        out["tenant"] = tenant
    for name in ("log_target", "log_loss", "true_log_loss"):
        checks.append((name, np.abs(out[name]) > LOG_LOSS_LIMIT,
                       f"log-losses in [-{LOG_LOSS_LIMIT:g}, {LOG_LOSS_LIMIT:g}]"))
    for name, bad, allowed in checks:
        if np.any(bad):
            i = np.argwhere(bad)[0]
            raise ValueError(f"workload.{name}[{', '.join(map(str, i))}]: expected {allowed}, "
                             f"got {out[name][tuple(i)]!r}")
    for name in ("arrival", "deadline", "cap", "family"):
        if not np.all(out[name] == np.round(out[name])):
            raise ValueError(f"workload.{name}: expected integers")
    canonical = Workload(
        arrival=arrival.astype(np.int64), deadline=out["deadline"].astype(np.int64),
        log_target=out["log_target"].astype(np.float64), cap=out["cap"].astype(np.int64),
        alpha=out["alpha"].astype(np.float64), family=out["family"].astype(np.int8),
        log_loss=out["log_loss"].astype(np.float32),
        true_log_loss=out["true_log_loss"].astype(np.float32),
        speeds=out["speeds"].astype(np.float64),
        switch_cost=out["switch_cost"].astype(np.float64), episode_switch_cost=float(scale),
        tenant=None if tenant is None else tenant.astype(np.int8))
    # the simulator stores alpha and speeds as float32: they must stay positive there
    for name in ("alpha", "speeds"):
        if np.any(getattr(canonical, name).astype(np.float32) <= 0):
            i = int(np.flatnonzero(getattr(canonical, name).astype(np.float32) <= 0)[0])
            raise ValueError(f"workload.{name}[{i}]: {out[name][i]!r} rounds to 0 in "
                             f"float32; expected a value the simulator can store")
    for name in ("arrival", "deadline", "cap", "family"):
        if not np.array_equal(getattr(canonical, name), out[name]):
            raise ValueError(f"workload.{name}: a value does not survive the conversion to "
                             f"{getattr(canonical, name).dtype}")
    return canonical
