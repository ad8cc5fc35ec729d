"""core_env.sequential: the compiled node-by-node decoder against a plain-Python oracle built
on core_env.masks.sequential_mask, its log-probabilities, and zero capacity conflicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core_env import make_batched
from core_env.masks import sequential_mask, sequential_masks
from core_env.sequential import batch_capacity, evaluate, sample, state_capacity


def random_inputs(seed: int, b: int = 5, n: int = 7, k: int = 4):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, (b, n, k + 1))
    mask = (rng.random((b, n, k + 1)) < 0.6).astype(np.int8)
    mask[..., 0] = 1
    cap = rng.integers(0, 4, (b, k))
    return logits, mask, cap, rng.random((b, n))


def oracle(logits, mask, cap, u, greedy=False):
    """One node at a time: its sequential mask, softmax over it, inverse CDF (or arg-max)."""
    b, n, _ = logits.shape
    actions = np.zeros((b, n), dtype=np.int64)
    logp = np.zeros(b)
    for e in range(b):
        for i in range(n):
            m = sequential_mask(mask[e, i], cap[e], actions[e, :i])
            legal = [a for a in range(m.size) if m[a]]
            z = max(logits[e, i, a] for a in legal)
            lse = z + math.log(sum(math.exp(logits[e, i, a] - z) for a in legal))
            if greedy:
                pick = max(legal, key=lambda a: (logits[e, i, a], -a))
            else:
                acc, pick = 0.0, legal[-1]
                for a in legal:
                    acc += math.exp(logits[e, i, a] - lse)
                    if u[e, i] < acc:
                        pick = a
                        break
            actions[e, i] = pick
            logp[e] += logits[e, i, pick] - lse
    return actions, logp


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("greedy", [False, True])
def test_kernel_matches_oracle(seed, greedy):
    logits, mask, cap, u = random_inputs(seed)
    got = sample(logits, mask, cap, u, greedy=greedy)
    want_a, want_lp = oracle(logits, mask, cap, u, greedy)
    np.testing.assert_array_equal(got.actions, want_a)
    np.testing.assert_allclose(got.log_prob, want_lp, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got.masks, sequential_masks(mask, cap, got.actions))


@pytest.mark.parametrize("seed", range(4))
def test_log_prob_equals_teacher_forced_evaluation(seed):
    logits, mask, cap, u = random_inputs(seed, b=9, n=12, k=6)
    logits = logits.astype(np.float32)
    got = sample(logits, mask, cap, u)
    ev = evaluate(logits, mask, cap, got.actions)
    np.testing.assert_array_equal(ev.log_prob, got.log_prob)
    np.testing.assert_array_equal(ev.masks, got.masks)
    # and the sum of each node's log-softmax under the realised masks
    lg = np.where(got.masks > 0, logits.astype(np.float64), -np.inf)
    lsm = lg - np.logaddexp.reduce(lg, axis=-1, keepdims=True)
    per_node = np.take_along_axis(lsm, got.actions[..., None], -1)[..., 0]
    np.testing.assert_allclose(per_node.sum(-1), got.log_prob, rtol=1e-10)


def test_no_capacity_conflicts_on_the_simulator():
    benv = make_batched("CoRE-Small-v0", num_envs=8, seed=3, observations="blocks")
    obs, mask = benv.reset()
    rng = np.random.default_rng(0)
    conflicts = 0
    for t in range(60):
        cap = batch_capacity(benv, obs)
        np.testing.assert_array_equal(state_capacity(benv, benv.states()), cap)
        # a shared actor's failure mode: every node prefers the same task
        logits = np.broadcast_to(rng.normal(0, 3, (8, 1, mask.shape[-1])), mask.shape)
        out = sample(logits, mask, cap, greedy=bool(t % 2), u=rng.random(mask.shape[:2]))
        picks = np.stack([(out.actions == a + 1).sum(1) for a in range(cap.shape[1])], 1)
        conflicts += int(np.maximum(picks - cap, 0).sum())
        assert (np.take_along_axis(mask, out.actions[..., None], -1) == 1).all()
        obs, mask, *_ = benv.step(out.actions)
    assert conflicts == 0


def test_flat_and_block_capacity_agree():
    full = make_batched("CoRE-Small-v0", num_envs=3, seed=1)
    blocks = make_batched("CoRE-Small-v0", num_envs=3, seed=1, observations="blocks")
    a, b = full.reset()[0], blocks.reset()[0]
    for _ in range(20):
        a = full.step(np.ones((3, 4), dtype=np.int64))[0]
        b = blocks.step(np.ones((3, 4), dtype=np.int64))[0]
    assert batch_capacity(full, a).sum() > 0
    np.testing.assert_array_equal(batch_capacity(full, a), batch_capacity(blocks, b))


def test_bad_inputs_are_named():
    logits, mask, cap, u = random_inputs(0)
    with pytest.raises(ValueError, match="capacity"):
        sample(logits, mask, cap[:, :2], u)
    with pytest.raises(ValueError, match="mask"):
        sample(logits, mask[:, :3], cap, u)
    with pytest.raises(ValueError, match="u:"):
        sample(logits, mask, cap)
    bad = mask.copy()
    bad[1, 2] = 0
    with pytest.raises(ValueError, match=r"mask\[1, 2\]"):
        sample(logits, bad, cap, u)
    acts = sample(logits, mask, cap, u).actions
    mask[2, 0, 1:] = 0  # node 0 of env 2 may only idle
    acts[2, 0] = 1
    with pytest.raises(ValueError, match=r"actions\[2, 0\]"):
        evaluate(logits, mask, cap, acts)
