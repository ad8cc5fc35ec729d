"""Stage-1 imitation: oracle columns, the batched teacher, canonical order, DAgger."""

from __future__ import annotations

import numpy as np

import core_env
from mara_agents.mat.checkpoint import wrapped_layout
from mara_agents.policy import make_policy
from mara_agents.train.imitation import BatchedTeacher, canonical_order, oracle_columns, widen


def test_canonical_order_keeps_counts_and_sorts():
    a = np.array([[3, 0, 1, 3, 0, 2], [0, 0, 0, 0, 0, 0]])
    c = canonical_order(a, 5)
    assert c.tolist() == [[1, 2, 3, 3, 0, 0], [0, 0, 0, 0, 0, 0]]
    for row_a, row_c in zip(a, c, strict=False):
        assert sorted(row_a.tolist()) == sorted(row_c.tolist())


def test_batched_oracle_columns_and_teacher_match_the_pettingzoo_oracle_policy():
    """On the same seed, the batched teacher's columns equal the oracle wrapper's (except
    fc_p_reach, which the teacher does not read) and its actions are the oracle_greedy
    policy's, up to the canonical node order."""
    seed, preset = 5, "CoRE-Small-v0"
    base = core_env.parallel_env(preset=preset)
    env, pol = make_policy("oracle_greedy", base)
    obs, _ = env.reset(seed=seed)
    pol.reset(seed)
    benv = core_env.make_batched(preset, 1, seed=[seed])
    bobs, bmask = benv.reset()
    teacher = BatchedTeacher(benv.config, wrapped_layout(benv.layout))
    lay = env.layout
    keep = np.ones(lay.size, dtype=bool)
    keep[lay.task_columns("fc_p_reach")] = False
    keep[lay.node_block] = False  # node identities differ (canonical order), counts do not
    steps = 0
    while env.agents:
        wide = widen(bobs, benv.layout, oracle_columns(benv.sim))
        o = np.stack([obs[a]["observation"] for a in env.possible_agents])
        np.testing.assert_allclose(wide[0][:, keep], o[:, keep], atol=1e-5)
        act = pol.act(obs)
        ref = np.array([[act[a] for a in env.possible_agents]])
        mine = teacher.actions(wide, bmask)
        assert np.array_equal(mine, canonical_order(ref, bmask.shape[-1]))
        obs, *_ = env.step(act)
        bobs, bmask, *_ = benv.step(mine)
        steps += 1
    assert steps > 20
