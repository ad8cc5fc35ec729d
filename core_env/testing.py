"""Compliance checks that users can run on their own presets, subclasses and wrappers.

Like ``pettingzoo.test``, these ship inside the package so that whoever extends the env
(a new preset, a subclass, a wrapper that adds observation columns) can check that the
result still honours the contract of ``docs/env.md``::

    import core_env
    from core_env.testing import check_env

    report = check_env(lambda: core_env.parallel_env(preset="CoRE-Small-v0", load=2.0))
    print(report)   # what was checked: episodes, steps, ...

:func:`check_env` takes a parallel env, a factory of parallel envs, or the centralised
Gymnasium view, and raises :class:`EnvCheckError` (an ``AssertionError``) naming the first
violated property, the seed, the step and the agent. It runs

* PettingZoo's API tests (parallel, and AEC through ``parallel_to_aec``) and its seed test,
  or Gymnasium's ``check_env`` for the centralised view;
* our invariants over whole episodes played by a masked random policy that also plays a
  share of forbidden actions on purpose: every observation and ``state()`` inside its
  declared space and finite; each action mask int8, 0/1, with idle (action 0) legal; one
  team reward for all agents; at the episode end, ``info["episode"]`` present and
  consistent (length, return, completion rate, arrived = completed + expired when the
  episode terminated, the count of forbidden actions played, utilization in [0, 1],
  ``"TimeLimit.truncated"`` on truncation); the shaping identity (the episode's return
  equals its number of completed tasks, for any shaping weight); and full-episode
  determinism (same seed and same actions give bit-identical observations, rewards and
  infos, in a fresh env and in the same env reset again).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv

from core_env._check_base import (  # noqa: F401 (EnvCheckError: re-exported)
    CheckReport,
    EnvCheckError,
    _equal,
    _fail,
    _outside,
)
from core_env._check_central import _check_central
from core_env.dynamics import EPISODE_KEYS  # keys info["episode"] must carry (docs/env.md)

_DEFAULT_MAX_STEPS = 100_000


class _Episode(NamedTuple):
    observations: list[dict[str, Any]]  # one obs dict per step, reset included
    states: list[np.ndarray | None]     # state() after reset and after every step
    actions: list[dict[str, int]]
    rewards: list[dict[str, float]]
    terminations: list[dict[str, bool]]
    truncations: list[dict[str, bool]]
    infos: list[dict[str, dict]]
    forbidden: int                      # forbidden actions played


def check_env(env: ParallelEnv | gymnasium.Env | Callable[[], ParallelEnv], *,
              seeds: Sequence[int] = (0, 1), num_cycles: int = 200,
              forbidden_rate: float = 0.1, library_tests: bool = True) -> CheckReport:
    """Check an env against the core_env contract; raise :class:`EnvCheckError` if it fails.

    Args:
        env: a PettingZoo parallel env, a zero-argument factory returning one (used for
            the seed and determinism tests; an instance is deep-copied instead), or the
            centralised Gymnasium view (``gymnasium.make("core_env:core_env/<id>")``).
        seeds: one checked episode (plus its replays) per seed.
        num_cycles: cycles of PettingZoo's API and seed tests.
        forbidden_rate: probability that the checking policy plays a forbidden action for a
            node (when the node has one), to check that it runs as idle and is counted.
        library_tests: also run PettingZoo's (or Gymnasium's) own tests.

    Returns:
        A :class:`CheckReport` of what was checked.

    Raises:
        EnvCheckError: the first property that does not hold.
        ValueError: ``env`` is not an env or a factory, or bad arguments.
    """
    if not seeds:
        raise ValueError("seeds: expected at least one seed, got an empty sequence")
    if not 0.0 <= forbidden_rate <= 1.0:
        raise ValueError(f"forbidden_rate: expected a probability in [0, 1], got "
                         f"{forbidden_rate!r}")
    if isinstance(env, gymnasium.Env):
        return _check_central(env, seeds, forbidden_rate, library_tests)
    factory = _factory(env)
    ran: list[str] = []
    if library_tests:
        from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test
        from pettingzoo.utils.conversions import parallel_to_aec

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # PettingZoo's style notes
            parallel_api_test(factory(), num_cycles=num_cycles)
            ran.append("parallel_api_test")
            api_test(parallel_to_aec(factory()), num_cycles=num_cycles)
            ran.append("api_test")
            parallel_seed_test(factory, num_cycles=num_cycles)
            ran.append("parallel_seed_test")
    episodes = steps = forbidden = 0
    for seed in seeds:
        env_a = factory()
        ep = _play(env_a, seed, np.random.default_rng([seed, 1]), forbidden_rate)
        _check_episode(env_a, ep, seed)
        fresh = _play(factory(), seed, None, 0.0, replay=ep.actions)
        _same(ep, fresh, f"seed {seed}: a fresh env replaying the same actions")
        again = _play(env_a, seed, None, 0.0, replay=ep.actions)
        _same(ep, again, f"seed {seed}: the same env reset with the same seed")
        episodes += 3
        steps += 3 * len(ep.actions)
        forbidden += ep.forbidden
    return CheckReport(episodes, steps, forbidden, tuple(ran))


# ----------------------------------------------------------------- parallel env
def _factory(env: Any) -> Callable[[], ParallelEnv]:
    if isinstance(env, ParallelEnv):
        template = copy.deepcopy(env)
        return lambda: copy.deepcopy(template)
    if callable(env):
        def make() -> ParallelEnv:
            made = env()
            if not isinstance(made, ParallelEnv):
                raise ValueError(f"env: expected the factory to return a PettingZoo "
                                 f"ParallelEnv, got {type(made).__name__}")
            return made
        return make
    raise ValueError(f"env: expected a PettingZoo ParallelEnv, a factory of one, or a "
                     f"gymnasium.Env, got {type(env).__name__}")


def _max_steps(env: Any) -> int:
    limit = getattr(getattr(env, "config", None), "max_steps", None)
    return (int(limit) if isinstance(limit, (int, np.integer)) else _DEFAULT_MAX_STEPS) + 1


def _state(env: Any) -> np.ndarray | None:
    try:
        return np.array(env.state(), copy=True)
    except NotImplementedError:
        return None


def _check_obs(env: Any, obs: dict, agents: list[str], where: str) -> None:
    for agent in agents:
        if agent not in obs:
            _fail(f"{where}: no observation for live agent {agent!r}")
        o = obs[agent]
        if not isinstance(o, dict) or "action_mask" not in o:
            _fail(f"{where}, {agent}: expected a dict observation with an 'action_mask', got "
                  f"{type(o).__name__}")
        mask = np.asarray(o["action_mask"])
        n_actions = env.action_space(agent).n
        if mask.dtype != np.int8 or mask.shape != (n_actions,):
            _fail(f"{where}, {agent}: action_mask: expected int8[{n_actions}], got "
                  f"{mask.dtype}{list(mask.shape)}")
        if not np.all((mask == 0) | (mask == 1)):
            _fail(f"{where}, {agent}: action_mask: expected only 0 and 1, got {mask}")
        if mask[0] != 1:
            _fail(f"{where}, {agent}: action_mask: idle (action 0) must always be legal")
        for key, value in o.items():
            arr = np.asarray(value)
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                _fail(f"{where}, {agent}: observation[{key!r}] has NaN or inf at "
                      f"{np.flatnonzero(~np.isfinite(arr))[:5].tolist()}")
        space = env.observation_space(agent)
        if not space.contains(o):
            _fail(f"{where}, {agent}: observation is outside its space {space}"
                  + _outside(space, o))
    state = _state(env)
    space = getattr(env, "state_space", None)
    if state is not None:
        if not np.all(np.isfinite(state)):
            _fail(f"{where}: state() has NaN or inf")
        if space is not None and not space.contains(state.astype(space.dtype, copy=False)):
            _fail(f"{where}: state() is outside state_space" + _outside(space, state))


def _policy_actions(env: Any, obs: dict, rng: np.random.Generator,
                    forbidden_rate: float) -> tuple[dict[str, int], int]:
    actions, forbidden = {}, 0
    for agent in env.agents:
        mask = np.asarray(obs[agent]["action_mask"])
        illegal = np.flatnonzero(mask == 0)
        if illegal.size and rng.random() < forbidden_rate:
            actions[agent] = int(rng.choice(illegal))
            forbidden += 1
        else:
            actions[agent] = int(rng.choice(np.flatnonzero(mask)))
    return actions, forbidden


def _play(env: Any, seed: int, rng: np.random.Generator | None, forbidden_rate: float,
          replay: list[dict[str, int]] | None = None) -> _Episode:
    obs, infos = env.reset(seed=seed)
    ep = _Episode([obs], [_state(env)], [], [], [], [], [infos], 0)
    _check_obs(env, obs, list(env.agents), f"seed {seed}, after reset")
    limit = _max_steps(env)
    forbidden = 0
    while env.agents:
        t = len(ep.actions)
        if t >= limit:
            _fail(f"seed {seed}: the episode did not end within {limit} steps")
        if replay is None:
            assert rng is not None  # a played (not replayed) episode has a generator
            actions, n = _policy_actions(env, obs, rng, forbidden_rate)
            forbidden += n
        else:
            if t >= len(replay):
                _fail(f"seed {seed}: the replayed episode is longer than the original "
                      f"({len(replay)} steps): not deterministic")
            actions = replay[t]
        live = list(env.agents)
        obs, rewards, terms, truncs, infos = env.step(actions)
        for name, d in (("rewards", rewards), ("terminations", terms),
                        ("truncations", truncs), ("infos", infos)):
            if set(d) != set(live):
                _fail(f"seed {seed}, step {t}: {name} keys {sorted(d)} differ from the live "
                      f"agents {live}")
        ep.observations.append(obs)
        ep.states.append(_state(env))
        ep.actions.append(actions)
        ep.rewards.append(rewards)
        ep.terminations.append(terms)
        ep.truncations.append(truncs)
        ep.infos.append(infos)
        if env.agents:
            _check_obs(env, obs, list(env.agents), f"seed {seed}, step {t}")
    return ep._replace(forbidden=forbidden)


def _check_episode(env: Any, ep: _Episode, seed: int) -> None:
    team = []
    for t, rewards in enumerate(ep.rewards):
        values = list(rewards.values())
        if not all(np.isfinite(values)):
            _fail(f"seed {seed}, step {t}: non-finite reward {rewards}")
        if any(v != values[0] for v in values):
            _fail(f"seed {seed}, step {t}: the team reward differs between agents: {rewards}")
        team.append(float(values[0]))
    final = ep.infos[-1]
    stats = None
    for agent, info in final.items():
        if "episode" not in info:
            _fail(f"seed {seed}: the final info of {agent} has no 'episode' statistics")
        missing = [k for k in EPISODE_KEYS if k not in info["episode"]]
        if missing:
            _fail(f"seed {seed}: info['episode'] of {agent} lacks {missing}")
        if stats is None:
            stats = info["episode"]
        elif info["episode"] != stats:
            _fail(f"seed {seed}: info['episode'] differs between agents")
    assert stats is not None
    n = len(ep.actions)
    terminated = all(ep.terminations[-1].values())
    truncated = all(ep.truncations[-1].values())
    total = math.fsum(team)
    tol = 1e-6 * max(1.0, abs(total))
    checks = [
        (stats["length"] == n, f"length {stats['length']} != steps taken {n}"),
        (abs(stats["return"] - total) <= tol,
         f"return {stats['return']} != sum of rewards {total}"),
        (abs(total - stats["completed"]) <= tol,
         f"shaping identity: the episode's return {total} != completed "
         f"{stats['completed']} (potential-based shaping must telescope to zero)"),
        (stats["completed"] + stats["expired"] <= stats["arrived"],
         f"completed {stats['completed']} + expired {stats['expired']} > arrived "
         f"{stats['arrived']}"),
        (not terminated or stats["completed"] + stats["expired"] == stats["arrived"],
         f"terminated with unresolved tasks: completed {stats['completed']} + expired "
         f"{stats['expired']} != arrived {stats['arrived']}"),
        (abs(stats["completion_rate"] - stats["completed"] / max(stats["arrived"], 1)) <= 1e-12,
         f"completion_rate {stats['completion_rate']} != completed / arrived"),
        (0.0 <= stats["utilization"] <= 1.0, f"utilization {stats['utilization']} not in [0, 1]"),
        (stats["illegal_actions"] == ep.forbidden,
         f"illegal_actions {stats['illegal_actions']} != forbidden actions played "
         f"{ep.forbidden}"),
        (terminated != truncated, f"episode ended with terminated={terminated} and "
         f"truncated={truncated} (expected exactly one for all agents)"),
        (not truncated or all(i.get("TimeLimit.truncated") is True for i in final.values()),
         "truncated without 'TimeLimit.truncated': True in every final info"),
    ]
    for ok, message in checks:
        if not ok:
            _fail(f"seed {seed}: info['episode']: {message}")


def _same(ref: _Episode, other: _Episode, what: str) -> None:
    if len(other.actions) != len(ref.actions):
        _fail(f"determinism: {what} ran {len(other.actions)} steps, not {len(ref.actions)}")
    for field in ("observations", "states", "rewards", "terminations", "truncations", "infos"):
        for t, (x, y) in enumerate(zip(getattr(ref, field), getattr(other, field), strict=False)):
            if not _equal(x, y):
                offset = 1 if field in ("observations", "states", "infos") else 0
                step = "reset" if t < offset else f"step {t - offset}"
                _fail(f"determinism: {what} gave different {field} after {step}")
