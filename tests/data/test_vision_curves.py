"""The real vision learning curves: output contract, progress and determinism on tiny runs."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn (data preparation only) is not installed")
pytest.importorskip("mnist1d", reason="mnist1d (data preparation only) is not installed")

from benchmarks.data.vision_curves import (HELD_OUT_GROUPS, SPECS, VARIANTS,  # noqa: E402
                                           RunSpec, generate, train_curve)

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
