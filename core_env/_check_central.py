"""The checks of :func:`core_env.testing.check_env` on the centralised Gymnasium view
(``gymnasium.make("core_env:core_env/<id>")``): Gymnasium's ``check_env``, every observation
in its space, ``action_masks()`` equal to the observed mask, ``info["episode"]`` consistent
with the episode played, the shaping identity, and a replay of the same seed and actions
giving the same episode.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np

from core_env._check_base import CheckReport, _equal, _fail, _outside


def _check_central(env: gymnasium.Env, seeds: Sequence[int], forbidden_rate: float,
                   library_tests: bool) -> CheckReport:
    base = env.unwrapped
    ran: list[str] = []
    if library_tests:
        from gymnasium.utils.env_checker import check_env as gym_check_env

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            gym_check_env(base)
        ran.append("gymnasium.check_env")
    action_masks = getattr(base, "action_masks", None)
    if action_masks is None:
        _fail("centralised view: no action_masks() method (MaskablePPO needs it)")
    if not isinstance(env.action_space, gymnasium.spaces.MultiDiscrete):
        _fail(f"centralised view: expected a MultiDiscrete action space (a choice per node), "
              f"got {env.action_space}")
    nvec = np.asarray(env.action_space.nvec)
    episodes = steps = forbidden = 0
    for seed in seeds:
        traces = []
        rng = np.random.default_rng([seed, 2])
        actions_played: list[np.ndarray] = []
        for replay in (False, True):
            obs, _ = env.reset(seed=seed)
            trace: list[Any] = [obs]
            info: dict[str, Any]
            total, t, n_forbidden, done, info = 0.0, 0, 0, False, {}
            while not done:
                where = f"central view, seed {seed}, step {t}"
                if not env.observation_space.contains(obs):
                    _fail(f"{where}: observation outside its space"
                          + _outside(env.observation_space, obs))
                mask = obs["action_mask"]
                flat = action_masks()
                if mask.dtype != np.int8 or not np.all(mask[:, 0] == 1):
                    _fail(f"{where}: action_mask must be int8 with idle legal for every node")
                if not np.array_equal(flat, mask.astype(bool).ravel()):
                    _fail(f"{where}: action_masks() disagrees with the observed action_mask")
                if replay:
                    if t >= len(actions_played):
                        _fail(f"determinism: seed {seed}: the replay is longer than the "
                              "original episode")
                    action = actions_played[t]
                else:
                    action = np.zeros(len(nvec), dtype=np.int64)
                    for i, row in enumerate(mask):
                        illegal = np.flatnonzero(row == 0)
                        if illegal.size and rng.random() < forbidden_rate:
                            action[i] = rng.choice(illegal)
                            n_forbidden += 1
                        else:
                            action[i] = rng.choice(np.flatnonzero(row))
                    actions_played.append(action)
                obs, reward, terminated, truncated, info = env.step(action)
                trace.append((obs, reward, terminated, truncated, info))
                total += float(reward)
                done = terminated or truncated
                t += 1
            traces.append(trace)
            stats = info.get("episode")
            if stats is None:
                _fail(f"central view, seed {seed}: the final info has no 'episode'")
            if abs(total - stats["completed"]) > 1e-6 * max(1.0, abs(total)):
                _fail(f"central view, seed {seed}: shaping identity: return {total} != "
                      f"completed {stats['completed']}")
            if not replay and stats["illegal_actions"] != n_forbidden:
                _fail(f"central view, seed {seed}: illegal_actions "
                      f"{stats['illegal_actions']} != forbidden actions played {n_forbidden}")
            forbidden += n_forbidden
            episodes += 1
            steps += t
        if len(traces[0]) != len(traces[1]) or not all(
                _equal(_as_dict(x), _as_dict(y)) for x, y in zip(*traces, strict=False)):
            _fail(f"determinism: central view, seed {seed}: the same seed and actions gave a "
                  "different episode")
    return CheckReport(episodes, steps, forbidden, tuple(ran))


def _as_dict(item: Any) -> Any:
    if isinstance(item, tuple):
        return {str(i): v for i, v in enumerate(item)}
    return item
