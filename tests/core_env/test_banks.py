"""Real curve banks, real families and the real arrival trace (core_env.banks, SPEC §6)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import core_env
from core_env import banks
from core_env.banks import (
    DATA_DIR,
    REAL_FAMILIES,
    BankError,
    CurveBank,
    load_bank,
    load_trace,
    place_curves,
    trace_arrivals,
    validate_bank,
)
from core_env.curves import FAMILIES, GRID_STEP, LOG_WORK_GRID, MIXES, first_crossing
from core_env.workload import generate_workload


def bank_arrays(bank: CurveBank) -> dict[str, np.ndarray]:
    return {"work": bank.work.copy(), "loss": bank.loss.copy(), "smooth": bank.smooth.copy(),
            "offsets": bank.offsets.copy(), "groups": bank.groups.copy(),
            "labels": bank.labels.copy(), "held_out": bank.held_out.copy()}


@pytest.mark.parametrize("name", REAL_FAMILIES)
def test_shipped_bank_loads_and_is_listed_in_the_manifest(name):
    bank = load_bank(name)
    manifest = json.loads((DATA_DIR / "manifest.json").read_text())["files"][f"{name}.npz"]
    assert bank.n_curves == manifest["curves"]
    assert int(bank.held_out.sum()) == manifest["held_out_curves"]
    assert sorted(set(bank.groups[bank.held_out].tolist())) == manifest["held_out_groups"]
    assert manifest["licence"] and manifest["source"]


@pytest.mark.parametrize("name", REAL_FAMILIES)
def test_split_is_by_group_and_disjoint(name):
    bank = load_bank(name)
    train, held = bank.split("train"), bank.split("held-out")
    assert train.size > 0 and held.size > 0
    assert np.intersect1d(train, held).size == 0
    assert train.size + held.size == bank.n_curves
    assert not set(bank.groups[train].tolist()) & set(bank.groups[held].tolist())


@pytest.mark.parametrize("name", REAL_FAMILIES)
@pytest.mark.parametrize("split", ["train", "held-out"])
def test_placement_of_a_split_uses_only_that_split(name, split):
    bank = load_bank(name)
    p = banks._placement(name, split)
    assert set(p.index.tolist()) <= set(bank.split(split).tolist())
    assert len(p.index) >= 0.5 * bank.split(split).size  # most curves carry a target
    for k in (0, len(p.index) - 1):
        np.testing.assert_allclose(np.exp(p.x[k]), bank.curve(int(p.index[k]))[0], rtol=1e-12)


def test_bad_bank_arrays_are_named():
    bank = load_bank("lcdb")
    cases = {
        "work": lambda a: a["work"].__setitem__(3, a["work"][2]),  # not increasing
        "loss": lambda a: a["loss"].__setitem__(5, np.nan),
        "smooth": lambda a: a["smooth"].__setitem__(0, -1.0),
        "offsets": lambda a: a["offsets"].__setitem__(-1, a["offsets"][-1] + 1),
        "labels": lambda a: a["labels"].__setitem__(1, a["labels"][0]),
    }
    for _what, corrupt in cases.items():
        arrays = bank_arrays(bank)
        corrupt(arrays)
        with pytest.raises(BankError, match="lcdb.npz"):
            validate_bank("lcdb", bank.path, arrays)
    arrays = bank_arrays(bank)
    arrays["held_out"][:] = False
    with pytest.raises(BankError, match="both the train and the held-out"):
        validate_bank("lcdb", bank.path, arrays)
    arrays = bank_arrays(bank)
    g = arrays["groups"][arrays["held_out"]][0]
    arrays["held_out"][np.flatnonzero(arrays["groups"] == g)[0]] = False
    with pytest.raises(BankError, match="in both splits"):
        validate_bank("lcdb", bank.path, arrays)


def copy_data(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(DATA_DIR, d)
    return d


def test_truncated_or_corrupted_file_gives_an_error_naming_it(tmp_path):
    d = copy_data(tmp_path)
    assert load_bank("scan", d).n_curves == load_bank("scan").n_curves
    raw = (d / "scan.npz").read_bytes()
    (d / "scan.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BankError, match="scan.npz.*(checksum|corrupted|truncated)"):
        load_bank("scan", d)
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0xFF
    (d / "scan.npz").write_bytes(bytes(flipped))
    with pytest.raises(BankError, match="scan.npz"):
        load_bank("scan", d)
    (d / "manifest.json").unlink()  # without the checksum the zip CRC still catches it
    with pytest.raises(BankError, match="scan.npz"):
        load_bank("scan", d)
    (d / "scan.npz").unlink()
    with pytest.raises(BankError, match="scan.npz: file missing"):
        load_bank("scan", d)
    with pytest.raises(ValueError, match="bank: expected one of"):
        load_bank("imagenet")


def test_corrupted_trace_is_named(tmp_path):
    d = copy_data(tmp_path)
    path = d / "alibaba-2018-arrivals.npz"
    raw = path.read_bytes()
    path.write_bytes(raw[:100])
    with pytest.raises(BankError, match="alibaba-2018-arrivals.npz"):
        load_trace(data_dir=d)


@pytest.mark.parametrize("name", REAL_FAMILIES)
def test_tasks_need_the_work_their_bank_curve_needs(name):
    """Each task replays a bank curve rescaled so that a record point lies at s*: the
    tabulated observed loss equals the bank curve at the grid points, the target is a loss
    the curve reaches, and the work it needs is s* up to one grid step."""
    rng = np.random.default_rng(7)
    n = 300
    s_star = np.exp(rng.uniform(np.log(4.0), np.log(160.0), n))
    pick = rng.random((n, 2))
    true_ll, obs_ll, log_target = place_curves(name, "train", np.log(s_star), pick,
                                               LOG_WORK_GRID)
    p = banks._placement(name, "train")
    need = first_crossing(obs_ll, log_target)
    assert np.all(np.isfinite(need))
    assert np.all(need <= s_star * np.exp(GRID_STEP) * (1 + 1e-6))
    assert np.median(need / s_star) == pytest.approx(1.0, abs=np.exp(GRID_STEP) - 1)
    for t in range(0, n, 15):
        c = min(int(pick[t, 0] * len(p.x)), len(p.x) - 1)
        rec = p.records[c]
        r = rec[min(int(pick[t, 1] * rec.size), rec.size - 1)]
        scale = s_star[t] / np.exp(p.x[c][r])  # bank work -> node-slots
        work, loss = np.exp(p.x[c]) * scale, np.exp(p.y[c])
        inside = (LOG_WORK_GRID >= np.log(work[0])) & (LOG_WORK_GRID <= np.log(work[-1]))
        expect = np.interp(LOG_WORK_GRID[inside], np.log(work), np.log(loss))
        np.testing.assert_allclose(obs_ll[t, inside], expect, atol=1e-5)
        # the bank curve itself is at the target by the grid point where the simulator
        # says the task is done
        g = LOG_WORK_GRID[np.searchsorted(LOG_WORK_GRID, np.log(need[t]) - 1e-9)]
        assert np.interp(g, np.log(work), np.log(loss)) <= log_target[t] + 1e-5
        # ... and the target is no lower than the curve gets within a grid step past s*
        upto = work <= s_star[t] * np.exp(GRID_STEP)
        reach = np.interp(np.log(s_star[t]) + GRID_STEP, np.log(work), np.log(loss))
        assert log_target[t] >= min(np.log(loss[upto]).min(), reach) - 1e-5
    assert true_ll.dtype == np.float32 and np.all(np.isfinite(true_ll))


def test_real_mixes_draw_every_real_family_and_only_those():
    cfg = core_env.make_config("CoRE-Real-v0")
    fams = np.concatenate([generate_workload(cfg, np.random.default_rng(s)).family
                           for s in range(5)])
    names = set(np.asarray(FAMILIES)[fams].tolist())
    assert names == set(REAL_FAMILIES)
    assert {p.split for p, _ in MIXES["real-held-out"]} == {"held-out"}


def test_real_workload_is_deterministic_and_synthetic_streams_are_unchanged():
    cfg = core_env.make_config("CoRE-RealTrace-v0")
    a = generate_workload(cfg, np.random.default_rng(3))
    b = generate_workload(cfg, np.random.default_rng(3))
    for x, y in zip(a, b, strict=False):
        np.testing.assert_array_equal(x, y)
    # a real mix does not change the synthetic mixes' draws (same arrivals and s* stream)
    syn = generate_workload(core_env.make_config("CoRE-v0"), np.random.default_rng(3))
    real = generate_workload(core_env.make_config("CoRE-Real-v0"), np.random.default_rng(3))
    np.testing.assert_array_equal(syn.arrival, real.arrival)
    np.testing.assert_array_equal(syn.deadline, real.deadline)


@pytest.mark.parametrize("rate", [0.65, 1.3, 9.0])
def test_trace_thinning_hits_the_requested_rate(rate):
    rng = np.random.default_rng(0)
    slots = 200
    counts = [trace_arrivals(rng, rate, slots).size for _ in range(300)]
    assert np.mean(counts) == pytest.approx(rate * slots, rel=0.02)
    arr = trace_arrivals(np.random.default_rng(1), rate, slots)
    assert arr.dtype == np.int64 and np.all(np.diff(arr) >= 0)
    assert arr.min() >= 0 and arr.max() < slots


def test_trace_arrivals_are_bursty_and_poisson_ones_are_not():
    trace = load_trace()
    per_min = np.bincount(trace.arrival_s // 60)[:60]
    assert per_min.var() / per_min.mean() > 30  # the raw hour (SPEC: about 74)
    rng = np.random.default_rng(0)
    ratios = []
    for _ in range(100):
        per_slot = np.bincount(trace_arrivals(rng, 0.65, 200), minlength=200)
        ratios.append(per_slot.var() / per_slot.mean())
    pois = [np.var(c) / np.mean(c) for c in rng.poisson(0.65, size=(100, 200))]
    assert np.median(ratios) > 3 * np.median(pois)


def test_trace_capacity_holds_the_burstiest_episodes():
    cfg = core_env.make_config("CoRE-RealTrace-v0", load=2.0)
    assert banks.trace_max_burst() == 45
    rng = np.random.default_rng(5)
    counts = [trace_arrivals(rng, cfg.workload.arrival_rate, cfg.workload.arrival_slots).size
              for _ in range(2000)]
    mean, sd = np.mean(counts), np.std(counts)
    assert cfg.workload.max_tasks >= mean + 10 * sd
    assert max(counts) < cfg.workload.max_tasks


def test_trace_preset_uses_the_trace_and_bad_arrivals_are_rejected():
    cfg = core_env.make_config("CoRE-RealTrace-v0")
    assert cfg.workload.arrivals == "alibaba-2018"
    assert cfg.workload.mix == "real-held-out"
    with pytest.raises(ValueError, match="arrivals: expected one of"):
        core_env.make_config("CoRE-v0", arrivals="weibull")


@pytest.mark.parametrize("preset", ["CoRE-Real-v0", "CoRE-RealTrace-v0"])
def test_real_presets_run_through_the_pettingzoo_api(preset):
    env = core_env.parallel_env(preset=preset)
    obs, infos = env.reset(seed=0)
    done = False
    rng = np.random.default_rng(0)
    while not done:
        acts = {}
        for a in env.agents:
            mask = obs[a]["action_mask"]
            acts[a] = int(rng.choice(np.flatnonzero(mask)))
        obs, rew, term, trunc, infos = env.step(acts)
        done = not env.agents or all(term.values()) or all(trunc.values())
    stats = next(iter(infos.values()))["episode"]
    assert stats["arrived"] > 0


@pytest.mark.parametrize("name", REAL_FAMILIES)
def test_fit_and_calibration_partition_the_train_split(name):
    bank = load_bank(name)
    fit, cal, train = bank.split("fit"), bank.split("calibration"), bank.split("train")
    assert cal.size > 0 and fit.size > cal.size
    assert np.array_equal(np.sort(np.r_[fit, cal]), train) and not np.intersect1d(fit, cal).size
    assert not np.intersect1d(train, bank.split("held-out")).size
