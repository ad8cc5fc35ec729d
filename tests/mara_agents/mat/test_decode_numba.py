"""The compiled greedy decoding loop against the numpy loop it replaces (same actions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("numba")

import core_env  # noqa: E402
from mara_agents.mat import numpy_infer  # noqa: E402
from mara_agents.mat._decode_numba import _np_sum  # noqa: E402
from mara_agents.mat.numpy_infer import NumpyEnsemble, NumpyMAT  # noqa: E402
from mara_agents.policy import make_policy  # noqa: E402
from tests.mara_agents.mat.test_model import _model, _random_inputs  # noqa: E402


@pytest.mark.parametrize("width", [1, 5, 7, 8, 9, 16, 23, 40, 129, 300, 1000])
def test_sum_is_numpys_sum_bit_for_bit(width):
    rng = np.random.default_rng(width)
    x = (rng.standard_normal((200, width)) * rng.uniform(0.01, 100.0, (200, 1))).astype(
        np.float32)
    mine = np.array([_np_sum(np.ascontiguousarray(r)) for r in x], dtype=np.float32)
    assert np.array_equal(mine.view(np.int32), x.sum(-1).view(np.int32))


def _pointer_parts(fast: NumpyMAT, x):
    h, tok, _ = fast.encode(x.glob.numpy(), x.nodes.numpy(), x.tasks.numpy())
    qk = (h @ fast.wq + fast.bq) @ (tok @ fast.wk + fast.bk).transpose(0, 2, 1)
    qk /= np.float32(np.sqrt(fast.d))
    return qk, h @ fast.wa + fast.ba, tok @ fast.wat


def test_compiled_loop_equals_the_numpy_loop_on_random_inputs():
    x = _random_inputs(256, seed=21)
    fast = NumpyMAT(_model(seed=3))
    qk, a_node, a_tok = _pointer_parts(fast, x)
    mask, speed, cap = x.mask.numpy(), x.speed.numpy(), x.cap.numpy()
    differ = 0
    for e in range(qk.shape[0]):
        ref = fast.decode_numpy(qk[e], a_node[e], a_tok[e], mask[e], speed[e], cap[e])
        got = fast._decode_one(qk[e], a_node[e], a_tok[e], mask[e], speed[e], cap[e])
        assert got.dtype == np.int64 and got.shape == ref.shape
        assert mask[e][np.arange(len(got)), got].all()
        differ += int((got != ref).any())
    assert differ == 0


def test_compiled_ensemble_equals_the_numpy_loop():
    x = _random_inputs(64, seed=5)
    ens = NumpyEnsemble([_model(seed=s) for s in range(3)])
    got = ens.act(x)
    numpy_infer_decode = ens.decoder._decode_one
    try:  # the same ensemble with the numpy loop
        ens.decoder._decode_one = ens.decoder.decode_numpy
        ref = ens.act(x)
    finally:
        ens.decoder._decode_one = numpy_infer_decode
    assert numpy_infer.DECODER == "numba"
    assert np.array_equal(got, ref)


def test_shipped_mara_decodes_the_same_at_64_nodes(monkeypatch):
    """Every decision of a CoRE-64-v0 episode, compiled and numpy, from the same inputs."""
    env, pol = make_policy("mara", core_env.parallel_env(preset="CoRE-64-v0"))
    torch.set_num_threads(1)
    seen = {"calls": 0, "differ": 0}
    compiled = NumpyMAT._decode_one

    def both(self, *parts):
        ref = self.decode_numpy(*parts)
        got = compiled(self, *parts)
        seen["calls"] += 1
        seen["differ"] += int((ref != got).sum())
        return got

    monkeypatch.setattr(NumpyMAT, "_decode_one", both)
    obs, _ = env.reset(seed=4)
    for _ in range(60):
        obs, _, term, trunc, _ = env.step(pol.act(obs))
        if not env.agents:
            break
    assert seen["calls"] >= 30 and seen["differ"] == 0
