"""core_env.testing.check_env: it passes on our presets and views, and it catches broken
envs (each broken env below violates exactly one property)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import core_env
from core_env.env import CoreSchedulerEnv
from core_env.testing import EPISODE_KEYS, CheckReport, EnvCheckError, check_env

SMALL = "CoRE-Small-v0"
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("overrides", [
    {},
    {"shaping_beta": 3.0, "switch_cost": 0.3, "speed_choices": (0.5, 1.0, 2.0)},
    {"n_nodes": 6, "max_visible_tasks": 3, "load": 3.0},
])
def test_passes_on_small_presets(overrides):
    report = check_env(lambda: core_env.parallel_env(preset=SMALL, **overrides), seeds=(0, 1))
    assert isinstance(report, CheckReport)
    assert report.pettingzoo_tests == ("parallel_api_test", "api_test", "parallel_seed_test")
    assert report.episodes == 6 and report.steps > 6 * 10
    assert report.forbidden_actions > 0  # the illegal-action path was exercised


def test_passes_on_an_instance_and_on_truncated_episodes():
    env = core_env.parallel_env(preset=SMALL, max_steps=25, shaping_beta=2.0)
    report = check_env(env, seeds=(3,), library_tests=False)
    assert report.steps == 3 * 25  # every episode truncated at max_steps
    assert report.pettingzoo_tests == ()


def test_passes_on_the_training_preset():
    report = check_env(lambda: core_env.parallel_env(preset="CoRE-v0"), seeds=(0,),
                       num_cycles=100)
    assert report.episodes == 3


def test_passes_on_the_central_gymnasium_view():
    report = check_env(gymnasium.make(f"core_env:core_env/{SMALL}"), seeds=(0, 1))
    assert report.pettingzoo_tests == ("gymnasium.check_env",)
    assert report.episodes == 4 and report.forbidden_actions > 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="seeds"):
        check_env(core_env.parallel_env(preset=SMALL), seeds=())
    with pytest.raises(ValueError, match="forbidden_rate"):
        check_env(core_env.parallel_env(preset=SMALL), forbidden_rate=1.5)
    with pytest.raises(ValueError, match="ParallelEnv"):
        check_env(42)
    with pytest.raises(ValueError, match="factory"):
        check_env(lambda: "not an env", library_tests=False)


# ------------------------------------------------------------------ broken envs
class _Broken(CoreSchedulerEnv):
    """Our env with one defect switched on by ``defect``."""

    def __init__(self, defect: str, **overrides):
        super().__init__(preset=SMALL, **overrides)
        self.defect = defect
        self._calls = 0

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed=seed, options=options)
        self._calls += 1
        return self._break_obs(obs), infos

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        d = self.defect
        if d == "reward_differs" and "node_1" in rew:
            rew["node_1"] += 1e-3
        if d == "extra_reward":  # a non-telescoping bonus, reported consistently
            rew = {a: r + 0.01 for a, r in rew.items()}
            for info in infos.values():
                if "episode" in info:
                    ep = info["episode"]
                    info["episode"] = {**ep, "return": ep["return"] + 0.01 * ep["length"]}
        if d == "no_episode_stats":
            for info in infos.values():
                info.pop("episode", None)
        if d == "wrong_length":
            for info in infos.values():
                if "episode" in info:
                    info["episode"] = {**info["episode"], "length": info["episode"]["length"] + 1}
        if d == "no_truncation_key":
            for info in infos.values():
                info.pop("TimeLimit.truncated", None)
        if d == "illegal_not_counted":
            for info in infos.values():
                if "episode" in info:
                    info["episode"] = {**info["episode"], "illegal_actions": 0}
        return self._break_obs(obs), rew, term, trunc, infos

    def _break_obs(self, obs):
        d = self.defect
        for o in obs.values():
            if d == "idle_masked":
                o["action_mask"] = o["action_mask"].copy()
                o["action_mask"][0] = 0
            if d == "mask_dtype":
                o["action_mask"] = o["action_mask"].astype(np.int64)
            if d == "nan_obs":
                o["observation"] = o["observation"].copy()
                o["observation"][3] = np.nan
            if d == "out_of_space":
                o["observation"] = o["observation"].copy()
                o["observation"][0] = 5.0
            if d == "nondeterministic" and self._calls > 1:
                o["observation"] = o["observation"].copy()
                o["observation"][-1] = 0.5 * (o["observation"][-1] + 1e-3)
        return obs


@pytest.mark.parametrize("defect, message", [
    ("idle_masked", "idle"),
    ("mask_dtype", "int8"),
    ("nan_obs", "NaN"),
    ("out_of_space", "outside its space"),
    ("reward_differs", "team reward"),
    ("extra_reward", "shaping identity"),
    ("no_episode_stats", "no 'episode'"),
    ("wrong_length", "length"),
    ("illegal_not_counted", "illegal_actions"),
    ("nondeterministic", "determinism"),
])
def test_catches_a_broken_env(defect, message):
    with pytest.raises(EnvCheckError, match=message):
        check_env(lambda: _Broken(defect), seeds=(0,), library_tests=False)


def test_catches_a_missing_truncation_key():
    with pytest.raises(EnvCheckError, match="TimeLimit.truncated"):
        check_env(lambda: _Broken("no_truncation_key", max_steps=20), seeds=(0,),
                  library_tests=False)


def test_episode_keys_match_the_env():
    env = core_env.parallel_env(preset=SMALL)
    obs, _ = env.reset(seed=0)
    while env.agents:
        obs, _, _, _, infos = env.step({a: 0 for a in env.agents})
    assert set(EPISODE_KEYS) <= set(infos["node_0"]["episode"])
