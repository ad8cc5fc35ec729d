"""Smoke tests of ``mara-train-forecaster`` (a few steps on a tiny model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from mara_agents.forecast import FlowMatchingForecaster, crossing_offsets
from mara_agents.forecast.model import ModelConfig
from mara_agents.forecast.train import TrainConfig, main, parse_args, transform_log_loss

TINY = ["--cases", "400", "--val-cases", "60", "--steps", "6", "--val-every", "3",
        "--batch-size", "32", "--model-enc-hidden", "16", "--model-ctx-dim", "8",
        "--model-hidden", "16", "--model-horizon", "8", "--model-history-len", "4",
        "--sampler-samples", "8", "--sampler-steps", "3", "--sampler-tail-points", "2"]


def _run(tmp_path, name, seed):
    out = tmp_path / name / "fm.pt"
    logs = tmp_path / name / "tb"
    assert main([*TINY, "--seed", str(seed), "--out", str(out), "--log-dir", str(logs),
                 "--no-progress"]) == 0
    return out, logs


def test_tiny_run_logs_and_is_reproducible(tmp_path):
    a, logs = _run(tmp_path, "a", seed=1)
    b, _ = _run(tmp_path, "b", seed=1)
    c, _ = _run(tmp_path, "c", seed=2)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert a.with_suffix(".json").is_file()
    acc = EventAccumulator(str(logs))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/lr", "val/median_abs_log_ratio", "val/coverage",
            "val/spread"} <= tags
    assert len(acc.Scalars("train/loss")) == 6 and len(acc.Scalars("val/coverage")) == 2
    fm = FlowMatchingForecaster.load(a)
    assert fm.config.hidden == 16 and fm.sampler.samples == 8


def test_config_rejects_the_held_out_mix_and_bad_values():
    with pytest.raises(ValueError, match="held-out mix is for evaluation"):
        TrainConfig(mix="held-out")
    with pytest.raises(ValueError, match="prefix"):
        TrainConfig(prefix=(0.5, 0.2))
    with pytest.raises(SystemExit):
        parse_args(["--mix", "held-out"])
    assert parse_args(["--prefix", "0.1", "0.3"]).prefix == (0.1, 0.3)


def test_loss_transform_augmentation_keeps_the_crossing():
    """A monotone loss transform applied to prefix, gap and trajectory keeps the crossing
    (up to the interpolation between grid points); power 1 and offset 0 is the identity,
    and the work and mask columns are untouched."""
    cfg = ModelConfig(history_len=4, horizon=8)
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(5, cfg.feature_dim, generator=g)
    gap = 3 * 4 + 1
    feats[:, gap] = -torch.rand(5, generator=g) - 0.2  # the target is below the current loss
    x1 = torch.cumsum(-torch.rand(5, cfg.horizon, generator=g), dim=1)
    power = torch.tensor([0.5, 1.0, 1.5, 2.0, 0.7])
    offset = torch.tensor([0.0, 0.3, 1.0, 0.0, 2.0])
    f2, x2 = transform_log_loss(feats, x1, power, offset, cfg)
    keep = [i for i in range(cfg.feature_dim) if i not in (*range(1, 12, 3), gap)]
    torch.testing.assert_close(f2[:, keep], feats[:, keep])
    # by hand for row 2: z' = 1.5 ln((e^z + 1) / 2) on z = x * x_scale
    z = feats[2, gap] * cfg.x_scale
    torch.testing.assert_close(f2[2, gap], 1.5 * torch.log((torch.exp(z) + 1) / 2) / cfg.x_scale)
    d1 = crossing_offsets(x1[:, None].numpy(), feats[:, gap].numpy(), cfg.offsets, 2)
    d2 = crossing_offsets(x2[:, None].numpy(), f2[:, gap].numpy(), cfg.offsets, 2)
    inside = np.isfinite(d1) & (d1 <= cfg.offsets[-1])
    assert inside.sum() >= 3
    # the same grid interval crosses; within it the linear interpolation is in the
    # transformed units, so the crossing is exact only for a pure power (offset 0)
    bracket = np.searchsorted(cfg.offsets, d1[inside]), np.searchsorted(cfg.offsets, d2[inside])
    np.testing.assert_array_equal(*bracket)
    pure = inside[:, 0] & (offset.numpy() == 0)
    assert pure.sum() >= 1
    np.testing.assert_allclose(d2[pure], d1[pure], rtol=1e-5)
    ident = transform_log_loss(feats, x1, torch.ones(5), torch.zeros(5), cfg)
    torch.testing.assert_close(ident[0], feats)
    torch.testing.assert_close(ident[1], x1)


def test_real_weight_draws_real_cases_from_the_fit_and_calibration_splits():
    from core_env.banks import REAL_FAMILIES
    from core_env.curves import FAMILIES
    from mara_agents.forecast.calibrate import case_groups
    from mara_agents.forecast.train import draw_cases

    with pytest.raises(ValueError, match="real_weight"):
        TrainConfig(real_weight=1.5)
    cfg = TrainConfig(real_weight=0.25)
    rng = np.random.default_rng(0)
    real = [FAMILIES.index(f) for f in REAL_FAMILIES]
    for mix in ("real-fit", "real-calibration"):
        cases = draw_cases(rng, cfg, 400, real_mix=mix)
        assert np.isin(cases.family, real).sum() == 100
        groups = case_groups(cases)
        assert groups.min() >= 0 and groups.max() < 3 * len(FAMILIES)
    synthetic = draw_cases(np.random.default_rng(0), TrainConfig(), 50)
    assert not np.isin(synthetic.family, real).any()
