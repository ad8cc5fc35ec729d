"""The live env (core_env.live.env): the simulator's contract over real jobs."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pettingzoo
import pytest

import core_env  # noqa: F401  (registers the presets)
from core_env import CoreSchedulerEnv, pmath
from core_env.curves import LOG_WORK_GRID
from core_env.live import (
    LiveRecord,
    LiveSchedulerEnv,
    make_pilots,
    record_pilots,
    replay,
    validate_pilots,
)
from core_env.live.env import SLOT_TIMES
from core_env.live.jobs import JobSpec
from core_env.testing import check_env

COUNTER = "tests.core_env.live.jobs_for_tests:CounterJob"
JOBS = "tests.core_env.live.jobs_for_tests"


@pytest.fixture(scope="module")
def pilots():
    return make_pilots([(COUNTER, {"rate": 0.5}), (COUNTER, {"rate": 1.0})], seeds=2,
                       units=48, nodes=(2,))


@pytest.fixture(scope="module")
def runtime(make_runtime):
    with make_runtime(4, time_limit=20.0) as rt:
        yield rt


def make(pilots, runtime, **kw):
    return LiveSchedulerEnv(preset="Live-Small-v0", pilots=pilots, runtime=runtime, **kw)


def play(env, seed, policy=None, hook=None):
    """Play an episode with a seeded masked-random policy (or ``policy(obs)``); returns
    (actions per step, final infos)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    actions, infos = [], {}
    while env.agents:
        if hook is not None:
            hook(env, len(actions))
        acts = (policy(obs) if policy is not None else
                {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()})
        actions.append(acts)
        obs, _, _, _, infos = env.step(acts)
    return actions, infos


def test_pilots_of_a_counter_job_give_reachable_targets_and_alpha_one(pilots):
    assert np.allclose(pilots.alpha, 1.0)  # k nodes add exactly k units of work
    for run in range(pilots.seed.shape[0]):
        rate = pilots.specs[pilots.variant_of[run]][1]["rate"]
        u = np.arange(1, pilots.units + 1)
        assert np.allclose(pilots.loss[run], 1.0 / (1.0 + rate * u + pilots.seed[run]))
        assert pilots.target(run, 7.2) == pytest.approx(pilots.loss[run, 7])  # by unit 8


def test_check_env_and_pettingzoo_api_tests_pass(pilots, runtime):
    report = check_env(lambda: make(pilots, runtime), seeds=(0,), num_cycles=60)
    assert "parallel_seed_test" in report.pettingzoo_tests and report.steps > 0


def test_registered_live_presets_build_without_starting_workers():
    env = pettingzoo.make("parallel", "core_env/Live-v0")
    assert isinstance(env, LiveSchedulerEnv)
    assert env.runtime is None and env.config.cluster.n_nodes == 16
    aec = pettingzoo.make("aec", "core_env/Live-Small-v0")
    assert aec.possible_agents == [f"node_{i}" for i in range(4)]
    env.close()


def test_losses_are_the_jobs_real_losses_and_no_progress_is_lost(pilots, runtime):
    env = make(pilots, runtime)
    play(env, 3)
    rec = env.record
    assert rec.obs, "the episode trained nothing"
    for m in {o[0] for o in rec.obs}:
        spec = rec.jobs[m]
        rows = [o for o in rec.obs if o[0] == m]
        done = np.cumsum([o[2] for o in rows]) * spec.variant["rate"]
        assert [o[4] for o in rows] == pytest.approx(1.0 / (1.0 + done + spec.seed))
    # the observation's work column is the model's k**alpha work (alpha = 1 here)
    assert all(o[3] == pytest.approx(np.sum([r[2] for r in rec.obs if r[0] == o[0]
                                             and r[1] <= o[1]])) for o in rec.obs)


def test_episode_timing_splits_the_slots_into_training_packing_and_overhead(pilots, runtime):
    env = make(pilots, runtime)
    summed = dict.fromkeys(("slot",) + SLOT_TIMES, 0.0)
    rng = np.random.default_rng(4)
    obs = env.reset(seed=4)[0]
    while env.agents:
        acts = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        obs = env.step(acts)[0]
        for k, v in env.slot_timing.items():
            summed[k] += v
    timing = env.episode_timing()
    assert timing["train_cpu"] > 0, "the episode trained nothing"
    for k, v in summed.items():
        assert timing[k] == pytest.approx(v), k
    # the overhead-free time of the dispatch is at least the lower bound; what is left of
    # the slots' wall time is the runtime's own
    assert timing["train_makespan"] <= timing["train_ideal"] + 1e-12
    assert timing["overhead_fraction"] == pytest.approx(
        1 - timing["train_ideal"] / timing["slot"])
    assert timing["packing_fraction"] == pytest.approx(
        (timing["train_ideal"] - timing["train_makespan"]) / timing["slot"])


def test_sigkilled_worker_loses_only_its_slot_and_its_node_is_masked(pilots, runtime):
    env = make(pilots, runtime)
    seen = {}

    def kill(env, t):
        if t == 2:
            os.kill(env.runtime.pid(0), signal.SIGKILL)
            os.waitpid(env.runtime.pid(0), 0) if False else None

    def all_on_first(obs):  # every node on the first visible task: node 0 leads it
        mask = obs["node_0"]["action_mask"]
        first = int(np.flatnonzero(mask[1:])[0]) + 1 if mask[1:].any() else 0
        if env.agents and env.sim.t[0] == 3:
            seen["mask_after"] = obs["node_0"]["action_mask"].copy()
        return {a: (first if o["action_mask"][first] else 0) for a, o in obs.items()}

    _, infos = play(env, 5, policy=all_on_first, hook=kill)
    stats = infos["node_0"]["episode"]
    assert stats["worker_deaths"] == 1 and stats["lost_slots"] == 1
    assert seen["mask_after"].tolist() == [1] + [0] * (len(seen["mask_after"]) - 1)
    assert all(env.runtime.alive)
    rec = env.record  # every job's losses still follow its whole credited history
    for m in {o[0] for o in rec.obs}:
        rows = [o for o in rec.obs if o[0] == m]
        done = np.cumsum([o[2] for o in rows]) * rec.jobs[m].variant["rate"]
        assert [o[4] for o in rows] == pytest.approx(1.0 / (1.0 + done + rec.jobs[m].seed))


@pytest.mark.parametrize("kind,error", [("RaisingJob", "job raised RuntimeError: diverged"),
                                        ("NaNJob", "non-finite loss nan"),
                                        ("SleepJob", "time limit 2 s exceeded")])
def test_a_failing_job_is_marked_failed_and_the_episode_goes_on(pilots, kind, error):
    env = make(pilots, None, time_limit=2.0)
    try:
        env.reset(seed=1)
        live = env.live
        jobs = list(live.jobs)
        jobs[0] = JobSpec(f"{JOBS}:{kind}", {}, 0)
        env.reset(seed=1, options={"live_workload": live._replace(jobs=tuple(jobs))})
        obs = env._observations()
        steps = 0
        while env.agents:
            acts = {a: int(np.flatnonzero(o["action_mask"])[-1]) for a, o in obs.items()}
            acts["node_0"] = 1 if obs["node_0"]["action_mask"][1] and steps == 0 else 0
            obs, _, _, _, infos = env.step(acts)
            steps += 1
        stats = infos["node_0"]["episode"]
        assert env.failures == {0: error}
        assert stats["failed"] == 1
        assert stats["completed"] + stats["expired"] == stats["arrived"]
        assert not any(o[0] == 0 for o in env.record.obs)
    finally:
        env.close()


def test_migration_moves_the_state_and_is_counted(pilots, runtime):
    env = make(pilots, runtime)
    flip = {"n": 0}

    def alternate(obs):  # one task, alternately on node 0 and node 1
        mask = obs["node_0"]["action_mask"]
        acts = {a: 0 for a in obs}
        if mask[1]:
            acts["node_0" if flip["n"] % 2 == 0 else "node_1"] = 1
        flip["n"] += 1
        return acts

    _, infos = play(env, 2, policy=alternate)
    stats = infos["node_0"]["episode"]
    assert stats["migrations"] > 0 and stats["migration_bytes"] > 0
    rec = env.record
    for m in {o[0] for o in rec.obs}:
        rows = [o for o in rec.obs if o[0] == m]
        done = np.cumsum([o[2] for o in rows]) * rec.jobs[m].variant["rate"]
        assert [o[4] for o in rows] == pytest.approx(1.0 / (1.0 + done + rec.jobs[m].seed))


def test_same_seed_same_losses_with_a_real_job(runtime):
    pytest.importorskip("sklearn")
    variant = {"hidden": 8, "batch": 16, "unit_samples": 32, "lr": 0.05}
    p = validate_pilots(Path("digits"), record_pilots([("mlp-digits", variant)], seeds=2,
                                                      units=40, nodes=(2,), alpha_seeds=1))
    records = []
    for _ in range(2):
        env = LiveSchedulerEnv(preset="Live-Small-v0", pilots=p, runtime=runtime)
        play(env, 4)
        records.append(env.record)
    assert records[0].obs and records[0].obs == records[1].obs


def test_record_round_trip_and_replay(pilots, runtime, tmp_path):
    env = make(pilots, runtime)
    _, infos = play(env, 6)
    path = env.record.save(tmp_path / "ep.npz")
    rec = LiveRecord.load(path)
    assert rec.obs == env.record.obs and rec.stats["completed"] == \
        infos["node_0"]["episode"]["completed"]
    for curves in ("reference", "recorded"):
        cfg, wl = replay(rec, curves)
        live_wl = env.live.workload
        for f in ("arrival", "deadline", "cap", "log_target", "alpha"):
            assert np.array_equal(getattr(wl, f), getattr(live_wl, f))
        sim = CoreSchedulerEnv(cfg)
        sim.reset(seed=0, options={"workload": wl})  # the simulator accepts it
    _, wl = replay(rec, "recorded")
    for m in {o[0] for o in rec.obs}:
        w, loss = rec.curve(m)
        back = pmath.interp(pmath.log(w), LOG_WORK_GRID, wl.log_loss[m].astype(np.float64))
        assert np.max(np.abs(back - np.log(loss))) < 0.05
    with pytest.raises(ValueError, match="curves"):
        replay(rec, "other")
    # a damaged observation (no units trained, or a loss of 0) is refused on load
    m, slot, k, w, loss, _ = rec.obs[0]
    for bad in ((m, slot, k, w, loss, 0), (m, slot, k, w, 0.0, 1)):
        rec.obs[0] = bad
        with pytest.raises(ValueError, match="units >= 1"):
            LiveRecord.load(rec.save(tmp_path / "damaged.npz"))


def test_the_wall_clock_work_column_is_the_work_the_jobs_really_did(runtime):
    sleepy = "tests.core_env.live.jobs_for_tests:SleepJob"
    p = make_pilots([(sleepy, {"seconds": 0.01})], seeds=2, units=48, nodes=(2,))
    env = make(p, runtime, clock="wall", slot_seconds=0.06)
    _, infos = play(env, 4)
    rec = env.record
    assert rec.obs and infos["node_0"]["episode"]["illegal_actions"] == 0
    # SleepJob counts work += units * nodes (rate 1) and its loss is 1 / (1 + work + seed);
    # alpha is 1, so the work column (the model's gain once per unit) equals that work
    real = [1.0 / o[4] - 1.0 - rec.jobs[o[0]].seed for o in rec.obs]
    assert [o[3] for o in rec.obs] == pytest.approx(real, rel=1e-5)
    firsts = {}
    for o in rec.obs:
        firsts.setdefault(o[0], o)
    assert max(o[3] / o[2] for o in firsts.values()) >= 3  # several units in one slot
    # each observation records its units per node: the work gained that slot is units * nodes
    assert rec.clock == "wall" and rec.slot_seconds == 0.06
    last: dict[int, float] = {}
    for o in rec.obs:
        assert o[5] >= 1 and o[3] - last.get(o[0], 0.0) == pytest.approx(o[5] * o[2], rel=1e-5)
        last[o[0]] = o[3]
    with pytest.raises(ValueError, match="clock"):
        make(p, runtime, clock="fast")
    with pytest.raises(ValueError, match="slot_seconds"):
        make(p, runtime, slot_seconds=1.0)
    with pytest.raises(ValueError, match="slot_seconds"):
        make(p, runtime, clock="wall", slot_seconds=60.0)
    with pytest.raises(ValueError, match="slot_seconds"):
        make(p, runtime, clock="wall")


def test_the_replay_calibrates_the_slot_to_the_measured_units(runtime, tmp_path):
    sleepy = "tests.core_env.live.jobs_for_tests:SleepJob"
    p = make_pilots([(sleepy, {"seconds": 0.01})], seeds=2, units=48, nodes=(2,))
    env = make(p, runtime, clock="wall", slot_seconds=0.06)
    play(env, 5)
    rec = LiveRecord.load(env.record.save(tmp_path / "wall.npz"))
    assert rec.obs == env.record.obs and (rec.clock, rec.slot_seconds) == ("wall", 0.06)
    units = rec.units_per_slot()
    observed = sorted({o[0] for o in rec.obs})
    for m in observed:  # live work over the work of one unit per slot on the same slots
        rows = [o for o in rec.obs if o[0] == m]
        gains = np.diff([0.0] + [o[3] for o in rows])
        assert units[m] == pytest.approx(rows[-1][3] / np.sum(gains / [o[5] for o in rows]))
        assert min(o[5] for o in rows) <= units[m] <= max(o[5] for o in rows)
    assert units.max() >= 3
    _, model = replay(rec, slot="model")
    assert model is rec.workload
    cfg, wl = replay(rec)
    ref = rec.workload
    for f in ("arrival", "deadline", "cap", "log_target", "alpha"):
        assert np.array_equal(getattr(wl, f), getattr(ref, f))
    grid = np.asarray(LOG_WORK_GRID, dtype=np.float64)
    for m in observed:  # the curve at simulated work w is the reference's at u * w
        for g in (0, 5, 20):
            want = pmath.interp(np.array([grid[g] + np.log(units[m])]), grid,
                                ref.log_loss[m].astype(np.float64))[0]
            assert wl.log_loss[m, g] == pytest.approx(want, abs=1e-6)
        need = wl.required_work[m], ref.required_work[m]
        if np.isfinite(need[1]) and need[1] > units[m]:
            assert need[0] < need[1]
    CoreSchedulerEnv(cfg).reset(seed=0, options={"workload": wl})
    with pytest.raises(ValueError, match="slot"):
        replay(rec, slot="wall")


def test_a_work_clock_replay_is_not_shifted(pilots, runtime):
    env = make(pilots, runtime)
    play(env, 2)
    assert all(o[5] == 1 for o in env.record.obs) and env.record.clock == "work"
    assert replay(env.record)[1] is env.record.workload


def test_bad_records_and_options_are_refused(pilots, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a record")
    with pytest.raises(ValueError, match="not a readable live record"):
        LiveRecord.load(bad)
    env = make(pilots, None)
    with pytest.raises(ValueError, match="live_workload"):
        env.reset(seed=0, options={"workload": object()})
    with pytest.raises(ValueError, match="LiveWorkload"):
        env.reset(seed=0, options={"live_workload": 3})
    with pytest.raises(ValueError, match="pilots"):
        LiveSchedulerEnv(preset="Live-Small-v0", pilots=3)
    with pytest.raises(ValueError, match="one worker per node"), \
            pytest.warns(UserWarning, match="cover 48 work units"):
        LiveSchedulerEnv(preset="Live-v0", pilots=pilots, runtime=type("R", (), {
            "alive": [True] * 4})())
    with pytest.raises(ValueError, match="preset"):
        LiveSchedulerEnv(preset="CoRE-v0")
    assert env.runtime is None  # nothing started for refused input


def test_the_registry_lists_exactly_the_live_presets():
    from core_env.live import LIVE_PRESETS
    from core_env.registration import LIVE_PRESET_IDS

    assert LIVE_PRESET_IDS == tuple(LIVE_PRESETS)
    for preset in LIVE_PRESETS:
        assert f"core_env/{preset}" in pettingzoo.parallel_registry
        assert f"core_env/{preset}" in pettingzoo.aec_registry
