"""The real vision learning curves: output contract, progress and determinism on tiny runs,
and first epochs regenerated against the shipped bank ``core_env/data/real-vision.npz``."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn (data preparation only) is not installed")
pytest.importorskip("mnist1d", reason="mnist1d (data preparation only) is not installed")

from tools.data import vision_curves  # noqa: E402
from tools.data.vision_curves import (  # noqa: E402
    HELD_OUT_GROUPS,
    SPECS,
    VARIANTS,
    RunSpec,
    generate,
    train_curve,
)

BANK = Path(__file__).resolve().parents[2] / "core_env" / "data" / "real-vision.npz"

TINY = (
    RunSpec("digits", width=8, depth=2, optimizer="adam", lr=1e-2, batch_size=64,
            weight_decay=1e-4, augment="shift", label_noise=0.1, epochs=2, n_evals=8),
    RunSpec("mnist1d", width=8, depth=2, optimizer="momentum", lr=0.05, batch_size=128,
            weight_decay=0.0, schedule="cosine", augment="noise", epochs=2, n_evals=8),
)


@pytest.mark.parametrize("spec", TINY, ids=lambda s: s.dataset)
def test_curve_contract_progress_and_determinism(spec: RunSpec) -> None:
    first, second = generate([spec, spec], progress=False)
    assert first["group"] == spec.dataset and first["label"] == spec.label
    work, loss = first["work"], first["loss"]
    assert work.dtype == np.float64 and loss.dtype == np.float64
    assert work.shape == loss.shape and 4 <= len(work) <= spec.n_evals
    assert work[0] > 0 and np.all(np.diff(work) > 0)
    assert np.all(np.isfinite(loss)) and np.all(loss > 0)
    assert loss[-1] < loss[0]
    np.testing.assert_array_equal(work, second["work"])
    np.testing.assert_array_equal(loss, second["loss"])


def test_specs_cover_every_variant_with_unique_labels() -> None:
    assert len({s.label for s in SPECS}) == len(SPECS)
    assert {s.dataset for s in SPECS} == set(VARIANTS)
    assert 1 <= len(HELD_OUT_GROUPS) <= 2 and HELD_OUT_GROUPS < set(VARIANTS)


def test_unknown_variant_is_rejected() -> None:
    spec = RunSpec("cifar", width=8, depth=1, optimizer="adam", lr=1e-3, batch_size=32,
                   weight_decay=0.0)
    with pytest.raises(ValueError, match="unknown data-set variant"):
        train_curve(spec)


# One constant-schedule run per variant, retrained for its first epoch only and evaluated at
# the full run's steps: the points must be the shipped bank's first ones. The bank's float32
# sums were taken on another CPU, so they agree to about 1e-7 here, not to the bit.
REGEN = ("digits/w8d2/adam-lr0.022-constant/bs16/wd0/shift/ln0/e30/s13",
         "digits-parity/w32d1/adam-lr0.0022-constant/bs32/wd0.001/noise/ln0.3/e30/s1",
         "mnist1d/w16d3/momentum-lr0.17-constant/bs256/wd0/noise/ln0/e40/s9",
         "mnist1d-noisy/w32d3/adam-lr0.0047-constant/bs256/wd0.0001/shift/ln0/e20/s10",
         "mnist1d-shuffled/w16d3/momentum-lr0.094-constant/bs256/wd0/none/ln0.1/e30/s6")


@pytest.mark.parametrize("label", REGEN, ids=lambda s: s.split("/")[0])
def test_first_epoch_matches_the_shipped_bank(label: str, monkeypatch) -> None:
    spec = next(s for s in SPECS if s.label == label)
    n_train = len(vision_curves._load(spec.dataset).y_train)
    total = spec.epochs * math.ceil(n_train / spec.batch_size)
    full_grid = vision_curves._eval_steps
    monkeypatch.setattr(vision_curves, "_eval_steps", lambda _, n: full_grid(total, n))
    curve = train_curve(dataclasses.replace(spec, epochs=1))
    with np.load(BANK) as b:
        i = b["labels"].tolist().index(label)
        start, k = b["offsets"][i], len(curve["work"])
        work, loss = b["work"][start:start + k], b["loss"][start:start + k]
    assert k >= 10
    np.testing.assert_array_equal(curve["work"], work)
    np.testing.assert_allclose(curve["loss"], loss, rtol=1e-5, atol=0)
