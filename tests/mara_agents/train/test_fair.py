"""MARA-fair's training pieces: the Lagrangian's weights, its dual step, the config's checks,
a widened checkpoint, and a fair run's state across a resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import core_env
from mara_agents.forecast.registry import make_forecaster
from mara_agents.mat.checkpoint import (
    input_columns,
    load_checkpoint,
    model_from_checkpoint,
    shipped,
    widened_model,
)
from mara_agents.mat.inputs import select_inputs
from mara_agents.train.config import PPOConfig
from mara_agents.train.fair import LAMBDA_MAX, TenantLagrangian
from mara_agents.train.recipe import main
from mara_agents.train.rollout import Rollout

SHARES = (0.5, 0.3, 0.2)


def test_the_weighted_completions_are_the_lagrangian():
    """Summed over an episode, the reward is N + sum_g lam_g (N_g / s_g - f N)."""
    fair = TenantLagrangian(SHARES, 0.8, 0.1, 8)
    fair.lam = np.array([0.0, 0.3, 1.2])
    steps = np.random.default_rng(0).integers(0, 3, size=(50, 4, 3))  # [T, B, G]
    total = sum(fair.reward(s) for s in steps)  # [B]
    n_g = steps.sum(axis=0)
    n = n_g.sum(axis=1)
    want = n + (fair.lam * (n_g / np.array(SHARES) - 0.8 * n[:, None])).sum(axis=1)
    assert np.allclose(total, want)
    assert np.allclose(TenantLagrangian(SHARES, 0.8, 0.1, 8).weights(), 1.0)


def test_the_dual_step_raises_a_lagging_tenants_multiplier_only():
    fair = TenantLagrangian(SHARES, 0.8, 0.5, 2)
    assert fair.update() == {}  # no episode yet
    fair.observe(np.array([[50, 30, 20]]), np.array([[45, 24, 8]]))  # overall 0.77
    logs = fair.update()
    assert logs["overall"] == pytest.approx(0.77)
    assert logs["rate_2"] == pytest.approx(0.4)
    assert logs["worst_ratio"] == pytest.approx(0.4 / 0.77)
    # tenant 2's gap 0.8 * 0.77 - 0.4 > 0 raises it; the others are above f x overall
    assert fair.lam[2] == pytest.approx(0.5 * (0.8 * 0.77 - 0.4))
    assert fair.lam[0] == 0 and fair.lam[1] == 0
    w = fair.weights()
    assert w[2] == pytest.approx(1 + fair.lam[2] / 0.2 - 0.8 * fair.lam[2])
    assert w[2] > 1 > w[0] == w[1]
    # the window keeps the last 2 episodes; a met constraint lowers the multiplier to 0
    for _ in range(2):
        fair.observe(np.array([[50, 30, 20]]), np.array([[40, 24, 19]]))
    for _ in range(10):
        fair.update()
    assert fair.lam.tolist() == [0, 0, 0]
    fair.lam[:] = 100.0
    fair.observe(np.array([[10, 10, 10]]), np.array([[10, 10, 0]]))
    fair.update()
    assert fair.lam[2] == LAMBDA_MAX
    again = TenantLagrangian(SHARES, 0.8, 0.5, 2)
    again.load(json.loads(json.dumps(fair.state())))
    assert np.array_equal(again.lam, fair.lam) and again.rates()[1] == fair.rates()[1]


@pytest.mark.parametrize("kwargs, match", [
    ({"fair_fraction": 1.5}, r"fair_fraction: expected a number in \[0.0, 1.0\]"),
    ({"fair_fraction": -0.1}, "fair_fraction"),
    ({"fair_fraction": 0.8, "preset": "CoRE-v0"}, "fair_fraction: .*has no tenants"),
    ({"fair_fraction": 0.8, "shaping_beta": 1.0}, "expected shaping_beta = 0"),
    ({"fair_lr": -1.0}, "fair_lr"),
])
def test_bad_fair_settings_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PPOConfig(**{"preset": "CoRE-Tenants-v0", **kwargs})
    with pytest.raises(ValueError, match="fraction: expected a number in"):
        TenantLagrangian(SHARES, 0.0, 0.1, 4)
    with pytest.raises(ValueError, match="shares"):
        TenantLagrangian((1.0,), 0.5, 0.1, 4)


def test_a_widened_checkpoint_computes_what_it_computed():
    """The shipped MARA, trained before the tenant columns, widened to read them: zero
    weights on them, so the same embeddings and values as the checkpoint on its columns; a
    non-zero tenant weight then changes what it computes."""
    cfg = core_env.make_config("CoRE-Tenants-v0", shaping_beta=0.0)
    roll = Rollout(cfg, 2, make_forecaster("wls", 10, 32))
    roll.reset(0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        roll.step(np.where(rng.random((2, 16)) < 0.5, 0, 1))
    x = roll.inputs()
    blob = load_checkpoint(shipped())
    cols = input_columns(blob, roll.layout)
    assert cols is not None and cols.tasks.size < roll.layout.task_size
    narrow = model_from_checkpoint(blob, roll.layout)
    wide = widened_model(blob, roll.layout)
    with torch.no_grad():
        a = narrow.encode(select_inputs(x, cols))
        b = wide.encode(x)
        assert all(torch.equal(u, v) for u, v in zip(a, b, strict=False))
        lag = [f.name for f in roll.layout.task_features].index("tenant_lag")
        assert x.tasks[..., lag].abs().sum() > 0
        wide.task_in[0].weight[:, lag] = 1.0
        assert not torch.equal(wide.encode(x)[2], b[2])


FAIR = ["--preset", "CoRE-Tenants-v0", "--forecaster", "wls", "--num-envs", "2",
        "--rollout-len", "16", "--minibatches", "2", "--epochs", "1", "--env-steps", "64",
        "--imitation-iters", "0", "--critic-warmup", "1", "--model-d-model", "16",
        "--model-ff", "16", "--checkpoint-every", "1", "--no-progress", "--members", "1",
        "--fair-fraction", "0.9", "--fair-lr", "0.5"]


def test_a_fair_run_keeps_its_multipliers_across_a_resume(tmp_path, monkeypatch):
    from mara_agents.train import trainer as trainer_mod

    # a finished episode per update (real ones take hundreds of slots): tenant 2 lags
    real = trainer_mod.TenantLagrangian.update

    def update(self):
        self.observe(np.array([[10, 10, 10]]), np.array([[9, 9, 2]]))
        return real(self)

    monkeypatch.setattr(trainer_mod.TenantLagrangian, "update", update)
    out = tmp_path / "a"
    assert main([*FAIR, "--out", str(out)]) == 0
    blob = load_checkpoint(out / "last.pt")
    lam = json.loads(blob["fair"])["lambda"]
    assert lam[0] == lam[1] == 0 and lam[2] > 0
    assert blob["train_config"]["fair_fraction"] == 0.9
    assert main([*FAIR, "--env-steps", "96", "--out", str(out),
                 "--resume", str(out / "last.pt")]) == 0
    lam2 = json.loads(load_checkpoint(out / "last.pt")["fair"])["lambda"]
    assert lam2[2] > lam[2]  # went on from the saved multipliers
