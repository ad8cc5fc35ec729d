"""``observations="blocks"`` in the PettingZoo env and the Gymnasium view (SPEC §12): the
entity view (globals, the node's own features, the task table, the mask), whose task table
is one read-only array shared by every node; the same numbers as the flat vector."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test

import core_env
from core_env.observe import ObsBlocks, assemble

SMALL = "CoRE-Small-v0"


def test_blocks_are_the_flat_observation_split_and_shared():
    full = core_env.parallel_env(preset=SMALL)
    blocks = core_env.parallel_env(preset=SMALL, observations="blocks")
    fo, _ = full.reset(seed=3)
    bo, _ = blocks.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(30):
        a0 = blocks.possible_agents[0]
        for agent in blocks.possible_agents:
            b = bo[agent]
            assert blocks.observation_space(agent).contains(b)
            flat = assemble(ObsBlocks(b["globals"][None], b["node"][None, None],
                                      b["tasks"][None]))[0, 0]
            assert np.array_equal(flat, fo[agent]["observation"])
            assert np.array_equal(b["action_mask"], fo[agent]["action_mask"])
            assert b["tasks"] is bo[a0]["tasks"] and not b["tasks"].flags.writeable
            assert np.array_equal(blocks.task_caps(b), full.task_caps(fo[agent]))
        acts = {a: int(rng.choice(np.flatnonzero(fo[a]["action_mask"])))
                for a in full.possible_agents}
        fo, *_ = full.step(acts)
        bo, *_ = blocks.step(acts)
        if not full.agents:
            break
    with pytest.raises(ValueError, match="observations: expected one of"):
        core_env.parallel_env(preset=SMALL, observations="dict")


def test_blocks_pass_the_api_tests_and_sequential_turns_read_them():
    parallel_api_test(core_env.parallel_env(preset=SMALL, observations="blocks"),
                      num_cycles=100)
    aec = core_env.scheduler_v0.env(preset=SMALL, observations="blocks")
    aec.reset(seed=0)
    rng = np.random.default_rng(0)
    for _agent in aec.agent_iter():
        obs, _, term, trunc, info = aec.last()
        aec.step(None if term or trunc
                 else int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    assert info["episode"]["capacity_conflicts"] == 0


def test_the_gymnasium_view_takes_blocks():
    env = gymnasium.make(f"core_env:core_env/{SMALL}", observations="blocks")
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"globals", "nodes", "tasks", "action_mask"}
    n = env.unwrapped.n_nodes
    assert obs["nodes"].shape[0] == n and obs["action_mask"].shape[0] == n
    full = gymnasium.make(f"core_env:core_env/{SMALL}")
    fobs, _ = full.reset(seed=1)
    state = full.unwrapped.par.state()
    lay = full.unwrapped.par.state_layout
    assert np.array_equal(state[lay.task_block], obs["tasks"].ravel())
    assert np.array_equal(fobs["action_mask"], obs["action_mask"])
