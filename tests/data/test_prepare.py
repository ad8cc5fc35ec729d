"""The data-preparation script's pure pieces (tools/data/prepare.py)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from core_env import banks
from core_env.banks import DATA_DIR, load_bank, validate_bank
from tools.data import prepare


def test_clean_curve_drops_bad_points_and_curves():
    w = np.array([1.0, 2.0, 2.0, 4.0, np.nan, 8.0, 16.0, 32.0])
    l = np.array([0.9, 0.8, 0.1, 0.7, 0.5, 0.0, 0.5, 0.4])
    out = prepare.clean_curve(w, l)
    assert out is not None
    cw, cl = out
    np.testing.assert_array_equal(cw, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0])  # repeat keeps first
    np.testing.assert_array_equal(cl, [0.9, 0.8, 0.7, prepare.LOSS_FLOOR, 0.5, 0.4])
    assert prepare.clean_curve([1.0, 2.0, 3.0], [1.0, 0.5, 0.2]) is None  # too few points
    # the best loss comes in the first quarter of the span: no record point late enough
    flat = prepare.clean_curve([1, 2, 4, 8, 16, 32, 64], [1.0, 0.1, 0.5, 0.5, 0.4, 0.3, 0.2])
    assert flat is None


def test_record_point_rule_matches_the_runtime_placement():
    rng = np.random.default_rng(0)
    for _ in range(200):
        w = np.cumsum(rng.uniform(0.5, 3.0, 9))
        l = np.exp(rng.normal(0, 0.3, 9)) * np.linspace(1.0, 0.5, 9)
        bank = {"work": np.r_[w, w], "loss": np.r_[l, l], "smooth": np.r_[l, l],
                "offsets": np.array([0, 9, 18]), "groups": np.array(["a", "b"]),
                "labels": np.array(["x", "y"]), "held_out": np.array([False, True])}
        b = validate_bank("lcdb", DATA_DIR / "x.npz", bank)
        if prepare.has_record_point(w, l):
            assert banks._Placement(b, "train").records[0].size > 0
        else:
            with pytest.raises(banks.BankError, match="no curve"):
                banks._Placement(b, "train")


def test_held_out_groups_are_a_fixed_quarter():
    groups = [f"g{i}" for i in range(40)]
    a = prepare.held_out_groups(groups)
    assert a == prepare.held_out_groups(reversed(groups))  # order does not matter
    assert len(a) == 10 and a <= set(groups)
    assert prepare.held_out_groups(["only"]) == {"only"}


def test_built_bank_passes_validation_and_smooth_is_non_increasing():
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(1)
    curves = []
    for i in range(6):
        w = np.geomspace(1, 100, 12)
        l = 0.1 + w ** -0.5 * np.exp(rng.normal(0, 0.1, 12))
        curves.append({"group": f"g{i % 3}", "label": f"run{i}", "work": w, "loss": l})
    arrays = prepare.build_bank(curves, held_out={"g2"})
    bank = validate_bank("lcdb", DATA_DIR / "x.npz", arrays)
    assert bank.n_curves == 6 and bank.held_out.sum() == 2
    for i in range(bank.n_curves):
        _, loss, smooth = bank.curve(i)
        assert np.all(np.diff(smooth) <= 1e-12)
        # the isotonic fit preserves the mean of log loss
        assert np.mean(np.log(smooth)) == pytest.approx(np.mean(np.log(loss)), abs=1e-9)


@pytest.mark.skipif(importlib.util.find_spec("scan_bench") is None,
                    reason="scan-bench not installed (make data installs it)")
def test_scan_bank_is_reproducible_from_its_source(tmp_path):
    pytest.importorskip("sklearn")
    prepare.main(["--only", "scan", "--out", str(tmp_path)])
    new, shipped = load_bank("scan", tmp_path), load_bank("scan")
    for key in ("work", "loss", "smooth", "offsets", "groups", "labels", "held_out"):
        np.testing.assert_array_equal(getattr(new, key), getattr(shipped, key))


def test_raw_curves_round_trip(tmp_path):
    curves = [{"group": "g", "label": "a", "work": np.array([1.0, 2.0]),
               "loss": np.array([0.5, 0.4])},
              {"group": "h", "label": "b", "work": np.array([3.0, 4.0, 5.0]),
               "loss": np.array([0.9, 0.8, 0.7])}]
    prepare.save_raw(tmp_path / "x.npz", curves)
    back = prepare.load_raw(tmp_path / "x.npz")
    assert [(c["group"], c["label"]) for c in back] == [("g", "a"), ("h", "b")]
    for a, b in zip(curves, back, strict=False):
        np.testing.assert_array_equal(a["work"], b["work"])
        np.testing.assert_array_equal(a["loss"], b["loss"])
