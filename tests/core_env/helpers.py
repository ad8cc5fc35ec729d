"""Shared helpers for the core_env tests: hand-made workloads, random policies, episode runners."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import core_env
from core_env.curves import GRID_SIZE, LOG_WORK_GRID

SMALL = "CoRE-Small-v0"
LOG_WORK_NORM = math.log1p(4096.0)  # the ``log_work`` feature is ln(1 + work) / ln(1 + WORK_MAX)


def power_curve(c: float = 1.0, b: float = 1.0) -> np.ndarray:
    """float64[G] log-loss table of ``loss(w) = c * w**-b``: linear in log work, so the
    simulator's linear interpolation reproduces it exactly (up to float32 rounding)."""
    return math.log(c) - b * LOG_WORK_GRID


def task(arrival: int, deadline: int, *, target_work: float, cap: int = 1, alpha: float = 1.0,
         c: float = 1.0, b: float = 1.0) -> dict[str, Any]:
    """One hand-made task whose loss ``c * w**-b`` reaches its target exactly at ``target_work``."""
    return {"arrival": arrival, "deadline": deadline, "cap": cap, "alpha": alpha,
            "log_target": math.log(c) - b * math.log(target_work), "curve": power_curve(c, b)}


def make_workload(tasks: list[dict[str, Any]], speeds) -> core_env.Workload:
    """A :class:`core_env.Workload` built from :func:`task` dicts (observed = true curve)."""
    curves = np.stack([t["curve"] for t in tasks]) if tasks else np.zeros((0, GRID_SIZE))
    return core_env.Workload(
        arrival=np.array([t["arrival"] for t in tasks], dtype=np.int64),
        deadline=np.array([t["deadline"] for t in tasks], dtype=np.int64),
        log_target=np.array([t["log_target"] for t in tasks], dtype=np.float64),
        cap=np.array([t["cap"] for t in tasks], dtype=np.int64),
        alpha=np.array([t["alpha"] for t in tasks], dtype=np.float64),
        family=np.zeros(len(tasks), dtype=np.int8),
        log_loss=curves.copy(), true_log_loss=curves.copy(),
        speeds=np.asarray(speeds, dtype=np.float64))


def hand_env(n_nodes: int, k: int, arrival_slots: int, **overrides: Any):
    """A small parallel env sized for hand-worked instances."""
    return core_env.parallel_env(preset=SMALL, n_nodes=n_nodes, max_visible_tasks=k,
                                 arrival_slots=arrival_slots, **overrides)


def joint(env, actions) -> dict[str, int]:
    """Action dict from a list of ints (one per possible agent)."""
    return {a: int(x) for a, x in zip(env.possible_agents, actions, strict=False)}


def obs_matrix(env, obs) -> tuple[np.ndarray, np.ndarray]:
    """Stack an obs dict into (float32[N, D], int8[N, K+1])."""
    o = np.stack([obs[a]["observation"] for a in env.possible_agents])
    m = np.stack([obs[a]["action_mask"] for a in env.possible_agents])
    return o, m


def work_from_obs(env, obs, agent: str = "node_0") -> np.ndarray:
    """float64[K] cumulative work of each slot, decoded from the ``log_work`` feature."""
    v = obs[agent]["observation"][env.layout.task_columns("log_work")].astype(np.float64)
    return np.expm1(v * LOG_WORK_NORM)


def column(env, obs, name: str, agent: str = "node_0") -> np.ndarray:
    """float32[K] task column ``name`` of an agent's observation."""
    return obs[agent]["observation"][env.layout.task_columns(name)]


def masked_random_policy(rng: np.random.Generator) -> Callable:
    """policy(env, obs) -> action dict, uniform over each node's own legal actions."""
    def policy(env, obs):
        return {a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"]))) for a in env.agents}
    return policy


def uniform_random_policy(rng: np.random.Generator) -> Callable:
    """policy(env, obs) -> action dict, uniform over Discrete(K + 1) (illegal actions too)."""
    def policy(env, obs):
        return {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
    return policy


def run_episode(env, seed: int | None, policy: Callable, options: dict | None = None,
                max_steps: int = 100_000) -> dict[str, Any]:
    """Run one episode; return every step's obs/rewards/flags/infos and the actions taken."""
    obs, infos = env.reset(seed=seed, options=options)
    traj = {"obs": [obs], "actions": [], "rewards": [], "terms": [], "truncs": [],
            "infos": [infos], "states": [env.state().copy()]}
    for _ in range(max_steps):
        if not env.agents:
            break
        act = policy(env, obs)
        obs, rew, term, trunc, infos = env.step(act)
        traj["actions"].append(act)
        traj["obs"].append(obs)
        traj["rewards"].append(rew)
        traj["terms"].append(term)
        traj["truncs"].append(trunc)
        traj["infos"].append(infos)
        traj["states"].append(env.state().copy())
    return traj


def replay_policy(actions: list[dict[str, int]]) -> Callable:
    """A policy that replays a recorded list of action dicts."""
    it = iter(actions)

    def policy(env, obs):
        return next(it)
    return policy


def team_rewards(traj) -> list[float]:
    return [r["node_0"] for r in traj["rewards"]]


def final_episode_info(traj) -> dict[str, Any]:
    return traj["infos"][-1]["node_0"]["episode"]
