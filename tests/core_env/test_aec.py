"""The AEC env's sequential turns (SPEC §12): each node's action mask is its sequential mask
given the earlier nodes' choices in the slot, so an agent that samples from the masks causes
no capacity conflict (the plain conversion of the parallel env caused about 900 per episode
on CoRE-v0), and the episode is the parallel env's under the same joint actions."""

from __future__ import annotations

import numpy as np
import pettingzoo

import core_env
from core_env.masks import sequential_mask


def play(aec, seed, pick):
    """One episode; returns (joint actions per slot, the final info of node_0)."""
    aec.reset(seed=seed)
    slots, joint, info = [], {}, None
    for agent in aec.agent_iter():
        obs, _, term, trunc, info = aec.last()
        if term or trunc:
            aec.step(None)
            continue
        action = pick(agent, obs)
        joint[agent] = action
        if len(joint) == len(aec.possible_agents):
            slots.append(joint)
            joint = {}
        aec.step(action)
    return slots, info


def test_masked_random_agents_cause_no_conflicts_on_core_v0():
    aec = pettingzoo.make("aec", "core_env/CoRE-v0")
    rng = np.random.default_rng(0)
    _, info = play(aec, 0, lambda a, obs: int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    assert info["episode"]["capacity_conflicts"] == 0 and info["episode"]["illegal_actions"] == 0
    assert info["episode"]["arrived"] > 0


def test_each_mask_is_the_sequential_mask_and_the_episode_the_parallel_one():
    aec = core_env.scheduler_v0.env(preset="CoRE-Small-v0")
    par = core_env.parallel_env(preset="CoRE-Small-v0")
    rng = np.random.default_rng(1)
    seen = []

    def pick(agent, obs):
        seen.append((agent, obs["action_mask"].copy()))
        legal = np.flatnonzero(obs["action_mask"])
        return int(legal[-1] if rng.random() < 0.7 else rng.choice(legal))  # crowd the caps

    slots, info = play(aec, 5, pick)
    obs, _ = par.reset(seed=5)
    masks = iter(m for _, m in seen)
    reduced = 0
    for joint in slots:
        cap = par.layout.capacity(obs["node_0"]["observation"])
        for i, agent in enumerate(par.possible_agents):
            earlier = np.array([joint[a] for a in par.possible_agents[:i]], dtype=np.int64)
            want = sequential_mask(obs[agent]["action_mask"], cap, earlier)
            got = next(masks)
            assert np.array_equal(got, want), (agent, got, want)
            reduced += int((got != obs[agent]["action_mask"]).any())
        obs, *_, infos = par.step(joint)
    assert reduced > 0  # the caps were hit: some masks were narrowed
    assert infos["node_0"]["episode"] == info["episode"]
