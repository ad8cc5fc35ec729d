"""Shared machinery of the centralised baselines: decoding observations, tracking tasks,
filling caps and mapping node counts to nodes.

Every baseline decides all N nodes' actions at once from the observation dict, so it can
respect the parallelism caps exactly (no masked action, no capacity conflict). The pieces:

* :class:`ObservationDecoder` turns the normalised features into absolute quantities
  (slots, node-slots of work, whole nodes) using the environment's configuration and the
  named layout; :class:`ClusterView` is the result.
* :class:`~mara_agents.baselines.tracking.SlotTracker` (re-exported here) follows each
  visible task: its observations, attained service, waiting time and loss history.
* :func:`fill_by_priority` gives nodes to tasks in priority order, each up to its cap.
* :func:`assign_nodes` turns per-slot node counts into node actions, keeping nodes on the
  task they trained last slot (and, where switching costs, on the task whose state they
  hold); it and the ``stickiness`` knob live in :mod:`~mara_agents.baselines.placement`.
* :class:`CentralPolicy` is the thin base class: decode, decide, :meth:`~CentralPolicy.place`
  (stickiness, then :func:`assign_nodes`), encode.

Decoding (``w`` = ``config.workload.window[1]``, the longest window; ``T`` =
``config.max_steps``; ``W`` = ``core_env.curves.WORK_MAX``; ``v_max`` =
``config.cluster.max_speed``; N nodes, K slots):

==================  =================================================================
quantity            decoded from
==================  =================================================================
t                   ``rint(time * T)`` (global ``time`` = t / T)
time left           ``rint(time_to_deadline * w)`` = d_j - t, slots the task may still
                    train in (exact: a visible task's window is at most w)
arrival             ``t - rint(age * w)`` (exact: t - a_j < d_j - a_j <= w)
cap                 ``layout.capacity`` = ``rint(cap * N)`` = min(p_j, N)
alpha               ``alpha`` (stored as is)
work done           ``expm1(log_work * ln(1 + W))`` node-slots (0 = never trained)
log gap             ``4 * loss_gap`` = ln(observed loss / target) (0 before the first
                    observation; the clip at +-4 is never reached on the shipped presets)
nodes last slot     ``rint(nodes_last * N)``
node speed          ``speed * v_max`` (from each node's own observation)
node's last slot    ``rint(last_slot * K) - 1`` (-1 = idle or its task left)
node's held slot    ``rint(held_slot * K) - 1`` (-1 = none, or its task left; -1 for
                    every node in a layout without the feature)
restore cost c_j    ``switch_cost`` (1 for present tasks in a layout without the column)
episode cost c      ``episode_switch_cost`` (0 in a layout without the feature)
achievable work     ``cap**alpha * mean speed * time left`` (what the wrapper normalises by)
remaining (fc_*)    ``fc * 2 * achievable`` when fc < 1; fc = 1 means "clipped: at least
                    2 x achievable", reported as that lower bound with ``censored`` set
==================  =================================================================
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import WORK_MAX
from core_env.layout import Layout
from mara_agents.baselines.placement import assign_nodes, check_stickiness, sticky_counts  # noqa: F401
from mara_agents.baselines.tracking import SlotTracker  # noqa: F401 (re-exported)

FORECAST_COLUMNS = ("fc_mean", "fc_q10", "fc_q50", "fc_q90")


def check_forecast_column(column: str) -> str:
    """Return ``column`` if it names a remaining-work forecast column, else raise ValueError."""
    if column not in FORECAST_COLUMNS:
        raise ValueError(f"column: expected one of {FORECAST_COLUMNS}, got {column!r}")
    return column
"""Forecast columns that hold a normalised remaining work (see
:mod:`core_env.forecast.wrapper`)."""

_LOG_WORK_SCALE = float(pmath.log1p(WORK_MAX))


class ClusterView(NamedTuple):
    """What a centralised baseline knows at one slot, in absolute units. K slots, N nodes.

    Attributes:
        t: current slot.
        present: bool[K], the slot holds a task.
        time_left: int64[K], d_j - t: slots the task may still train in (0 if empty).
        arrival: int64[K], arrival slot a_j (0 if empty).
        deadline: int64[K], deadline d_j (0 if empty).
        cap: int64[K], min(p_j, N) (0 if empty).
        alpha: float64[K], scaling exponent.
        work: float64[K], cumulative work done (node-slots of speed 1).
        log_gap: float64[K], ln(latest observed loss / target) (0 before the first
            observation and for empty slots; below 0 once the target is reached).
        nodes_last: int64[K], nodes that trained the task last slot.
        speeds: float64[N], node speeds.
        last_slot: int64[N], slot each node trained last slot if that task is still
            visible there, else -1.
        masks: int8[N, K + 1], each node's action mask.
        table: float32[K, F], the raw task table (node 0's observation).
        held_slot: int64[N], slot of the task whose state each node holds if that task is
            still visible, else -1.
        switch_cost: float64[K], each task's restore cost c_j (0 if empty).
        episode_switch_cost: the episode's cost c (0 = free switching).
    """

    t: int
    present: np.ndarray
    time_left: np.ndarray
    arrival: np.ndarray
    deadline: np.ndarray
    cap: np.ndarray
    alpha: np.ndarray
    work: np.ndarray
    log_gap: np.ndarray
    nodes_last: np.ndarray
    speeds: np.ndarray
    last_slot: np.ndarray
    masks: np.ndarray
    table: np.ndarray
    held_slot: np.ndarray
    switch_cost: np.ndarray
    episode_switch_cost: float

    @property
    def n_nodes(self) -> int:
        return int(self.speeds.shape[0])

    @property
    def n_slots(self) -> int:
        return int(self.present.shape[0])

    @property
    def mean_speed(self) -> float:
        return float(self.speeds.mean())

    def rate(self, nodes: np.ndarray | float) -> np.ndarray:
        """float64[K] work per slot of each task on ``nodes`` nodes of mean speed:
        ``nodes**alpha * mean_speed`` (0 where ``nodes`` is 0)."""
        k = np.maximum(np.asarray(nodes, dtype=np.float64), 0.0)
        return pmath.pow(k, self.alpha) * self.mean_speed  # 0 where k = 0

    @property
    def achievable(self) -> np.ndarray:
        """float64[K] work a task can still receive at full cap: ``cap**alpha * mean_speed
        * time_left`` (the forecast wrapper's normaliser; 0 for empty slots)."""
        return self.rate(self.cap) * self.time_left


class ObservationDecoder:
    """Decodes observation dicts of one environment into :class:`ClusterView` s.

    Args:
        layout: the observation layout the policy will receive (``env.layout``; a forecast
            wrapper's layout includes its columns).
        config: the environment's configuration (``env.unwrapped.config``).
        agents: the node names in index order (``env.possible_agents``).
    """

    def __init__(self, layout: Layout, config: CoreConfig, agents: list[str]) -> None:
        if len(agents) != config.cluster.n_nodes or layout.n_nodes != config.cluster.n_nodes:
            raise ValueError(f"agents: expected {config.cluster.n_nodes} node names matching "
                             f"the configuration, got {len(agents)}")
        self.layout = layout
        self.config = config
        self.agents = list(agents)
        self.window = float(config.workload.window[1])
        self.max_steps = float(config.max_steps)
        self.max_speed = float(config.cluster.max_speed)
        names = {f.name for f in layout.task_features}
        self.has_forecast = all(c in names for c in FORECAST_COLUMNS)
        self._col = {f.name: layout.task_column(f.name) for f in layout.task_features}
        known = {f.name for f in layout.global_features + layout.node_features}
        self.has_switch_features = {"held_slot", "episode_switch_cost"} <= known and \
            "switch_cost" in names

    @classmethod
    def from_env(cls, env: Any) -> ObservationDecoder:
        """The decoder of a (possibly wrapped) environment."""
        return cls(env.layout, env.unwrapped.config, list(env.possible_agents))

    def stack(self, observations: dict[str, dict[str, np.ndarray]]
              ) -> tuple[np.ndarray, np.ndarray]:
        """(float32[N, D], int8[N, K + 1]) from an observation dict, in node order.

        Raises:
            ValueError: a node is missing or an array has the wrong shape.
        """
        if not isinstance(observations, dict):
            raise ValueError(f"observations: expected a dict agent -> observation, got "
                             f"{type(observations).__name__}")
        missing = [a for a in self.agents if a not in observations]
        if missing:
            raise ValueError(f"observations: missing nodes {missing} (a centralised baseline "
                             f"needs every node's observation)")
        k = self.layout.n_slots
        obs, masks = [], []
        for a in self.agents:
            o = np.asarray(observations[a]["observation"])
            m = np.asarray(observations[a]["action_mask"])
            if o.shape != (self.layout.size,):
                raise ValueError(f"observation of {a}: expected shape ({self.layout.size},), "
                                 f"got {o.shape} (is the policy built for this env/wrapper?)")
            if m.shape != (k + 1,):
                raise ValueError(f"action_mask of {a}: expected shape ({k + 1},), got {m.shape}")
            obs.append(o)
            masks.append(m)
        return np.stack(obs), np.stack(masks).astype(np.int8)

    def decode(self, observations: dict[str, dict[str, np.ndarray]]) -> ClusterView:
        """Decode an observation dict (see the module docstring for every formula)."""
        obs, masks = self.stack(observations)
        lay, n = self.layout, len(self.agents)
        k = lay.n_slots
        head = obs[0]
        table = lay.task_table(head)
        col = self._col
        present = table[:, col["present"]] > 0.5
        t = int(np.rint(float(head[lay.index("time")]) * self.max_steps))
        left = np.rint(table[:, col["time_to_deadline"]] * self.window).astype(np.int64)
        age = np.rint(table[:, col["age"]] * self.window).astype(np.int64)
        work = pmath.expm1(table[:, col["log_work"]].astype(np.float64) * _LOG_WORK_SCALE)
        speeds = obs[:, lay.index("speed")].astype(np.float64) * self.max_speed
        last = np.rint(obs[:, lay.index("last_slot")] * k).astype(np.int64) - 1
        if self.has_switch_features:
            held = np.rint(obs[:, lay.index("held_slot")] * k).astype(np.int64) - 1
            cost = np.where(present, table[:, col["switch_cost"]].astype(np.float64), 0.0)
            episode_cost = float(head[lay.index("episode_switch_cost")])
        else:
            held, cost, episode_cost = np.full(n, -1, dtype=np.int64), present * 1.0, 0.0
        return ClusterView(
            t=t, present=present,
            time_left=np.where(present, left, 0),
            arrival=np.where(present, t - age, 0),
            deadline=np.where(present, t + left, 0),
            cap=np.where(present, lay.capacity(head), 0),
            alpha=np.where(present, table[:, col["alpha"]].astype(np.float64), 1.0),
            work=np.where(present, work, 0.0),
            log_gap=np.where(present, 4.0 * table[:, col["loss_gap"]].astype(np.float64), 0.0),
            nodes_last=np.where(present, np.rint(table[:, col["nodes_last"]] * n), 0
                                ).astype(np.int64),
            speeds=speeds, last_slot=last, masks=masks, table=table, held_slot=held,
            switch_cost=cost, episode_switch_cost=episode_cost)

    def remaining(self, view: ClusterView, column: str = "fc_q50"
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Forecast remaining work (node-slots of speed 1) from a forecast column.

        ``fc = min(R / achievable, 2) / 2``, so ``R = fc * 2 * achievable`` while fc < 1;
        at fc = 1 the forecast was clipped and only ``R >= 2 * achievable`` is known.

        Args:
            view: the decoded view.
            column: one of ``fc_mean``, ``fc_q10``, ``fc_q50``, ``fc_q90``.

        Returns:
            ``(remaining, censored)``: float64[K] (the lower bound where censored, 0 for
            empty slots) and bool[K].

        Raises:
            ValueError: the layout has no forecast columns, or ``column`` is not one.
        """
        if not self.has_forecast:
            raise ValueError("this policy reads forecast columns: wrap the environment in "
                             "core_env.forecast.LossForecastWrapper (see make_policy)")
        check_forecast_column(column)
        fc = view.table[:, self._col[column]].astype(np.float64)
        censored = view.present & (fc >= 1.0 - 1e-6)
        return np.where(view.present, fc * 2.0 * view.achievable, 0.0), censored


def fill_by_priority(order: np.ndarray, caps: np.ndarray, total: int) -> np.ndarray:
    """Nodes per slot when tasks are served in ``order``, each up to its cap.

    Args:
        order: int[M] slot indices, highest priority first (a subset of 0..K-1).
        caps: int[K] caps (whole nodes).
        total: nodes available.

    Returns:
        int64[K] node counts; ``sum = min(total, caps[order].sum())``.

    Raises:
        ValueError: ``total`` is negative or ``order`` repeats a slot.
    """
    if total < 0:
        raise ValueError(f"total: expected a number of nodes >= 0, got {total}")
    order = np.asarray(order, dtype=np.int64)
    if np.unique(order).size != order.size:
        raise ValueError(f"order: expected distinct slot indices, got {order.tolist()}")
    caps = np.asarray(caps, dtype=np.int64)
    counts = np.zeros(caps.shape[0], dtype=np.int64)
    left = int(total)
    for j in order:
        if left <= 0:
            break
        give = min(int(caps[j]), left)
        counts[j] = give
        left -= give
    return counts


class CentralPolicy:
    """Base class of the baselines: decode the observations, :meth:`decide`, encode.

    Subclasses implement :meth:`decide` (``ClusterView -> int64[N] actions``), usually by
    deciding node counts per task and returning :meth:`place` of them, and, if they keep
    state across slots, :meth:`reset_state`. Randomness comes only from ``self.rng``, a
    ``numpy.random.Generator`` created in :meth:`reset` (called with no seed, i.e. fresh OS
    entropy, if :meth:`act` comes first).

    Args:
        env: the (possibly wrapped) environment the policy will act in; its layout,
            configuration and agent names are read once here.
        stickiness: the hysteresis on taking nodes from a task (>= 0; 0, the default: off):
            a task that trained last slot keeps its nodes unless its relative shrink
            exceeds ``stickiness * c_j`` (see :mod:`~mara_agents.baselines.placement`).

    Raises:
        ValueError: ``stickiness`` is not a finite number >= 0, or is positive for a
            policy that places its nodes itself (``places_counts = False``).
    """

    name = "central"
    needs_forecast = False
    places_counts = True
    """Whether :meth:`decide` goes through :meth:`place` (the stickiness knob applies)."""

    def __init__(self, env: Any, stickiness: float = 0.0) -> None:
        self.stickiness = check_stickiness(stickiness)
        if self.stickiness > 0 and not self.places_counts:
            raise ValueError(f"stickiness: {self.name} places its nodes itself, expected 0, "
                             f"got {stickiness!r}")
        self.decoder = ObservationDecoder.from_env(env)
        if self.needs_forecast and not self.decoder.has_forecast:
            raise ValueError(f"{type(self).__name__} reads forecast columns: wrap the env in "
                             f"core_env.forecast.LossForecastWrapper (or use make_policy)")
        self.agents = self.decoder.agents
        self.rng: np.random.Generator | None = None

    def reset(self, seed: int | None = None) -> None:
        """Start an episode: reseed ``self.rng`` and clear per-episode state."""
        self.rng = np.random.default_rng(seed)
        self.reset_state()

    def reset_state(self) -> None:
        """Clear per-episode state (nothing by default)."""

    def act(self, observations: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
        """One action per node, from every node's observation."""
        if self.rng is None:
            self.reset()
        view = self.decoder.decode(observations)
        actions = self.decide(view)
        return {a: int(x) for a, x in zip(self.agents, actions, strict=False)}

    def decide(self, view: ClusterView) -> np.ndarray:  # pragma: no cover - abstract
        """int64[N] actions for the decoded view."""
        raise NotImplementedError

    def place(self, view: ClusterView, counts: np.ndarray) -> np.ndarray:
        """int64[N] actions giving each task ``counts`` nodes, after the stickiness
        (:func:`sticky_counts`, only when ``stickiness > 0``), keeping nodes on their last
        task and, when ``stickiness > 0`` or the episode's switching cost is positive, on
        the task whose state they hold (:func:`assign_nodes`)."""
        if self.stickiness > 0:
            threshold = self.stickiness * view.switch_cost * view.nodes_last
            counts = sticky_counts(counts, view.nodes_last, threshold, view.n_nodes,
                                   growth_cost=np.where(view.work > 0, view.switch_cost, 0.0))
        held = view.held_slot if self.stickiness > 0 or view.episode_switch_cost > 0 else None
        return assign_nodes(counts, view.last_slot, held)
