"""Frozen, validated configuration of a CoRE scheduling environment.

One :class:`CoreConfig` holds everything an episode depends on, in four sections:
:class:`ClusterConfig` (nodes, visible slots, switching cost), :class:`WorkloadConfig`
(arrivals, tasks, curve families), :class:`RewardConfig` (shaping) and
:class:`EpisodeConfig` (time limit). Every field is checked in ``__post_init__``; a bad
value raises ``ValueError`` naming the field, the value and the allowed range.

Flat keyword overrides (``n_nodes=8, load=1.5``) are resolved by
:meth:`CoreConfig.replace`, which is what ``pettingzoo.make(..., **overrides)`` uses.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core_env.utils.checks import check_int, check_number, fail, is_int


def check_seed(name: str, seed: Any) -> int | None:
    """``seed`` if it is None or a whole number >= 0 (not a bool), else ``ValueError``."""
    if seed is None:
        return None
    if not is_int(seed) or seed < 0:
        fail(name, seed, "None or an integer >= 0")
    return int(seed)


def _canonical(obj: Any, **types: type) -> None:
    """Store validated numpy scalars as plain Python values (frozen dataclass)."""
    for name, typ in types.items():
        object.__setattr__(obj, name, typ(getattr(obj, name)))


def _check_range(name: str, value: Any, lo: float, hi: float, *, lo_open: bool = False) -> None:
    if not (isinstance(value, tuple) and len(value) == 2):
        fail(name, value, f"a (low, high) tuple within [{lo}, {hi}]")
    for v in value:
        check_number(name, v, lo, hi, lo_open=lo_open)
    if value[0] > value[1]:
        fail(name, value, "low <= high")


MAX_SWITCH_COST = 0.95
"""Largest restore cost of a task (a fraction of a node-slot's work): a move always leaves
some progress."""


@dataclass(frozen=True)
class ClusterConfig:
    """The compute nodes (agents) and what they can see."""

    n_nodes: int = 16
    """Number of compute nodes N; each node is one agent ``node_i``. Range [1, 1024]."""

    max_visible_tasks: int = 32
    """Number K of visible task slots; the action of a node is ``Discrete(K + 1)``.
    Range [1, 512]."""

    node_speeds: tuple[float, ...] | None = None
    """Fixed per-node speeds v_i (length ``n_nodes``, each in (0, 4]); ``None`` = all 1.0."""

    speed_choices: tuple[float, ...] | None = None
    """If set (a non-empty tuple of speeds, each in (0, 4]), every node's speed is drawn from
    this list at each reset (heterogeneous cluster, drawn from the episode's RNG). Mutually
    exclusive with ``node_speeds``."""

    switch_cost: float = 0.0
    """Restore cost c in [0, 0.95]: the fraction of a node-slot's work a job loses when it
    trains on a node that does not hold its state (the job moved there, or the node trained
    another job since the job last ran on it). A job that resumes on a node holding its state
    pays nothing, nor does a job's first slot. Each task's own cost is c times its factor
    (``switch_cost_spread``), at most 0.95; it is in the task table. 0 = free switching, as in
    the paper."""

    switch_cost_spread: tuple[float, float] = (1.0, 1.0)
    """Range (low, high), 0 < low <= high <= 20, of a task's cost factor, drawn log-uniformly
    per task (its checkpoint size decides its restore time); (1, 1) gives every task the cost
    c."""

    switch_cost_choices: tuple[float, ...] | None = None
    """If set (a non-empty tuple of costs in [0, 0.95]), each episode's cost c is drawn from
    this list at reset (training over several costs); mutually exclusive with
    ``switch_cost > 0``."""

    def __post_init__(self) -> None:
        check_int("n_nodes", self.n_nodes, 1, 1024)
        check_int("max_visible_tasks", self.max_visible_tasks, 1, 512)
        check_number("switch_cost", self.switch_cost, 0.0, MAX_SWITCH_COST)
        _canonical(self, n_nodes=int, max_visible_tasks=int, switch_cost=float)
        _check_range("switch_cost_spread", self.switch_cost_spread, 0.0, 20.0, lo_open=True)
        object.__setattr__(self, "switch_cost_spread",
                           tuple(float(v) for v in self.switch_cost_spread))
        if self.switch_cost_choices is not None:
            choices = self.switch_cost_choices
            if not isinstance(choices, (tuple, list)) or len(choices) == 0:
                fail("switch_cost_choices", choices, "a non-empty tuple of costs")
            for v in choices:
                check_number("switch_cost_choices", v, 0.0, MAX_SWITCH_COST)
            if self.switch_cost > 0.0:
                fail("switch_cost", self.switch_cost, "0 when switch_cost_choices is set")
            object.__setattr__(self, "switch_cost_choices", tuple(float(v) for v in choices))
        if self.node_speeds is not None and self.speed_choices is not None:
            fail("node_speeds", self.node_speeds, "None when speed_choices is set")
        if self.node_speeds is not None:
            speeds = self.node_speeds
            if not isinstance(speeds, (tuple, list)) or len(speeds) != self.n_nodes:
                fail("node_speeds", speeds, f"a tuple of n_nodes={self.n_nodes} speeds")
            for v in speeds:
                check_number("node_speeds", v, 0.0, 4.0, lo_open=True)
            object.__setattr__(self, "node_speeds", tuple(float(v) for v in speeds))
        if self.speed_choices is not None:
            choices = self.speed_choices
            if not isinstance(choices, (tuple, list)) or len(choices) == 0:
                fail("speed_choices", choices, "a non-empty tuple of speeds")
            for v in choices:
                check_number("speed_choices", v, 0.0, 4.0, lo_open=True)
            object.__setattr__(self, "speed_choices", tuple(float(v) for v in choices))

    @property
    def has_switch_cost(self) -> bool:
        """Whether a switch can cost anything (then every task draws its cost)."""
        return self.switch_cost > 0.0 or (self.switch_cost_choices is not None
                                          and max(self.switch_cost_choices) > 0.0)

    @property
    def max_speed(self) -> float:
        """Largest speed a node can have (normalises the speed feature)."""
        if self.node_speeds is not None:
            return max(self.node_speeds)
        if self.speed_choices is not None:
            return max(self.speed_choices)
        return 1.0


ARRIVAL_PROCESSES = ("poisson", "alibaba-2018")
"""Values of ``WorkloadConfig.arrivals``."""


@dataclass(frozen=True)
class WorkloadConfig:
    """How tasks arrive and what they are."""

    mix: str = "train"
    """Name of the task-family mix (see ``core_env.curves.MIXES``): ``"train"`` is the
    in-distribution mix, ``"held-out"`` uses different family parameters."""

    arrivals: str = "poisson"
    """Arrival process: ``"poisson"`` (independent Poisson counts per slot) or
    ``"alibaba-2018"`` (bursty real job arrivals: a window of the shipped hour of Alibaba's
    2018 cluster trace, 10 s per slot, thinned to ``arrival_rate``; see
    ``core_env.banks.trace_arrivals``)."""

    load: float = 1.0
    """Arrival-rate multiplier: the Poisson rate is ``base_arrival_rate * load``. Range (0, 20]."""

    base_arrival_rate: float = 0.65
    """Mean number of task arrivals per slot at ``load = 1``. Range (0, 64]. The default is
    calibrated so that LARA completes about 57% of CoRE-v0's tasks (the paper's regime)."""

    arrival_slots: int = 200
    """Arrivals happen in slots [0, arrival_slots). Range [1, 100000]."""

    required_work: tuple[float, float] = (4.0, 160.0)
    """Range of a task's required work s* (node-slots at speed 1), drawn log-uniformly;
    its target loss is the hidden curve's value at s*. Within [0.5, 2000]."""

    deadline_slack: tuple[float, float] = (0.6, 3.0)
    """Range of the slack factor f (uniform): the window is ``ceil(f * s* / p**alpha)``
    slots (then clipped to ``window``), so f < 1 typically makes a task infeasible even at
    full parallelism (success depends on the observed, noisy loss). Within (0, 20]."""

    window: tuple[int, int] = (4, 150)
    """Minimum and maximum length of a task's window [arrival, deadline) in slots:
    integers with 1 <= low <= high <= 10000."""

    parallelism_choices: tuple[int, ...] = (1, 2, 4, 8)
    """Maximum parallelism p_j is drawn uniformly from these values (each in [1, 1024])."""

    alpha_range: tuple[float, float] = (0.6, 1.0)
    """Range of the scaling exponent alpha_j (uniform): k nodes add k**alpha work. Within (0, 1]."""

    tenant_shares: tuple[float, ...] = ()
    """Tenants (SPEC §10): G >= 2 shares, each > 0, summing to 1; each task belongs to a
    tenant drawn with these probabilities, and the tenant is in the task table. Empty (the
    default): no tenants."""

    tenant_required_work: tuple[tuple[float, float], ...] = ()
    """Per tenant, the range of its tasks' required work (as ``required_work``); empty: every
    tenant uses ``required_work``."""

    tenant_deadline_slack: tuple[tuple[float, float], ...] = ()
    """Per tenant, the range of its tasks' deadline slack (as ``deadline_slack``); empty:
    ``deadline_slack``."""

    tenant_parallelism: tuple[tuple[int, ...], ...] = ()
    """Per tenant, the caps its tasks draw from (as ``parallelism_choices``); empty:
    ``parallelism_choices``."""

    def __post_init__(self) -> None:
        from core_env.curves import MIXES  # local import: curves imports nothing from here

        if not isinstance(self.mix, str) or self.mix not in MIXES:  # (unhashable: TypeError)
            fail("mix", self.mix, f"one of {sorted(MIXES)}")
        if not isinstance(self.arrivals, str) or self.arrivals not in ARRIVAL_PROCESSES:
            fail("arrivals", self.arrivals, f"one of {list(ARRIVAL_PROCESSES)}")
        check_number("load", self.load, 0.0, 20.0, lo_open=True)
        check_number("base_arrival_rate", self.base_arrival_rate, 0.0, 64.0, lo_open=True)
        check_int("arrival_slots", self.arrival_slots, 1, 100_000)
        _check_range("required_work", self.required_work, 0.5, 2000.0)
        _check_range("deadline_slack", self.deadline_slack, 0.0, 20.0, lo_open=True)
        w = self.window
        if not (isinstance(w, tuple) and len(w) == 2 and all(is_int(v) for v in w)
                and 1 <= w[0] <= w[1] <= 10_000):
            fail("window", w, "an (int, int) tuple with 1 <= low <= high <= 10000")
        pc = self.parallelism_choices
        if not (isinstance(pc, tuple) and len(pc) > 0 and all(
                is_int(v) and 1 <= v <= 1024 for v in pc)):
            fail("parallelism_choices", pc, "a non-empty tuple of integers in [1, 1024]")
        _check_range("alpha_range", self.alpha_range, 0.0, 1.0, lo_open=True)
        self._check_tenants()
        _canonical(self, load=float, base_arrival_rate=float, arrival_slots=int)

    def _check_tenants(self) -> None:
        shares = self.tenant_shares
        if not isinstance(shares, tuple):
            fail("tenant_shares", shares, "a tuple of shares")
        if shares:
            if len(shares) < 2 or len(shares) > 64:
                fail("tenant_shares", shares, "2 to 64 shares (or () for no tenants)")
            for v in shares:
                check_number("tenant_shares", v, 0.0, 1.0, lo_open=True)
            if abs(math.fsum(shares) - 1.0) > 1e-9:
                fail("tenant_shares", shares, f"shares summing to 1 (they sum to "
                     f"{math.fsum(shares):.12g})")
            object.__setattr__(self, "tenant_shares", tuple(float(v) for v in shares))
        for name in ("tenant_required_work", "tenant_deadline_slack", "tenant_parallelism"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or (value and len(value) != len(shares)):
                fail(name, value, f"() or one entry per tenant ({len(shares)} tenants in "
                     f"tenant_shares)")
        for g, r in enumerate(self.tenant_required_work):
            _check_range(f"tenant_required_work[{g}]", r, 0.5, 2000.0)
        for g, r in enumerate(self.tenant_deadline_slack):
            _check_range(f"tenant_deadline_slack[{g}]", r, 0.0, 20.0, lo_open=True)
        for g, pc in enumerate(self.tenant_parallelism):
            if not (isinstance(pc, tuple) and len(pc) > 0 and all(
                    is_int(v) and 1 <= v <= 1024 for v in pc)):
                fail(f"tenant_parallelism[{g}]", pc,
                     "a non-empty tuple of integers in [1, 1024]")

    @property
    def n_tenants(self) -> int:
        """G, the number of tenants (0 without)."""
        return len(self.tenant_shares)

    def tenant_ranges(self) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """Per tenant (a single row without tenants): required-work ranges float64[G, 2],
        slack ranges float64[G, 2] and cap choices (one int64 array per tenant)."""
        g = max(self.n_tenants, 1)
        work = np.asarray(self.tenant_required_work or (self.required_work,) * g, np.float64)
        slack = np.asarray(self.tenant_deadline_slack or (self.deadline_slack,) * g,
                           np.float64)
        caps = tuple(np.asarray(c, dtype=np.int64)
                     for c in (self.tenant_parallelism or (self.parallelism_choices,) * g))
        return work, slack, caps

    @property
    def arrival_rate(self) -> float:
        """Mean arrival rate per slot (tasks/slot), of either arrival process."""
        return self.base_arrival_rate * self.load

    @property
    def max_tasks(self) -> int:
        """Capacity of the per-episode task table: the expected number of arrivals plus
        ten standard deviations (a Poisson count above it has probability < 1e-20; for the
        trace, a bound on the thinned bursts' standard deviation)."""
        mean = self.arrival_rate * self.arrival_slots
        if self.arrivals == "poisson":
            return int(math.ceil(mean + 10.0 * math.sqrt(mean) + 16))
        # thinned bursts of at most b jobs: the count's variance is at most b * mean
        from core_env.banks import trace_max_burst

        return int(math.ceil(mean + 10.0 * math.sqrt(mean * trace_max_burst()) + 16))


@dataclass(frozen=True)
class RewardConfig:
    """The team reward r_t = C_t + beta * (Phi(s_{t+1}) - Phi(s_t))."""

    shaping_beta: float = 1.0
    """Weight beta of the potential-based log-progress shaping; 0 = pure completion count.
    Range [0, 100]."""

    def __post_init__(self) -> None:
        check_number("shaping_beta", self.shaping_beta, 0.0, 100.0)
        _canonical(self, shaping_beta=float)


@dataclass(frozen=True)
class EpisodeConfig:
    """When an episode ends."""

    max_steps: int | None = None
    """Safety-net step limit (truncation). ``None`` = arrival_slots + max window + 1,
    which a normal episode never reaches. Range [1, 1000000]."""

    def __post_init__(self) -> None:
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, 1, 1_000_000)
            _canonical(self, max_steps=int)


@dataclass(frozen=True)
class CoreConfig:
    """Complete configuration of a CoRE environment (all sections)."""

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    """Nodes, visible slots, speeds and switching cost."""

    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    """Arrivals, task parameters and curve families."""

    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward shaping."""

    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    """Episode limits."""

    def __post_init__(self) -> None:
        for name, cls in (("cluster", ClusterConfig), ("workload", WorkloadConfig),
                          ("reward", RewardConfig), ("episode", EpisodeConfig)):
            if not isinstance(getattr(self, name), cls):
                fail(name, getattr(self, name), f"a {cls.__name__}")

    @property
    def max_steps(self) -> int:
        """The effective step limit (``episode.max_steps`` or its default)."""
        if self.episode.max_steps is not None:
            return self.episode.max_steps
        return self.workload.arrival_slots + self.workload.window[1] + 1

    def replace(self, **overrides: Any) -> CoreConfig:
        """Return a copy with flat field overrides, e.g. ``cfg.replace(n_nodes=8, load=2.0)``.

        Each key must name a field of exactly one section (or a whole section). Unknown keys
        raise ``ValueError`` listing the accepted names.
        """
        sections = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        changes: dict[str, dict[str, Any]] = {name: {} for name in sections}
        whole: dict[str, Any] = {}
        for key, value in overrides.items():
            if key in sections:
                whole[key] = value
                continue
            owner = [name for name, sec in sections.items()
                     if key in {f.name for f in dataclasses.fields(sec)}]
            if not owner:
                raise ValueError(f"unknown configuration override {key!r}; expected one of "
                                 f"{sorted(override_names())}")
            if isinstance(value, list):
                value = tuple(value)
            changes[owner[0]][key] = value
        new_sections = {}
        for name, sec in sections.items():
            base = whole.get(name, sec)
            new_sections[name] = (dataclasses.replace(base, **changes[name]) if changes[name]
                                  else base)
        return CoreConfig(**new_sections)


def override_names() -> set[str]:
    """All flat field names accepted by :meth:`CoreConfig.replace`."""
    names = {f.name for f in dataclasses.fields(CoreConfig)}
    for cls in (ClusterConfig, WorkloadConfig, RewardConfig, EpisodeConfig):
        names |= {f.name for f in dataclasses.fields(cls)}
    return names
