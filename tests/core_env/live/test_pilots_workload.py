"""Pilot sets (core_env.live.pilots) and live workloads (core_env.live.live_workload)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from core_env import CoreSchedulerEnv
from core_env.banks import DATA_DIR, BankError
from core_env.curves import LOG_WORK_GRID
from core_env.live import generate_live_workload, live_config, load_pilots
from core_env.live.live_workload import reference_table
from core_env.live.pilots import PILOTS, fit_alpha
from core_env.workload import draw_arrivals, node_speeds, validate_workload


def test_the_shipped_pilot_set_loads_and_is_listed_with_its_checksum():
    p = load_pilots()
    manifest = json.loads((DATA_DIR / "manifest.json").read_text())["files"][f"{PILOTS}.npz"]
    assert manifest["pilot_runs"] == p.seed.shape[0] and manifest["variants"] == len(p.specs)
    assert np.all((p.alpha > 0) & (p.alpha <= 1))
    assert np.all(np.diff(p.smooth, axis=1) <= 1e-12)


def test_a_pilot_runs_job_reproduces_its_reference_curve():
    pytest.importorskip("sklearn")  # the built-in job's data set (the live extra)
    from core_env.live import make_job

    p = load_pilots()
    job = make_job(p.job(0))
    assert [job.train(1, 1) for _ in range(3)] == pytest.approx(p.loss[0, :3], rel=1e-9)


def test_a_corrupted_or_unlisted_pilot_file_is_refused(tmp_path):
    shutil.copy(DATA_DIR / f"{PILOTS}.npz", tmp_path / f"{PILOTS}.npz")
    shutil.copy(DATA_DIR / "manifest.json", tmp_path / "manifest.json")
    assert load_pilots(data_dir=tmp_path).seed.shape == load_pilots().seed.shape
    raw = bytearray((tmp_path / f"{PILOTS}.npz").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / f"{PILOTS}.npz").write_bytes(bytes(raw))
    with pytest.raises(BankError, match="checksum"):
        load_pilots(data_dir=tmp_path)
    with pytest.raises(BankError, match="missing"):
        load_pilots("nope", data_dir=tmp_path)


def test_fit_alpha_recovers_a_known_law():
    reference = [1.0 / (1.0 + u) for u in range(1, 65)]
    scaled = {k: [1.0 / (1.0 + k ** 0.5 * s) for s in range(1, 65)] for k in (2, 4)}
    est = fit_alpha(reference, scaled)
    assert est and np.allclose(est, 0.5, atol=0.12)


def test_reference_table_interpolates_the_pilot_curve_on_the_grid():
    loss = 1.0 / (1.0 + np.arange(1, 101, dtype=float))
    table = reference_table(1.0, loss)
    w = np.exp(LOG_WORK_GRID)
    inside = (w >= 1) & (w <= 100)
    assert np.allclose(table[inside], -np.log1p(w[inside]), atol=0.02)
    assert np.all(table[w > 100] == np.log(loss[-1]))
    assert table[0] <= 0.0 and table[0] >= np.log(loss[0])  # between 1.0 at 0 and L(1)


def test_live_workloads_are_seeded_valid_and_reachable_at_one_node():
    cfg, p = live_config("Live-v0"), load_pilots()
    a = generate_live_workload(cfg, np.random.default_rng(3), p)
    b = generate_live_workload(cfg, np.random.default_rng(3), p)
    assert a.jobs == b.jobs and np.array_equal(a.workload.log_target, b.workload.log_target)
    validate_workload(a.workload, cfg)
    assert len(a.jobs) == a.workload.n_tasks > 50
    for m in range(a.workload.n_tasks):  # the pilot run reaches the target within s* units
        run = a.pilot_run[m]
        assert p.job(run) == a.jobs[m]
        assert p.loss[run].min() <= np.exp(a.workload.log_target[m]) * (1 + 1e-12)
        assert a.workload.alpha[m] == p.alpha[p.variant_of[run]]
    env = CoreSchedulerEnv(cfg)  # the simulator runs the model workload
    env.reset(seed=0, options={"workload": a.workload})


def test_live_arrivals_follow_the_alibaba_trace_when_asked():
    """``arrivals="alibaba-2018"`` (a flat override, as in the simulator) gives the live
    tasks the simulator's trace arrivals for the same seed, not Poisson's."""
    p = load_pilots()
    trace = live_config("Live-v0", arrivals="alibaba-2018")
    got = generate_live_workload(trace, np.random.default_rng(5), p)
    want = np.random.default_rng(5)
    node_speeds(trace, want)  # the same order of draws: speeds, then arrivals
    assert np.array_equal(got.workload.arrival, draw_arrivals(trace, want))
    poisson = generate_live_workload(live_config("Live-v0"), np.random.default_rng(5), p)
    assert not np.array_equal(got.workload.arrival, poisson.workload.arrival)
    validate_workload(got.workload, trace)
    assert len(got.jobs) == got.workload.n_tasks > 0


# ------------------------------------------------------------------- pilots of your own jobs
COUNTER = "tests.core_env.live.jobs_for_tests:CounterJob"
JOBS = "tests.core_env.live.jobs_for_tests"


def test_pilots_of_your_own_jobs_save_and_load_with_an_honest_manifest(tmp_path):
    from core_env.live import JobSpec, make_pilots

    pilots = make_pilots([JobSpec(COUNTER, {"rate": 0.5}, seed=7), (COUNTER, {"rate": 1.0})],
                         seeds=2, units=12, nodes=(2,))
    assert pilots.specs == ((COUNTER, {"rate": 0.5}), (COUNTER, {"rate": 1.0}))
    assert pilots.seed.tolist() == [0, 1, 0, 1]  # a JobSpec's own seed is not a pilot seed
    assert pilots.about["job_kinds"] == [COUNTER] and pilots.about["units"] == 12
    assert "MIT" not in json.dumps(pilots.about)
    path = pilots.save(tmp_path / "mine" / "pilots.npz")
    for source in (path, str(path)):
        back = load_pilots(source)
        assert back.specs == pilots.specs and back.about == pilots.about
        np.testing.assert_array_equal(back.loss, pilots.loss)
        np.testing.assert_array_equal(back.alpha, pilots.alpha)
    with pytest.raises(ValueError, match="ending in .npz"):
        pilots.save(tmp_path / "pilots")
    with pytest.raises(BankError, match=r"nope\.npz: file missing$"):
        load_pilots(tmp_path / "nope.npz")
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(BankError, match="pilots.npz"):
        load_pilots(path)


@pytest.mark.parametrize("jobs, kwargs, says", [
    ([None], {}, "jobs\\[0\\]: expected a JobSpec or a \\(kind, variant\\) pair"),
    ([], {}, "at least one job variant"),
    ([(COUNTER, {})], {"seeds": 0}, "seeds: expected an integer >= 1"),
    ([(COUNTER, {})], {"units": 0}, "units: expected an integer >= 1"),
    ([(COUNTER, {})], {"nodes": (1,)}, "nodes: expected an integer >= 2"),
    ([(f"{JOBS}:NaNJob", {})], {}, f"pilot of {JOBS}:NaNJob {{}} seed 0: unit 1 gave loss nan"),
    ([(f"{JOBS}:DictStateJob", {})], {}, "save\\(\\) returned dict, expected bytes"),
    ([(f"{JOBS}:ForgetfulJob", {})], {}, "does not continue as the saved one"),
])
def test_bad_pilots_are_refused_naming_the_job_run_and_unit(jobs, kwargs, says):
    from core_env.live import make_pilots

    with pytest.raises(ValueError, match=says):
        make_pilots(jobs, **{"seeds": 1, "units": 4, "nodes": (2,), **kwargs})


def test_an_alpha_that_cannot_be_fitted_is_assumed_with_a_warning():
    from core_env.live import make_pilots

    with pytest.warns(UserWarning, match=r"alpha of .*CounterJob .* could not be fitted"):
        p = make_pilots([(COUNTER, {})], seeds=1, units=4, nodes=(2,), alpha_seeds=0)
    assert p.alpha.tolist() == [1.0] and p.about["alpha_assumed"] == [0]


def test_a_live_preset_takes_overrides_in_its_id():
    assert live_config("Live-Small-v0:load=2").workload.load == 2.0
    assert live_config("Live-Small-v0:load=2") == live_config("Live-Small-v0", load=2.0)
    with pytest.raises(ValueError, match="given both"):
        live_config("Live-Small-v0:load=2", load=3.0)
    with pytest.raises(ValueError, match="preset: expected one of"):
        live_config("CoRE-v0:load=2")
