"""Representation and network of ``mara_agents/forecast/model.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core_env.curves import LOG_WORK_GRID
from core_env.forecast import CurveHistory, HistoryBatch
from mara_agents.forecast.model import (
    FlowForecastNet,
    ModelConfig,
    future_trajectories,
    prefix_features,
)

SMALL = ModelConfig(history_len=4, horizon=8, enc_hidden=16, ctx_dim=8, hidden=16)


def test_prefix_features_by_hand():
    """Task 0: three observations (work 1, 2, 4; loss 1, 0.5, 0.25), L = 4, so one missing row
    first; task 1: never observed (all zeros except n/L = 0)."""
    batch = HistoryBatch.from_histories([
        CurveHistory(np.array([1.0, 2.0, 4.0]), np.array([1.0, 0.5, 0.25])),
        CurveHistory(np.array([]), np.array([]))])
    f = prefix_features(batch, np.log([0.1, 0.1]), SMALL)
    assert f.shape == (2, 3 * 4 + 3) and f.dtype == np.float32
    ln2 = math.log(2.0)
    rows = f[0, :12].reshape(4, 3)
    expected_rows = np.array([[0, 0, 0],
                              [-2 * ln2, 2 * ln2 / 0.5, 1],
                              [-ln2, ln2 / 0.5, 1],
                              [0, 0, 1]])
    np.testing.assert_allclose(rows, expected_rows, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f[0, 12:], [(2 * ln2 - 2.0) / 2.0,
                                           (math.log(0.1) - math.log(0.25)) / 0.5, 3 / 4],
                               rtol=1e-6)
    np.testing.assert_array_equal(f[1], np.zeros(15))


def test_future_trajectories_of_a_power_law():
    """ln l = 1 - 0.5 ln s is linear on the grid, so x_j = -0.5 d_j / x_scale exactly."""
    table = (1.0 - 0.5 * LOG_WORK_GRID)[None, :]
    x_now = np.array([math.log(3.0)])
    x = future_trajectories(table, x_now, 1.0 - 0.5 * x_now, SMALL)
    np.testing.assert_allclose(x[0], -0.5 * SMALL.offsets / SMALL.x_scale, rtol=1e-5)
    assert SMALL.offsets[-1] == pytest.approx(math.log(32.0)) and SMALL.offsets[0] > 0


def test_create_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a = FlowForecastNet.create(SMALL, torch.Generator().manual_seed(3))
    b = FlowForecastNet.create(SMALL, torch.Generator().manual_seed(3))
    c = FlowForecastNet.create(SMALL, torch.Generator().manual_seed(4))
    assert torch.equal(torch.random.get_rng_state(), state)
    for (k, va), vb, _vc in zip(a.state_dict().items(), b.state_dict().values(),
                               c.state_dict().values(), strict=False):
        assert torch.equal(va, vb), k
    assert not torch.equal(a.x_in.weight, c.x_in.weight)


def test_sampler_matches_the_training_velocity():
    """One Euler step of ``sample`` equals x0 + v_theta(0, x0, c) from ``forward``."""
    net = FlowForecastNet.create(SMALL, torch.Generator().manual_seed(0))
    with torch.no_grad():
        net.out.weight.normal_(generator=torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(2)
    feats = torch.randn(3, SMALL.feature_dim, generator=g)
    x0 = torch.randn(3, 5, SMALL.horizon, generator=g)
    with torch.no_grad():
        out = net.sample(feats, x0, steps=1)
        v = net(torch.zeros(15), x0.reshape(15, -1), feats.repeat_interleave(5, dim=0))
    torch.testing.assert_close(out, x0 + v.reshape(3, 5, -1))
    with pytest.raises(ValueError, match="solver"):
        net.sample(feats, x0, steps=2, solver="rk4")


def test_config_validation():
    with pytest.raises(ValueError, match="hidden"):
        ModelConfig(hidden=0)
    with pytest.raises(ValueError, match="unknown"):
        ModelConfig.from_dict({**SMALL.to_dict(), "width": 3})
    assert ModelConfig.from_dict(SMALL.to_dict()) == SMALL
