"""Per-agent masks and the sequential (autoregressive) masks (SPEC §3 "Observation, mask")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import core_env
from core_env import sequential_mask
from core_env.masks import sequential_masks

from .helpers import SMALL, obs_matrix


# ---------------------------------------------------------------- hand cases
def test_sequential_mask_no_earlier_actions_is_the_mask():
    mask = np.array([1, 1, 0, 1], dtype=np.int8)
    out = sequential_mask(mask, np.array([1, 2, 3]), np.array([], dtype=np.int64))
    assert out.dtype == np.int8
    assert out.tolist() == [1, 1, 0, 1]
    assert sequential_mask(mask, [1, 2, 3], []).tolist() == [1, 1, 0, 1]


def test_sequential_mask_hand_cases():
    mask = np.array([1, 1, 1, 0, 1], dtype=np.int8)
    cap = np.array([1, 2, 3, 2])
    # slot 1 (action 1) used once -> full (cap 1); slot 2 used twice -> full (cap 2);
    # slot 4 used once -> still open (cap 2); slot 3 is masked anyway; idle ignored
    out = sequential_mask(mask, cap, np.array([1, 2, 0, 2, 4, 0]))
    assert out.tolist() == [1, 0, 0, 0, 1]
    # only idles before: nothing changes
    assert sequential_mask(mask, cap, [0, 0, 0]).tolist() == [1, 1, 1, 0, 1]
    # cap 0 (an empty slot decoded from the cap column) is always closed
    assert sequential_mask(np.array([1, 1]), np.array([0]), []).tolist() == [1, 0]
    # the input mask is not modified and bool masks are accepted
    bmask = np.array([True, True, False])
    out = sequential_mask(bmask, np.array([1, 1]), [1])
    assert out.tolist() == [1, 0, 0] and out.dtype == np.int8
    assert bmask.tolist() == [True, True, False]


def test_sequential_mask_idle_always_open():
    mask = np.ones(4, dtype=np.int8)
    out = sequential_mask(mask, np.zeros(3, dtype=np.int64), [1, 2, 3, 1, 2, 3])
    assert out.tolist() == [1, 0, 0, 0]


def test_sequential_mask_batched_leading_dims():
    masks = np.array([[1, 1, 1], [1, 0, 1]], dtype=np.int8)
    caps = np.array([[1, 1], [2, 1]])
    earlier = np.array([[1, 0], [2, 2]])
    out = sequential_mask(masks, caps, earlier)
    assert out.tolist() == [[1, 0, 1], [1, 0, 0]]


def test_sequential_masks_hand_case():
    mask = np.ones((4, 3), dtype=np.int8)
    mask[:, 2] = [1, 1, 0, 1]
    caps = np.array([2, 1])
    actions = np.array([1, 2, 1, 0])
    out = sequential_masks(mask, caps, actions)
    assert out.dtype == np.int8
    assert out.tolist() == [
        [1, 1, 1],  # node 0: nothing chosen before
        [1, 1, 1],  # node 1: slot 1 used once of 2
        [1, 1, 0],  # node 2: slot 2 used once of 1 (and masked anyway)
        [1, 0, 0],  # node 3: slot 1 used twice of 2, slot 2 once of 1
    ]


# ---------------------------------------------------------------- properties
@st.composite
def joint_problem(draw):
    n = draw(st.integers(1, 6))
    k = draw(st.integers(1, 5))
    lead = draw(st.sampled_from([(), (2,), (2, 3)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mask = rng.integers(0, 2, size=lead + (n, k + 1)).astype(np.int8)
    mask[..., 0] = 1
    cap = rng.integers(0, n + 1, size=lead + (k,))
    actions = rng.integers(0, k + 1, size=lead + (n,))
    return mask, cap, actions


@settings(max_examples=150, deadline=None)
@given(joint_problem())
def test_sequential_masks_rows_equal_sequential_mask(problem):
    mask, cap, actions = problem
    out = sequential_masks(mask, cap, actions)
    assert out.shape == mask.shape and out.dtype == np.int8
    n = mask.shape[-2]
    for i in range(n):
        row = sequential_mask(mask[..., i, :], cap, actions[..., :i])
        assert np.array_equal(out[..., i, :], row), i
        # never opens anything the node's own mask forbids, idle always open
        assert np.all(out[..., i, :] <= mask[..., i, :])
        assert np.all(out[..., i, 0] == 1)


@settings(max_examples=150, deadline=None)
@given(joint_problem(), st.integers(0, 2**32 - 1))
def test_decoding_with_sequential_masks_respects_caps(problem, seed):
    mask, cap, _ = problem
    if mask.ndim != 2:
        mask, cap = mask.reshape(-1, *mask.shape[-2:])[0], cap.reshape(-1, cap.shape[-1])[0]
    rng = np.random.default_rng(seed)
    n, k1 = mask.shape
    chosen = []
    for i in range(n):
        m = sequential_mask(mask[i], cap, np.array(chosen, dtype=np.int64))
        chosen.append(int(rng.choice(np.flatnonzero(m))))
    picks = np.bincount(np.array(chosen), minlength=k1)[1:]
    assert np.all(picks <= cap)
    assert all(mask[i, a] == 1 for i, a in enumerate(chosen))


# ---------------------------------------------------------------- in the env
def test_env_masks_int8_idle_always_legal_and_match_present_slots():
    env = core_env.parallel_env(preset=SMALL)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    while env.agents:
        o, m = obs_matrix(env, obs)
        assert m.dtype == np.int8 and m.shape == (4, env.config.cluster.max_visible_tasks + 1)
        assert np.all(m[:, 0] == 1)
        present = o[:, env.layout.task_columns("present")]
        assert np.array_equal(m[:, 1:], present.astype(np.int8))
        obs, *_ = env.step({a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"])))
                            for a in env.agents})


@pytest.mark.parametrize("preset, overrides, seeds", [
    (SMALL, {}, range(4)),
    (SMALL, {"n_nodes": 8, "max_visible_tasks": 3, "load": 3.0}, range(2)),
    ("CoRE-v0", {"arrival_slots": 80}, [0]),
])
def test_sequential_decoding_never_causes_capacity_conflicts(preset, overrides, seeds):
    env = core_env.parallel_env(preset=preset, **overrides)
    rng = np.random.default_rng(1)
    trained = 0
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        while env.agents:
            chosen = []
            for a in env.possible_agents:
                cap = env.layout.capacity(obs[a]["observation"])
                m = sequential_mask(obs[a]["action_mask"], cap, np.array(chosen, dtype=np.int64))
                legal = np.flatnonzero(m)
                # prefer training (idle only 10%) so that caps are actually hit
                busy = legal[legal > 0]
                pick = int(rng.choice(busy)) if busy.size and rng.random() > 0.1 else 0
                chosen.append(pick)
            trained += sum(c > 0 for c in chosen)
            obs, rew, term, trunc, infos = env.step(dict(zip(env.possible_agents, chosen, strict=False)))
        ep = infos["node_0"]["episode"]
        assert ep["capacity_conflicts"] == 0
        assert ep["illegal_actions"] == 0
    assert trained > 50


def test_ignoring_sequential_masks_does_cause_conflicts():
    """Sanity check of the test above: the same greedy policy without the sequential mask
    (every node picks the first visible task) runs into the caps."""
    env = core_env.parallel_env(preset=SMALL, load=3.0)
    obs, _ = env.reset(seed=0)
    while env.agents:
        acts = {}
        for a in env.agents:
            legal = np.flatnonzero(obs[a]["action_mask"])
            acts[a] = int(legal[1]) if legal.size > 1 else 0
        obs, rew, term, trunc, infos = env.step(acts)
    assert infos["node_0"]["episode"]["capacity_conflicts"] > 0


def test_sequential_masks_teacher_forcing_on_env_observations():
    env = core_env.parallel_env(preset=SMALL, load=3.0)
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(2)
    for _ in range(30):
        if not env.agents:
            break
        o, m = obs_matrix(env, obs)
        cap = env.layout.capacity(o[0])
        assert np.array_equal(env.layout.capacity(o), np.broadcast_to(cap, (4, cap.size)))
        actions = np.array([rng.choice(np.flatnonzero(m[i])) for i in range(4)])
        seq = sequential_masks(m, cap, actions)
        for i in range(4):
            assert np.array_equal(seq[i], sequential_mask(m[i], cap, actions[:i]))
        obs, *_ = env.step(dict(zip(env.possible_agents, actions.tolist(), strict=False)))
