"""Helpers for the baseline tests: observation dicts built by hand through the layout."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import core_env
from core_env.curves import WORK_MAX
from core_env.forecast import LossForecastWrapper, WLSForecaster

SMALL = "CoRE-Small-v0"


def small_env(n_nodes: int = 4, k: int = 4, forecast: bool = False, **overrides: Any):
    """A small env (optionally WLS-wrapped) whose layout the hand observations follow."""
    env = core_env.parallel_env(preset=SMALL, n_nodes=n_nodes, max_visible_tasks=k, **overrides)
    return LossForecastWrapper(env, WLSForecaster()) if forecast else env


def make_observations(env, t: int, tasks: dict[int, dict[str, float]],
                      last_slot: list[int] | None = None, held_slot: list[int] | None = None,
                      episode_cost: float = 0.0) -> dict[str, dict[str, np.ndarray]]:
    """Observation dicts for every node, encoded exactly as the env (and wrapper) would.

    Args:
        env: the env whose layout and configuration to follow.
        t: current slot.
        tasks: slot -> task description with keys ``left`` (slots to the deadline),
            ``age``, ``cap``, ``alpha`` (default 1), ``work`` (default 0), ``nodes_last``
            (default 0), ``gap`` (ln(observed loss / target), default 0), ``switch_cost``
            (its restore cost c_j, default 0) and, for wrapped
            envs, ``remaining`` (forecast remaining work,
            written into every ``fc_*`` quantile column; default 0).
        last_slot: per node, the slot it trained last slot (-1 = none).
        held_slot: per node, the slot of the task whose state it holds (default: its
            ``last_slot``).
        episode_cost: the global ``episode_switch_cost``.
    """
    lay, cfg = env.layout, env.unwrapped.config
    n, k = cfg.cluster.n_nodes, cfg.cluster.max_visible_tasks
    w = cfg.workload.window[1]
    last_slot = last_slot if last_slot is not None else [-1] * n
    held_slot = held_slot if held_slot is not None else last_slot
    base = np.zeros(lay.size, dtype=np.float32)
    base[lay.index("time")] = t / cfg.max_steps
    base[lay.index("episode_switch_cost")] = episode_cost
    table = lay.task_table(base)  # a view
    col = {f.name: i for i, f in enumerate(lay.task_features)}
    names = set(col)
    for s, d in tasks.items():
        cap, alpha, left = d["cap"], d.get("alpha", 1.0), d["left"]
        row = table[s]
        row[col["present"]] = 1.0
        row[col["time_to_deadline"]] = min(left / w, 1.0)
        row[col["age"]] = min(d.get("age", 0) / w, 1.0)
        row[col["cap"]] = min(cap, n) / n
        row[col["alpha"]] = alpha
        row[col["log_work"]] = math.log1p(d.get("work", 0.0)) / math.log1p(WORK_MAX)
        row[col["nodes_last"]] = d.get("nodes_last", 0) / n
        row[col["loss_gap"]] = d.get("gap", 0.0) / 4.0
        row[col["switch_cost"]] = d.get("switch_cost", 0.0)
        if "fc_q50" in names:
            achievable = min(cap, n) ** alpha * 1.0 * left
            fc = min(d.get("remaining", 0.0) / achievable, 2.0) / 2.0
            for c in ("fc_mean", "fc_q10", "fc_q50", "fc_q90"):
                row[col[c]] = fc
            row[col["fc_p_reach"]] = float(fc < 0.5)
    mask = np.zeros(k + 1, dtype=np.int8)
    mask[0] = 1
    for s in tasks:
        mask[s + 1] = 1
    out = {}
    for i, agent in enumerate(env.possible_agents):
        o = base.copy()
        o[lay.index("speed")] = 1.0
        o[lay.index("node_index")] = i / max(n - 1, 1)
        o[lay.index("idle_last")] = float(last_slot[i] < 0)
        o[lay.index("last_slot")] = (last_slot[i] + 1) / k if last_slot[i] >= 0 else 0.0
        o[lay.index("held_slot")] = (held_slot[i] + 1) / k if held_slot[i] >= 0 else 0.0
        out[agent] = {"observation": o, "action_mask": mask.copy()}
    return out


def counts_of(actions: dict[str, int], k: int) -> np.ndarray:
    """int64[K] nodes per slot in an action dict."""
    a = np.array(list(actions.values()))
    return np.bincount(a, minlength=k + 1)[1:]


def episode_actions(env, pol, seed):
    """One episode of ``pol``: its joint actions (a tuple per step, in agent order) and the
    final ``info["episode"]``."""
    obs, _ = env.reset(seed=seed)
    pol.reset(seed)
    actions = []
    while env.agents:
        a = pol.act(obs)
        actions.append(tuple(a[x] for x in env.possible_agents))
        obs, _, _, _, infos = env.step(a)
    return actions, infos[env.possible_agents[0]]["episode"]
