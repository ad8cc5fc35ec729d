"""The SB3 learning-curve bank: loss normalisation, the spec list, and one curve regenerated
(shortened to its first points) against the shipped bank ``core_env/data/sb3-rl.npz``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from tools.data.rl_curves import (  # noqa: E402  (after the optional-extra check)
    HELD_OUT_GROUPS,
    LOSS_FLOOR,
    RETURN_RANGE,
    SPECS,
    RunSpec,
    normalised_loss,
    train_curve,
)

BANK = Path(__file__).resolve().parents[2] / "core_env" / "data" / "sb3-rl.npz"

# The regenerated curve: CartPole A2C, base configuration, seed 0, its first K points
# (K * 3,200 = 25,600 timesteps, a few seconds on one thread).
REGEN_SPEC = next(s for s in SPECS if s.env_id == "CartPole-v1" and s.algo == "a2c")
K = 8


@pytest.fixture(scope="module")
def short_curve() -> dict[str, Any]:
    """The first ``K`` points of ``REGEN_SPEC``, trained here (torch's thread count, which
    ``train_curve`` sets to 1, is restored afterwards)."""
    import torch

    threads = torch.get_num_threads()
    try:
        return train_curve(dataclasses.replace(REGEN_SPEC,
                                               total_timesteps=K * REGEN_SPEC.eval_every))
    finally:
        torch.set_num_threads(threads)


def test_loss_normalisation_and_floor() -> None:
    """Gap normalised by the per-env range, clipped below at the floor, no ceiling."""
    np.testing.assert_allclose(normalised_loss(np.array([0.0, 250.0, 495.0]), "CartPole-v1"),
                               [1.0, 0.5, 0.01], rtol=1e-12)
    assert normalised_loss(np.array([500.0, 650.0]), "CartPole-v1").tolist() == [LOSS_FLOOR] * 2
    np.testing.assert_allclose(normalised_loss(np.array([-500.0, -280.0]), "Acrobot-v1"),
                               [1.0, 0.5], rtol=1e-12)
    worst, best = RETURN_RANGE["Pendulum-v1"]
    np.testing.assert_allclose(
        normalised_loss(np.array([worst, best, 2 * worst - best]), "Pendulum-v1"),
        [1.0, LOSS_FLOOR, 2.0], rtol=1e-12)


def test_specs_and_split() -> None:
    """Unique labels, 3 envs x 2 algorithms, >= 15 points a run, one env held out."""
    labels = [s.label for s in SPECS]
    assert len(set(labels)) == len(labels)
    assert 40 <= len(SPECS) <= 70
    assert {(s.env_id, s.algo) for s in SPECS} == {
        (e, a) for e in RETURN_RANGE for a in ("ppo", "a2c")}
    assert all(s.total_timesteps // s.eval_every >= 15 for s in SPECS)
    groups = {s.env_id for s in SPECS}
    assert len(HELD_OUT_GROUPS) == 1 and HELD_OUT_GROUPS < groups


def test_runspec_rejects_missing_ppo_fields() -> None:
    """PPO needs batch_size and n_epochs; A2C takes neither."""
    fields = dict(env_id="CartPole-v1", seed=0, total_timesteps=1000, eval_every=100, n_envs=1,
                  learning_rate=1e-3, n_steps=8, gamma=0.99, gae_lambda=0.95)
    with pytest.raises(ValueError, match="batch_size"):
        RunSpec(algo="ppo", **fields)
    with pytest.raises(ValueError, match="batch_size"):
        RunSpec(algo="a2c", batch_size=8, n_epochs=1, **fields)


def test_train_curve_format(short_curve: dict[str, Any]) -> None:
    """Group, label, K points on the eval grid, strictly increasing work, loss >= floor."""
    assert short_curve["group"] == "CartPole-v1"
    assert short_curve["label"] == REGEN_SPEC.label
    work, loss = short_curve["work"], short_curve["loss"]
    assert work.dtype == loss.dtype == np.float64
    np.testing.assert_array_equal(work, REGEN_SPEC.eval_every * np.arange(1, K + 1))
    assert np.all(np.isfinite(loss)) and np.all(loss >= LOSS_FLOOR) and np.all(loss <= 1.0)
    assert loss[-1] < loss[0]  # the base A2C learns within 25,600 steps


def test_regenerated_curve_matches_bank(short_curve: dict[str, Any]) -> None:
    """The shipped bank holds curves of SPECS, in SPECS order (the data-preparation step may
    drop some), and its REGEN_SPEC curve starts with the points regenerated here (same
    machine class: bit-identical, checked to 1e-9)."""
    if not BANK.exists():
        pytest.skip(f"{BANK.relative_to(BANK.parents[2])} not shipped yet")
    with np.load(BANK) as bank:
        work, loss, offsets, labels = (bank["work"], bank["loss"], bank["offsets"],
                                       bank["labels"].tolist())
    order = {s.label: i for i, s in enumerate(SPECS)}
    assert all(label in order for label in labels), "bank built from other SPECS: rebuild it"
    assert [order[label] for label in labels] == sorted(order[label] for label in labels)
    assert offsets[0] == 0 and offsets[-1] == len(work) == len(loss)
    for a, b in zip(offsets[:-1], offsets[1:], strict=False):
        assert work[a] > 0 and np.all(np.diff(work[a:b]) > 0)
    assert np.all(np.isfinite(loss)) and np.all(loss >= LOSS_FLOOR)
    start = offsets[labels.index(REGEN_SPEC.label)]
    np.testing.assert_allclose(short_curve["work"], work[start:start + K], rtol=1e-9, atol=0)
    np.testing.assert_allclose(short_curve["loss"], loss[start:start + K], rtol=1e-9, atol=0)
