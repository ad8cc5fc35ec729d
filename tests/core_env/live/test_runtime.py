"""The live runtime: jobs, state moves, faults (core_env/live/*jobs.py and runtime.py; the
torch and SB3 job checks that drive torch themselves:
tests/integrations/test_live_torch_jobs.py)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from core_env.live import (
    JOB_KINDS,
    JobSpec,
    LocalRuntime,
    MLPDigitsJob,
    SlotTask,
    TrainingJob,
    job_class,
    make_job,
    run_serial,
)
from core_env.live.runtime import shared_makespan

COUNTER = "tests.core_env.live.jobs_for_tests:CounterJob"
SLEEP = "tests.core_env.live.jobs_for_tests:SleepJob"
SPIN = "tests.core_env.live.jobs_for_tests:SpinJob"


@pytest.fixture(scope="module")
def runtime(make_runtime):
    with make_runtime(3, time_limit=30.0) as rt:
        yield rt


# --------------------------------------------------------------------------- jobs
def test_job_spec_and_kind_errors():
    with pytest.raises(ValueError, match="kind"):
        JobSpec("")
    with pytest.raises(ValueError, match="seed"):
        JobSpec("mlp-digits", seed=-1)
    with pytest.raises(ValueError, match="expected one of"):
        job_class("resnet")
    with pytest.raises(ValueError, match="cannot import"):
        job_class("no_such_module:Job")
    with pytest.raises(ValueError, match="has no"):
        job_class("json:JSONDecoder")
    with pytest.raises(ValueError, match="variant"):
        make_job(JobSpec("mlp-digits", {"width": 3}))
    with pytest.raises(ValueError, match="lr_scaling"):
        make_job(JobSpec("mlp-digits", {"lr_scaling": "cubic"}))


def test_built_in_kinds_name_their_classes_and_check_their_numbers():
    assert sorted(JOB_KINDS) == ["cnn-digits", "mlp-digits", "mlp-mnist1d", "sb3-classic"]
    assert job_class("mlp-digits") is MLPDigitsJob
    assert JOB_KINDS["cnn-digits"] == "core_env.live.torch_jobs:CNNDigitsJob"
    for bad, message in (({"hidden": 0}, "hidden: expected an integer >= 1, got 0"),
                         ({"hidden": 2.5}, "hidden: expected an integer >= 1, got 2.5"),
                         ({"lr": -0.1}, "lr: expected a .*, got -0.1"),
                         ({"momentum": 1.0}, "momentum: expected a .*, got 1.0"),
                         ({"unit_samples": 100}, "unit_samples: expected a multiple of "
                                                 "batch=16, got 100")):
        with pytest.raises(ValueError, match=message):
            MLPDigitsJob(**bad)


KINDS = [("mlp-digits", {"hidden": 16}), ("mlp-mnist1d", {"hidden": 16}),
         ("cnn-digits", {"channels": 4}), ("sb3-classic", {"unit_steps": 256})]
LEARNS = {"mlp-digits": 0.5, "mlp-mnist1d": 0.85, "cnn-digits": 0.5, "sb3-classic": 0.9}
"""The loss after 10 units is below this share of the first (MNIST-1D is hard for an MLP;
the PPO job starts at 1.0, a CartPole return of 0)."""


def needs(kind: str) -> None:
    pytest.importorskip({"mlp-digits": "sklearn", "mlp-mnist1d": "mnist1d",
                         "cnn-digits": "torch", "sb3-classic": "stable_baselines3"}[kind])
    if kind != "sb3-classic":
        pytest.importorskip("sklearn")


@pytest.mark.parametrize("kind,variant", KINDS)
def test_built_in_jobs_learn_and_k_nodes_see_k_times_the_samples(kind, variant):
    needs(kind)
    job = make_job(JobSpec(kind, variant, seed=0))
    assert isinstance(job, TrainingJob)
    first = job.loss()
    losses = [job.train(2, 1) for _ in range(5)]
    assert losses[-1] < LEARNS[kind] * first  # ln 10 = 2.3 at the start
    two = make_job(JobSpec(kind, variant, seed=0))
    two.train(2, 4)
    assert two.samples == 4 * job.samples / 5  # 4 nodes: 4x the samples of one slot
    other = make_job(JobSpec(kind, variant, seed=1))
    assert other.train(2, 1) != losses[0]  # another seed, another run


@pytest.mark.parametrize("kind,variant", KINDS)
def test_built_in_jobs_save_and_load_continue_exactly(kind, variant):
    needs(kind)
    a = make_job(JobSpec(kind, variant, seed=3))
    a.train(1, 2)
    blob = a.save()
    b = make_job(JobSpec(kind, variant, seed=3))
    b.load(blob)
    assert a.train(2, 1) == b.train(2, 1)
    assert a.save() == b.save()


# ------------------------------------------------------------------------ runtime
@pytest.mark.parametrize("kind,variant", KINDS)
def test_a_slot_gives_what_training_in_process_gives(runtime, kind, variant):
    needs(kind)
    spec = JobSpec(kind, variant, seed=5)
    want = run_serial(spec, [(1, 1), (1, 2), (2, 1)])
    runtime.warm([spec])  # imports and data off the slots' time limit, as the live env does
    state, got = None, []
    for (units, _k), nodes in zip([(1, 1), (1, 2), (2, 1)], [(0,), (1, 2), (2,)], strict=False):
        res = runtime.run_slot({"t": SlotTask(spec, state, units, nodes)})["t"]
        assert res.error is None and res.node == min(nodes) and res.state_bytes > 0
        state = res.state
        got.append(res.loss)
    assert got == want  # moved between workers 0 -> 1 -> 2: exactly the same run


def test_tasks_run_in_parallel_on_their_own_workers(runtime):
    tasks = {j: SlotTask(JobSpec(COUNTER, seed=j), None, 2, (j,)) for j in range(3)}
    out = runtime.run_slot(tasks)
    for j in range(3):
        assert out[j].loss == 1.0 / (1.0 + 2 + j)
        state = json.loads(out[j].state)
        assert state["pid"] == runtime.pid(j) and state["threads"] == "1"


def test_bad_assignments_are_refused(runtime):
    spec = JobSpec(COUNTER)
    with pytest.raises(ValueError, match="both"):
        runtime.run_slot({"a": SlotTask(spec, None, 1, (0,)), "b": SlotTask(spec, None, 1,
                                                                            (0, 1))})
    with pytest.raises(ValueError, match="does not exist"):
        runtime.run_slot({"a": SlotTask(spec, None, 1, (7,))})
    with pytest.raises(ValueError, match="at least one node"):
        runtime.run_slot({"a": SlotTask(spec, None, 1, ())})
    with pytest.raises(ValueError, match="units"):
        runtime.run_slot({"a": SlotTask(spec, None, 0, (0,))})


@pytest.mark.parametrize("kind, message", [
    ("tests.core_env.live.jobs_for_tests:RaisingJob", "job raised RuntimeError: diverged"),
    ("tests.core_env.live.jobs_for_tests:NaNJob", "non-finite loss"),
    ("tests.core_env.live.jobs_for_tests:DictStateJob",
     "job raised TypeError: save() returned dict, expected bytes"),
    ("tests.core_env.live.jobs_for_tests:NoneStateJob",
     "job raised TypeError: save() returned NoneType, expected bytes"),
])
def test_a_failing_job_is_reported_and_keeps_its_state(runtime, kind, message):
    before = b'{"work": 3.0, "seed": 0, "pid": 0}'
    res = runtime.run_slot({"a": SlotTask(JobSpec(kind), before, 1, (0,)),
                            "b": SlotTask(JobSpec(COUNTER), None, 1, (1,))})
    assert message in res["a"].error and np.isnan(res["a"].loss)
    assert res["a"].state == before  # not advanced
    assert res["b"].error is None  # the others go on
    assert runtime.alive == [True, True, True]


def test_a_sigkilled_worker_loses_only_the_slot_in_flight(make_runtime):
    with make_runtime(2, time_limit=30.0) as rt:
        spec = JobSpec(COUNTER)
        first = rt.run_slot({"a": SlotTask(spec, None, 3, (1,))})["a"]
        # the slot would take 60 s; detection (and nothing else) takes well under 20 s
        # even when other processes load the CPUs
        slow = JobSpec(SLEEP, {"seconds": 60.0})
        killer = threading.Timer(0.5, os.kill, (rt.pid(1), signal.SIGKILL))
        killer.start()
        t0 = time.perf_counter()
        res = rt.run_slot({"a": SlotTask(slow, first.state, 1, (1,)),
                           "b": SlotTask(spec, None, 1, (0,))})
        assert time.perf_counter() - t0 < 20.0  # detected, not waited out
        assert res["a"].error == "worker died" and res["a"].state == first.state
        assert res["b"].error is None
        assert rt.alive == [True, False]
        with pytest.raises(ValueError, match="dead"):
            rt.run_slot({"a": SlotTask(spec, first.state, 1, (1,))})
        # the task resumes from its last end-of-slot state on another node
        moved = rt.run_slot({"a": SlotTask(spec, res["a"].state, 1, (0,))})["a"]
        assert json.loads(moved.state)["work"] == 4.0
        rt.restart(1)
        assert rt.alive == [True, True] and rt.restarts == 1
        assert rt.run_slot({"a": SlotTask(spec, moved.state, 1, (1,))})["a"].loss == 1 / 6


def test_a_slot_over_its_time_limit_is_stopped(make_runtime):
    with make_runtime(1, time_limit=1.0) as rt:
        # the slot would take 300 s; stopping it at 1 s and restarting the worker (a new
        # process: several seconds for a Ray actor, over 30 s on a 2-CPU machine with four
        # other busy processes) well under 120
        t0 = time.perf_counter()
        res = rt.run_slot({"a": SlotTask(JobSpec(SLEEP, {"seconds": 300.0}), None, 1,
                                         (0,))})["a"]
        assert time.perf_counter() - t0 < 120.0
        assert "time limit" in res.error and rt.restarts == 1 and rt.alive == [True]
        assert rt.run_slot({"a": SlotTask(JobSpec(COUNTER), None, 1, (0,))})["a"].loss == 0.5


def test_the_wall_clock_trains_whole_units_while_the_slot_lasts(make_runtime):
    with make_runtime(2, time_limit=10.0) as rt:
        quick, slow = JobSpec(SLEEP, {"seconds": 0.05}), JobSpec(SLEEP, {"seconds": 0.5})
        res = rt.run_slot({"q": SlotTask(quick, None, 1, (0,), 0.3),
                           "s": SlotTask(slow, None, 2, (1,), 0.3)})
        q, sl = res["q"], res["s"]
        assert q.error is None and 5 <= q.units <= 8  # 0.3 s of 0.05 s units, overrun <= 1
        assert json.loads(q.state)["work"] == q.units  # the job really trained them
        assert sl.units == 2 and json.loads(sl.state)["work"] == 2  # one call, overran
        assert sl.seconds >= 0.5
        # the work clock trains exactly the units asked for
        assert rt.run_slot({"q": SlotTask(quick, q.state, 3, (0,))})["q"].units == 3
        with pytest.raises(ValueError, match="seconds"):
            rt.run_slot({"q": SlotTask(quick, None, 1, (0,), 0.0)})


def test_on_the_wall_clock_a_move_costs_its_restore(make_runtime):
    """A moved job's restore is part of its slot's seconds: it trains fewer units than the
    same job staying on its node, which continues from memory."""
    spec = JobSpec("tests.core_env.live.jobs_for_tests:SlowLoadJob",
                   {"seconds": 0.05, "load_seconds": 0.3})
    with make_runtime(2, time_limit=10.0) as rt:
        first = rt.run_slot({"a": SlotTask(spec, None, 1, (0,), 0.6)})["a"]
        stay = rt.run_slot({"a": SlotTask(spec, first.state, 1, (0,), 0.6)})["a"]
        moved = rt.run_slot({"a": SlotTask(spec, stay.state, 1, (1,), 0.6)})["a"]
    assert stay.restore_seconds < 0.1 <= 0.3 <= moved.restore_seconds
    # 0.6 s of 0.05 s units, against 0.3 s left after loading (sleeps only overrun)
    assert stay.units <= 13 and 1 <= moved.units <= 7 and stay.units >= moved.units + 3


def test_the_local_runtime_runs_at_most_max_running_jobs_longest_first(tmp_path):
    log = tmp_path / "log"

    def spin(name: str, seconds: float) -> JobSpec:
        return JobSpec(SPIN, {"name": name, "log": str(log), "seconds": seconds})

    def runs() -> list[tuple[str, float, float]]:
        rows = [line.split() for line in log.read_text().splitlines()]
        log.unlink()
        return [(name, float(a), float(b)) for name, a, b in rows]

    with LocalRuntime(3, time_limit=1.0, max_running=1) as rt:
        # not yet measured: the one with more node-units first; each job's time limit runs
        # from when it is sent (0.7 s each, 1.4 s in all, within the limit)
        res = rt.run_slot({"a": SlotTask(spin("a", 0.7), None, 1, (0,)),
                           "b": SlotTask(spin("b", 0.7), None, 1, (1, 2))})
        assert all(r.error is None for r in res.values())
        (n1, s1, e1), (n2, s2, e2) = sorted(runs(), key=lambda r: r[1])
        assert (n1, n2) == ("b", "a") and e1 <= s2  # one at a time
        # measured: "a" cost 0.7 s per node-unit, "b" 0.35, so "a" goes first now
        a, b = spin("a", 0.7), spin("b", 0.7)
        res = rt.run_slot({"a": SlotTask(a, res["a"].state, 1, (0,)),
                           "b": SlotTask(b, res["b"].state, 1, (1,))})
        assert [r[0] for r in sorted(runs(), key=lambda r: r[1])] == ["a", "b"]
        # a task id that comes back with another job (a new episode's task) is not yet
        # measured: it goes first again, and the cost of the job it had is forgotten
        res = rt.run_slot({"a": SlotTask(a, res["a"].state, 1, (0,)),
                           "b": SlotTask(spin("c", 0.1), None, 1, (1,))})
        assert [r[0] for r in sorted(runs(), key=lambda r: r[1])] == ["c", "a"]
    with pytest.raises(ValueError, match="max_running"):
        LocalRuntime(1, max_running=0)


def test_shared_makespan_is_the_overhead_free_wall_time_of_the_dispatch():
    # all at once on 2 CPUs: three jobs at 2/3 of a CPU each until the 2 s one ends at 3 s,
    # then the two 3 s ones have 1 s left on a CPU each
    assert shared_makespan([3, 3, 2], 2, 16) == pytest.approx(4.0)
    # one long job: the short ones share with it, then it runs alone (a CPU idles)
    assert shared_makespan([5, 1, 1], 2, 16) == pytest.approx(5.5)
    # at most 2 at once, longest first: list scheduling (5 | 1 + 1; 3 | 3 then 2)
    assert shared_makespan([1, 5, 1], 2, 2) == pytest.approx(5.0)
    assert shared_makespan([3, 2, 3], 2, 2) == pytest.approx(5.0)
    assert shared_makespan([3, 2, 3], 1, 3) == pytest.approx(8.0)  # one CPU: all of it
    assert shared_makespan([4], 8, 8) == pytest.approx(4.0)  # a job is never split
    assert shared_makespan([], 2, 2) == 0.0
    rng = np.random.default_rng(0)
    for _ in range(50):  # never below the lower bound, and at most everything in turn
        secs = list(rng.exponential(1.0, int(rng.integers(1, 20))))
        cpus, most = int(rng.integers(1, 5)), int(rng.integers(1, 20))
        got = shared_makespan(secs, cpus, most)
        assert max(max(secs), sum(secs) / cpus) - 1e-9 <= got <= sum(secs) + 1e-9
    for bad, match in [(([1.0], 0, 1), "cpus"), (([1.0], 1, True), "max_running"),
                       (([float("nan")], 1, 1), "seconds"), (([-1.0], 1, 1), "seconds")]:
        with pytest.raises(ValueError, match=match):
            shared_makespan(*bad)


def test_workers_stop_with_close(make_runtime):
    rt = make_runtime(1)
    pid = rt.pid(0)
    rt.close()
    for _ in range(100):  # a Ray actor's process exits shortly after it is killed
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_job_that_stays_continues_in_memory_and_a_fresh_run_starts_fresh(make_runtime):
    with make_runtime(2, time_limit=30.0) as rt:
        spec = JobSpec(COUNTER)
        a = rt.run_slot({"a": SlotTask(spec, None, 2, (0,))})["a"]
        pid = json.loads(a.state)["pid"]
        stay = rt.run_slot({"a": SlotTask(spec, a.state, 1, (0,))})["a"]
        assert stay.restore_seconds < a.seconds + 0.01 and stay.loss == 1 / 4
        # a state the worker does not hold (here: an older one) is restored, not ignored
        older = rt.run_slot({"a": SlotTask(spec, a.state, 1, (0,))})["a"]
        assert older.loss == 1 / 4
        # the same key with no state is a fresh run, even where the key's job is held
        fresh = rt.run_slot({"a": SlotTask(spec, None, 1, (0,))})["a"]
        assert fresh.loss == 1 / 2
        # another spec under the same key and state is built, not the held job continued
        other = rt.run_slot({"a": SlotTask(JobSpec(COUNTER, {"rate": 3.0}), fresh.state, 1,
                                           (0,))})["a"]
        assert other.loss == 1 / 5
        moved = rt.run_slot({"a": SlotTask(spec, other.state, 1, (1,))})["a"]
        assert json.loads(moved.state)["pid"] != pid and moved.loss == 1 / 6


GLOBAL_RANDOM = "tests.core_env.live.jobs_for_tests:GlobalRandomJob"


def test_jobs_alternating_on_one_worker_give_what_each_gives_alone(make_runtime):
    """Two jobs that use a process-wide generator (kept by their save/load) take turns on
    one worker: each is restored when it comes back after the other ran, so its losses are
    those of training it alone in one process; one that stays continues in memory."""
    a, b = JobSpec(GLOBAL_RANDOM, seed=1), JobSpec(GLOBAL_RANDOM, seed=2)
    with make_runtime(1, time_limit=30.0) as rt:
        state = {"a": None, "b": None}
        losses = {"a": [], "b": []}
        for key in ("a", "b", "a", "a", "b", "a", "b", "b"):
            spec = a if key == "a" else b
            res = rt.run_slot({key: SlotTask(spec, state[key], 1, (0,))})[key]
            assert res.error is None, res.error
            state[key] = res.state
            losses[key].append(res.loss)
    assert losses["a"] == run_serial(a, [(1, 1)] * 4)
    assert losses["b"] == run_serial(b, [(1, 1)] * 4)


def test_a_job_that_cannot_be_built_fails_the_warm_up_naming_it(make_runtime):
    with make_runtime(1, time_limit=30.0) as rt:
        with pytest.raises(RuntimeError, match=r"node 0: job 'no_such_module:Job' .* cannot "
                                               r"be built: .*No module named 'no_such_module'"):
            rt.warm([JobSpec(COUNTER), JobSpec("no_such_module:Job")])
