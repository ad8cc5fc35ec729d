"""Malformed actions (SPEC §3 "Bad input"), as a property: at a random step of a random
episode, a malformed action raises ``ValueError``/``KeyError`` naming the culprit, leaves
every state array untouched, and the episode then continues exactly as a clean run does.
Covered for the PettingZoo env, the Gymnasium centralised view and the batched simulator.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core_env

from .strategies import PROPERTY, actions_for, configs

MALFORMED = ("unknown_agent", "missing_agent", "too_large", "negative", "float", "bool",
             "string", "none", "numpy_float", "array", "not_a_dict", "huge")


def sim_arrays(sim) -> dict[str, np.ndarray]:
    return {f.name: getattr(sim, f.name).copy() for f in dataclasses.fields(sim)}


def assert_unchanged(before: dict[str, np.ndarray], sim, what: str) -> None:
    for name, arr in before.items():
        assert np.array_equal(arr, getattr(sim, name)), f"{what}: {name} changed"


def malformed(kind: str, good: dict[str, int], k: int):
    """(bad action dict, agent the error must name or None)."""
    bad = dict(good)
    victim = sorted(good)[len(good) // 2]
    if kind == "unknown_agent":
        bad["node_999"] = 0
        return bad, "node_999"
    if kind == "missing_agent":
        del bad[victim]
        return bad, victim
    if kind == "not_a_dict":
        return list(good.values()), None
    value = {"too_large": k + 1, "negative": -1, "float": 1.0, "bool": True, "string": "1",
             "none": None, "numpy_float": np.float64(1.0), "array": np.array([0, 1]),
             "huge": 2**70}[kind]
    bad[victim] = value
    return bad, victim


@PROPERTY
@given(cfg=configs(), seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(MALFORMED),
       at=st.integers(0, 40))
def test_pettingzoo_env_rejects_malformed_actions_without_touching_its_state(cfg, seed, kind,
                                                                             at):
    clean, dirty = core_env.CoreSchedulerEnv(cfg), core_env.CoreSchedulerEnv(cfg)
    obs, _ = clean.reset(seed=seed)
    dirty.reset(seed=seed)
    rng = np.random.default_rng(seed)
    step = 0
    while clean.agents:
        mask = np.stack([obs[a]["action_mask"] for a in clean.possible_agents])
        good = dict(zip(clean.possible_agents, actions_for("uniform", rng, mask, None).tolist(), strict=False))
        if step == at:
            bad, agent = malformed(kind, good, cfg.cluster.max_visible_tasks)
            before = sim_arrays(dirty.sim)
            with pytest.raises((ValueError, KeyError)) as err:
                dirty.step(bad)
            if agent is not None:
                assert agent in str(err.value), err.value
            assert_unchanged(before, dirty.sim, kind)
            assert dirty.agents == clean.agents
        obs, rew, _, _, infos = clean.step(good)
        _, rew2, _, _, infos2 = dirty.step(good)
        assert rew == rew2
        step += 1
    assert infos == infos2
    with pytest.raises(RuntimeError, match="reset"):  # stepping a finished episode
        clean.step({a: 0 for a in clean.possible_agents})


@PROPERTY
@given(cfg=configs(max_nodes=4), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_batched_and_central_views_reject_malformed_actions_without_touching_state(cfg, seed,
                                                                                  data):
    n, k = cfg.cluster.n_nodes, cfg.cluster.max_visible_tasks
    bad = data.draw(st.sampled_from([
        np.zeros((2, n + 1), dtype=np.int64), np.zeros((3, n), dtype=np.int64),
        np.zeros((2, n)), np.full((2, n), k + 1), np.full((2, n), -1),
        np.zeros((2, n), dtype=bool).astype(object), [[0] * n]]))
    envs = core_env.BatchedCoreEnv(cfg, num_envs=2, seed=seed)
    envs.reset()
    envs.step(np.zeros((2, n), dtype=np.int64))
    before = sim_arrays(envs.sim)
    with pytest.raises(ValueError, match="actions"):
        envs.step(bad)
    assert_unchanged(before, envs.sim, "batched")

    central = core_env.CentralCoreEnv(cfg)
    central.reset(seed=seed)
    before = sim_arrays(central.par.sim)
    for bad_joint in (np.zeros(n + 1, dtype=np.int64), np.zeros(n), np.full(n, k + 1),
                      np.full(n, -1), np.zeros((1, n), dtype=np.int64)):
        with pytest.raises(ValueError):
            central.step(bad_joint)
        assert_unchanged(before, central.par.sim, "central")
