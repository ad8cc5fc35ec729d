"""The PettingZoo parallel environment: a thin shell over the batched dynamics (B = 1)."""

from __future__ import annotations

import numbers
import sys
import types
import warnings
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from core_env import dynamics, pmath
from core_env.config import CoreConfig, check_seed
from core_env.layout import Layout
from core_env.observe import Observer
from core_env.presets import DEFAULT_PRESET, make_config
from core_env.state import FUTURE, SUCCEEDED, BatchState, allocate, load_workload
from core_env.workload import Workload, generate_workload, validate_workload

_PLAIN_INTS = frozenset({int, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
                         np.uint32, np.uint64, np.intp})
"""Action types taken without the full check (:meth:`CoreSchedulerEnv.check_action` runs for
anything else, and for values out of range)."""


class CoreSchedulerEnv(ParallelEnv):
    """Arrival-driven, discrete-node CoRE-Learning scheduler (PettingZoo parallel API).

    ## Description
    A cluster of N compute nodes (the agents ``node_0 .. node_{N-1}``) trains learning tasks
    that arrive over time. Task j arrives in slot a_j, may train in slots a_j .. d_j - 1, and
    succeeds when its *observed* loss reaches its target eps_j. Its loss curve over
    cumulative work is hidden; each slot it trains it reports a noisy loss. k nodes of speed
    1 add k**alpha_j work units per slot, at most p_j nodes at once. The objective is the
    number of tasks that succeed. At most K tasks are visible in fixed slots; later arrivals
    wait in a FIFO queue (seen only as a count) while their deadlines run.

    ## Action Space
    ``Discrete(K + 1)`` per node: 0 = idle, k = train the task in slot k - 1. The mask in
    the observation forbids empty slots; a masked action runs as idle and is counted in
    ``illegal_actions``. If more nodes pick a task than its cap p_j, the lowest-numbered
    nodes keep it (``capacity_conflicts``); :func:`core_env.masks.sequential_mask` gives
    the mask that avoids this for policies that decide node by node.

    ## Observation Space
    ``Dict(observation=Box(float32, (D,)), action_mask=Box(0, 1, (K + 1,), int8))``. The
    flat observation is ``[global | this node | K x F task table]``; ``env.layout`` names
    every index (table in ``docs/env.md``). ``state()`` returns the global state for
    centralised critics (``env.state_layout``).

    ## Rewards
    Team reward, the same for every agent:
    ``r_t = C_t + beta * (Phi(s_{t+1}) - Phi(s_t))``, C_t = successes in slot t,
    ``Phi = sum_j clip(ln(l0_j / y_j) / ln(l0_j / eps_j), 0, 1)`` over visible tasks.
    Worked example (beta = 0.5): a task first observed at loss 2.0 with target 0.5 reports
    1.0 after one more slot: psi goes from 0 to ln(2/1)/ln(2/0.5) = 0.5, so r = 0.25. Next
    slot it reports 0.45 <= 0.5: it succeeds (C = 1) and leaves Phi (psi 0.5 -> gone), so
    r = 1 + 0.5 * (0 - 0.5) = 0.75. Episode total 1.0 = one success, whatever beta is.

    ## Starting State
    Slot 0 with the slot-0 arrivals visible; the whole workload (arrivals, curves, noise
    paths) is drawn from the seed alone, never from the actions.

    ## Episode End
    Terminated once arrivals have ended and no task is visible or queued; truncated at
    ``max_steps`` (infos then carry ``"TimeLimit.truncated": True``). At the end every
    agent's info has ``info["episode"]`` with arrived, completed, expired, completion_rate,
    utilization, illegal_actions, capacity_conflicts, switches, length and return.

    ## Arguments
    ``CoreSchedulerEnv(config=None, *, preset=None, render_mode=None, **overrides)``:
    a full :class:`CoreConfig`, or a preset id (default ``"CoRE-v0"``) with flat overrides
    such as ``n_nodes``, ``max_visible_tasks``, ``load``, ``shaping_beta``, ``switch_cost``,
    ``node_speeds``, ``max_steps`` (alias ``max_cycles``, PettingZoo's name).
    ``backend``: ``"numba"`` (compiled; the default when numba is installed) or
    ``"numpy"`` (the reference code); both give the same bits.
    ``reset(seed, options={"workload": w})`` replays a given :class:`Workload`.

    ## Version History
    * v0: initial version.
    """

    metadata = {"name": "core_env_scheduler_v0", "render_modes": ["ansi"],
                "is_parallelizable": True}

    def __init__(self, config: CoreConfig | None = None, *, preset: str | None = None,
                 render_mode: str | None = None, backend: str | None = None,
                 observations: str = "full", **overrides: Any) -> None:
        if "max_cycles" in overrides:  # PettingZoo's name for the step limit
            if "max_steps" in overrides:
                raise ValueError("max_cycles: give max_cycles or max_steps, not both")
            overrides["max_steps"] = overrides.pop("max_cycles")
        if config is not None and not isinstance(config, CoreConfig):
            raise ValueError(f"config: expected a CoreConfig, got {type(config).__name__}")
        if config is None:
            config = make_config(preset or DEFAULT_PRESET, **overrides)
        elif preset is not None:
            raise ValueError(f"preset: expected None when a config is given, got {preset!r}")
        elif overrides:
            config = config.replace(**overrides)
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode: expected None or 'ansi', got {render_mode!r}")
        from core_env.batched import OBSERVATIONS

        if observations not in OBSERVATIONS:
            raise ValueError(f"observations: expected one of {OBSERVATIONS}, got "
                             f"{observations!r}")
        self.observations = observations
        self.config = config
        self.render_mode = render_mode
        self.params = dynamics.StepParams.from_config(config, backend)
        n, k = config.cluster.n_nodes, config.cluster.max_visible_tasks
        self.possible_agents = [f"node_{i}" for i in range(n)]
        self.agents: list[str] = []
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        self.sim: BatchState = allocate(config, 1)
        self._observer = Observer(config, 1, self.params.backend)
        self.layout: Layout = self._observer.obs_layout
        self.state_layout: Layout = self._observer.state_layout
        lo, hi = self.layout.bounds()
        mask_space = spaces.Box(0, 1, shape=(k + 1,), dtype=np.int8)
        if observations == "blocks":
            obs_space = spaces.Dict({**block_spaces(self.layout, lo, hi, n_rows=0),
                                     "action_mask": mask_space})
        else:
            obs_space = spaces.Dict({"observation": spaces.Box(lo, hi, dtype=np.float32),
                                     "action_mask": mask_space})
        self.observation_spaces = {a: obs_space for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(k + 1) for a in self.possible_agents}
        slo, shi = self.state_layout.bounds()
        self.state_space = spaces.Box(slo, shi, dtype=np.float32)
        self._rng: np.random.Generator | None = None
        self.workload: Workload | None = None

    # ----- PettingZoo API -----
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode. ``seed`` reseeds the env's generator; ``options["workload"]``
        replays a given workload instead of drawing one."""
        seed = check_seed("seed", seed)
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options: expected a dict or None, got {type(options).__name__}")
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(seed)
        options = options or {}  # other keys are ignored (PettingZoo's API test passes some)
        wl = self._episode_workload(seed, options)
        self.workload = wl
        load_workload(self.sim, 0, wl)
        dynamics.arrive(self.sim, backend=self.params.backend)
        self.agents = list(self.possible_agents)
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        """Advance one slot with one action per live agent (see the class docstring)."""
        reward, term, trunc, info = self._step_joint(self._parse_actions(actions))
        obs = self._observations()
        agents = self.agents
        rewards = {a: reward for a in agents}
        terminations = {a: term for a in agents}
        truncations = {a: trunc for a in agents}
        if info:
            infos = {a: {key: dict(v) if isinstance(v, dict) else v for key, v in info.items()}
                     for a in agents}
        else:
            infos = {a: {} for a in agents}
        if term or trunc:
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        """Global state float32[S] (layout ``self.state_layout``)."""
        return self._observer.state(0)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        s = self.sim
        lines = [f"t={int(s.t[0])} queued={int(s.queued[0])} arrived={int(s.arrived[0])} "
                 f"completed={int(s.completed[0])} expired={int(s.expired[0])}"]
        for k in np.flatnonzero(s.slot_task[0] >= 0):
            y = float(pmath.exp(s.slot_log_loss[0, k])) if s.slot_n_obs[0, k] else float("nan")
            lines.append(f"  slot {k:2d}: deadline {int(s.slot_deadline[0, k]):4d} "
                         f"cap {int(s.slot_cap[0, k])} work {float(s.slot_work[0, k]):8.2f} "
                         f"loss {y:.4f} target {float(pmath.exp(s.slot_log_target[0, k])):.4f}")
        return "\n".join(lines)

    def close(self) -> None:
        pass

    # ----- helpers (what a subclass such as the live env changes) -----
    def _episode_workload(self, seed: int | None, options: dict) -> Workload:
        """The workload of a new episode: ``options["workload"]`` checked, or drawn."""
        if options.get("workload") is not None:
            return validate_workload(options["workload"], self.config)
        assert self._rng is not None, "reset() seeds the generator first"
        return generate_workload(self.config, self._rng)

    def _step_joint(self, joint: np.ndarray) -> tuple[float, bool, bool, dict[str, Any]]:
        """One slot of joint action ``joint``: the team's reward, terminated, truncated and
        info (``episode`` and ``TimeLimit.truncated`` at the end; observations are left to
        the caller)."""
        res = self._advance(joint)
        term, trunc = bool(res.terminated[0]), bool(res.truncated[0])
        info: dict[str, Any] = {}
        if term or trunc:
            info["episode"] = self._episode_stats()
            if trunc:
                info["TimeLimit.truncated"] = True
        return float(res.reward[0]), term, trunc, info

    def _advance(self, joint: np.ndarray) -> dynamics.StepResult:
        """Run the dynamics for one slot of joint action ``joint`` (int64[N])."""
        return dynamics.step(self.sim, joint[None, :], self.params)

    def _episode_stats(self) -> dict[str, Any]:
        """``info["episode"]`` at the end of an episode, with its per-group counts
        (``groups``: :func:`core_env.audit.group_counts`)."""
        from core_env.audit import group_counts

        stats: dict[str, Any] = dict(dynamics.episode_stats(self.sim, 0))
        assert self.workload is not None, "an episode has a workload"
        m = self.workload.n_tasks
        status = self.sim.status[0, :m]
        stats["groups"] = group_counts(self.config, self.workload, status != FUTURE,
                                       status == SUCCEEDED)
        return stats

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        if self.observations == "blocks":
            return self._block_observations()
        # written straight into fresh arrays; the agents' entries are row views of them, so
        # observations the caller keeps are never overwritten by a later step
        obs, mask = self._observer.observe(self.sim, out=(
            np.empty(self._observer.obs.shape, dtype=np.float32),
            np.empty(self._observer.mask.shape, dtype=np.int8)))
        own_obs, own_mask = obs[0], mask[0]
        return {a: {"observation": own_obs[i], "action_mask": own_mask[i]}
                for i, a in enumerate(self.possible_agents)}

    def _block_observations(self) -> dict[str, dict[str, np.ndarray]]:
        """``observations="blocks"``: fresh arrays each step; ``globals`` and ``tasks`` are
        one read-only array shared by every node, ``node`` and ``action_mask`` row views."""
        ob = self._observer
        ob.compute(self.sim)
        mask = ob.write_mask(self.sim, np.empty(ob.mask.shape, dtype=np.int8))[0]
        glob, tasks, nodes = ob.globals[0].copy(), ob.table[0].copy(), ob.nodes[0].copy()
        glob.flags.writeable = tasks.flags.writeable = False
        return {a: {"globals": glob, "node": row, "tasks": tasks, "action_mask": m}
                for a, row, m in zip(self.possible_agents, list(nodes), list(mask),
                                     strict=True)}

    def task_caps(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """int64[K] the visible tasks' caps from one node's observation (either format)."""
        if "tasks" in observation:
            return self.layout.table_capacity(observation["tasks"])
        return self.layout.capacity(observation["observation"])

    def check_action(self, agent: Any, act: Any) -> int:
        """``act`` as an int if it is a valid action of ``agent``, else an exception naming
        the agent (``KeyError`` for an unknown agent, ``ValueError`` for a bad action)."""
        if agent not in self._index:
            raise KeyError(f"unknown agent {agent!r}; agents are node_0..node_"
                           f"{len(self.possible_agents) - 1}")
        k = self.config.cluster.max_visible_tasks
        if isinstance(act, np.ndarray) and act.shape == ():
            act = act.item()
        if isinstance(act, (bool, np.bool_)) or not isinstance(act, numbers.Integral):
            raise ValueError(f"action of {agent}: expected an int in [0, {k}], got {act!r}")
        if not 0 <= int(act) <= k:
            raise ValueError(f"action of {agent}: expected an int in [0, {k}], got {act}")
        return int(act)

    def _parse_actions(self, actions: dict[str, Any]) -> np.ndarray:
        """int64[N] joint action; raises without touching the state on malformed input."""
        if not self.agents:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        if not isinstance(actions, dict):
            raise ValueError(f"actions: expected a dict agent -> int, got "
                             f"{type(actions).__name__}")
        index, k = self._index, self.config.cluster.max_visible_tasks
        if actions.keys() == index.keys() and set(map(type, actions.values())) <= _PLAIN_INTS:
            # every agent once, plain ints (checked in C): one array, one range check
            try:
                joint = np.fromiter(map(actions.__getitem__, self.possible_agents), np.int64,
                                    len(index))
            except OverflowError:  # a uint64 beyond int64: the check below names it
                joint = np.empty(0, dtype=np.int64)
            if joint.size and 0 <= joint.min() and joint.max() <= k:
                return joint
        values = [0] * len(self.possible_agents)
        for agent, act in actions.items():
            i = index.get(agent) if type(agent) is str else None
            if type(act) not in _PLAIN_INTS or i is None or not 0 <= act <= k:
                act = self.check_action(agent, act)  # raises, naming what is wrong
                i = index[agent]
            values[i] = act
        if len(actions) < len(self.agents):
            missing = [a for a in self.agents if a not in actions]
            raise KeyError(f"missing actions for agents {missing}")
        return np.array(values, dtype=np.int64)


def block_spaces(layout: Layout, lo: np.ndarray, hi: np.ndarray, n_rows: int
                 ) -> dict[str, Any]:
    """The Box spaces of ``observations="blocks"`` from a layout's flat bounds: ``globals``
    [G], ``node`` [NF] (``n_rows=0``: one node's) or ``nodes`` [n_rows, NF], and ``tasks``
    [K, F]."""
    g, nb, tb = layout.global_size, layout.node_block, layout.task_block
    k, f = layout.n_slots, layout.task_size
    node_lo, node_hi = lo[nb][: layout.node_size], hi[nb][: layout.node_size]
    out = {"globals": spaces.Box(lo[:g], hi[:g], dtype=np.float32)}
    if n_rows:
        out["nodes"] = spaces.Box(np.tile(node_lo, (n_rows, 1)), np.tile(node_hi, (n_rows, 1)),
                                  dtype=np.float32)
    else:
        out["node"] = spaces.Box(node_lo, node_hi, dtype=np.float32)
    out["tasks"] = spaces.Box(lo[tb].reshape(k, f), hi[tb].reshape(k, f), dtype=np.float32)
    return out


class _CallableModule(types.ModuleType):
    """``core_env.env`` is this module; calling it, as ``core_env.env(...)`` built the AEC
    env when the package rebound the name, still works for one release, with a warning."""

    def __call__(self, **kwargs: Any) -> Any:
        warnings.warn("core_env.env(...) is deprecated (core_env.env is the module "
                      "core_env/env.py again): use core_env.scheduler_v0.env(...) or "
                      "pettingzoo.make('aec', 'core_env/<preset>')", DeprecationWarning,
                      stacklevel=2)
        from core_env.aec import aec_env  # (scheduler_v0.env; it imports this module)

        return aec_env(CoreSchedulerEnv(**kwargs))


sys.modules[__name__].__class__ = _CallableModule
