"""The live runtime's local backend: one worker process per node (SPEC §8).

:class:`LocalRuntime` starts N worker processes (one per node, each pinned to one thread)
and runs one slot of real training at a time: :meth:`LocalRuntime.run_slot` takes, for every
task that trains this slot, its :class:`~core_env.live.jobs.JobSpec`, its last end-of-slot
state (``None`` for a fresh run) and the nodes it was given, runs it on the first of those
nodes (a k-node task is one synchronous data-parallel step sequence with a k-times larger
batch, computed in one process: the same arithmetic), and returns each task's observed
loss and new state. The driver keeps every state between slots, so a task that moves to
other nodes is restored from it on the new worker, and a worker that dies loses at most the
slot in flight. A worker also keeps the last few jobs it ran in memory (:data:`RESIDENT`):
a task that stays on its node continues from that object, which is in exactly the state the
driver holds, so only a move pays for restoring (``restore_seconds``). A job is continued
only if it was the last one to run on that worker: one that comes back after another job ran
there is restored from its state, so process-wide state that its ``save``/``load`` keep (a
global random generator, say) is its own, and the losses are those of training it alone in
one process (:func:`run_serial`).

Faults and failures:

* a worker that dies (killed, crashed) is detected when its result is due; its task's slot is
  reported with ``error="worker died"`` and its previous state is kept; the node stays dead
  (:attr:`LocalRuntime.alive`) until :meth:`LocalRuntime.restart`;
* a job whose code raises, returns a non-finite loss, or whose ``save()`` returns anything
  but bytes, is reported with the error (its state is not advanced); the caller marks it
  failed;
* a job that cannot be built on a worker (its module is not importable there, its
  constructor raises) fails :meth:`Runtime.warm`, naming it: the live env warms every job
  kind of its workload at ``reset``;
* a slot that overruns ``time_limit`` seconds: its worker is killed and restarted, and the
  slot is reported with ``error="time limit ..."``.

Workers die with the driver: they exit when their pipe closes, and :meth:`close` (or the
context manager) stops them.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import multiprocessing.connection
import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any, Iterator, cast

from core_env.live.jobs import JobSpec

# a slot's types and the worker's side live in their own modules; their names stay
# importable from here
from core_env.live.slots import SlotResult, SlotTask, shared_makespan  # noqa: F401
from core_env.live.worker import (  # noqa: F401 (re-exported)
    RESIDENT,
    _worker,
    check_state,
    run_job,
    run_serial,
    warm_jobs,
)

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
"""Environment variables set to 1 in every worker (one thread per node)."""

STARTUP_SECONDS = 120.0
"""How long a new worker may take to start (import) before the runtime gives up on it."""


@contextmanager
def _one_thread() -> Iterator[None]:
    """Set the thread variables to 1 while workers start (they inherit the environment)."""
    saved = {k: os.environ.get(k) for k in THREAD_VARS}
    os.environ.update({k: "1" for k in THREAD_VARS})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Runtime:
    """What every backend shares: checking a slot's tasks, mirroring what each worker holds
    and turning a worker's reply into a :class:`SlotResult`. A backend implements
    ``_start(node)`` (start a worker and wait until it is up), ``_stop(node)``,
    ``_warm_nodes(nodes, specs)``, ``pid(node)``, ``run_slot(tasks)`` and ``close()``.

    Attributes:
        n_nodes: workers (nodes). time_limit: seconds a task's slot may take.
        alive: list[bool], whether each node's worker is up. restarts: restarts so far.
    """

    def __init__(self, n_nodes: int, time_limit: float) -> None:
        if isinstance(n_nodes, bool) or not isinstance(n_nodes, int) or n_nodes < 1:
            raise ValueError(f"n_nodes: expected an integer >= 1, got {n_nodes!r}")
        if not (isinstance(time_limit, (int, float)) and time_limit > 0):
            raise ValueError(f"time_limit: expected seconds > 0, got {time_limit!r}")
        self.n_nodes, self.time_limit = n_nodes, float(time_limit)
        self.alive = [False] * n_nodes
        self.restarts = 0
        self._warm_specs: tuple[JobSpec, ...] = ()
        # per node, the jobs its worker holds (key -> their spec and the state they are in),
        # mirroring the worker's least-recently-used order
        self._resident: list[OrderedDict[Any, tuple[JobSpec, bytes]]] = [
            OrderedDict() for _ in range(n_nodes)]
        self._last_sent: list[Any] = [None] * n_nodes  # the task each worker ran last

    def _check_tasks(self, tasks: dict[Any, SlotTask]) -> dict[Any, int]:
        """Validate a slot's tasks; returns each task's leader node (its first node).

        Raises:
            ValueError: a task has no nodes, a node is given to two tasks, a node does not
                exist or its worker is dead (mask dead nodes before assigning them).
        """
        used: dict[int, Any] = {}
        for key, task in tasks.items():
            if not task.nodes:
                raise ValueError(f"task {key!r}: expected at least one node")
            if isinstance(task.units, bool) or not isinstance(task.units, int) or task.units < 1:
                raise ValueError(f"task {key!r}: units must be an integer >= 1, got "
                                 f"{task.units!r}")
            if task.seconds is not None and not (
                    isinstance(task.seconds, (int, float)) and not isinstance(task.seconds, bool)
                    and 0 < task.seconds < math.inf):
                raise ValueError(f"task {key!r}: seconds must be None or a finite number > 0, "
                                 f"got {task.seconds!r}")
            for node in task.nodes:
                if not (isinstance(node, int) and 0 <= node < self.n_nodes):
                    raise ValueError(f"task {key!r}: node {node!r} does not exist "
                                     f"(0..{self.n_nodes - 1})")
                if node in used:
                    raise ValueError(f"node {node}: given to both {used[node]!r} and {key!r}")
                if not self.alive[node]:
                    raise ValueError(f"task {key!r}: node {node}'s worker is dead; restart "
                                     f"it or mask the node")
                used[node] = key
        return {key: min(task.nodes) for key, task in tasks.items()}

    def _message(self, key: Any, task: SlotTask, node: int) -> tuple:
        """What the leader ``node`` is sent (:func:`run_job`'s arguments): the worker
        continues its own copy if it holds the job in exactly this state (a copy on another
        node, or from an earlier slot, is another state) and no other job has run on it
        since, else restores the state sent."""
        held = self._resident[node].pop(key, None)
        reuse = (held is not None and self._last_sent[node] == key
                 and held[1] is task.state and held[0] == task.spec)
        self._last_sent[node] = key
        return (key, task.spec, None if reuse else task.state, task.units, len(task.nodes),
                reuse, task.seconds)

    def _result(self, key: Any, task: SlotTask, node: int, reply: tuple) -> SlotResult:
        """A worker's reply (:func:`run_job`) as a :class:`SlotResult`."""
        loss, blob, error, secs, restore, save, cpu, units = reply
        if error is not None:
            return self._failed(task, node, error, secs)._replace(train_cpu_seconds=cpu)
        held = self._resident[node]
        held[key] = (task.spec, blob)
        while len(held) > RESIDENT:
            held.popitem(last=False)
        return SlotResult(loss, blob, None, secs, restore, save, len(blob), node, cpu, units)

    @staticmethod
    def _failed(task: SlotTask, node: int, error: str, secs: float = 0.0) -> SlotResult:
        return SlotResult(float("nan"), task.state, error, secs, 0.0, 0.0,
                          len(task.state) if task.state is not None else 0, node)

    def warm(self, specs: Sequence[JobSpec]) -> None:
        """Build each job of ``specs`` not warmed before once on every live worker, so that
        imports and data loading happen now and not inside a slot; a worker started later is
        warmed with every spec warmed so far.

        Raises:
            RuntimeError: a job cannot be built on a worker (names the node, the job kind
                and variant, and the error: e.g. its module is not importable there); the
                specs of that call are then not kept for later workers.
        """
        new: tuple[JobSpec, ...] = ()
        for spec in specs:  # (specs hold dicts: compared, not hashed)
            if spec not in self._warm_specs and spec not in new:
                new += (spec,)
        if new:
            self._warm_nodes([i for i in range(self.n_nodes) if self.alive[i]], new)
            self._warm_specs += new

    def restart(self, node: int) -> None:
        """Start a new worker for ``node`` (killing the old one if it still runs)."""
        self._stop(node)
        self._start(node)
        self.restarts += 1
        if self._warm_specs:
            self._warm_nodes([node], self._warm_specs)

    # what a backend implements (see the class docstring)
    def _start(self, i: int) -> None:
        raise NotImplementedError

    def _stop(self, node: int) -> None:
        raise NotImplementedError

    def _warm_nodes(self, nodes: list[int], specs: tuple[JobSpec, ...]) -> None:
        raise NotImplementedError

    def pid(self, node: int) -> int:
        raise NotImplementedError

    def run_slot(self, tasks: dict[Any, SlotTask]) -> dict[Any, SlotResult]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


class LocalRuntime(Runtime):
    """N worker processes, one per node, driven slot by slot (see the module docstring).

    Args:
        n_nodes: workers to start (>= 1).
        time_limit: seconds a task's slot may take before its worker is killed (> 0).
        start_method: multiprocessing start method (``"spawn"``: workers import only what
            the jobs need).
        max_running: most jobs training at once, the longest expected first (None: every
            node's job at once, as on a cluster with a CPU per node). With more nodes than
            CPUs, the CPU count makes each job run alone on a CPU (less CPU time per job;
            1-3% less wall time per ``Live-v0`` episode on 2 cores, docs/experiments.md).
    """

    def __init__(self, n_nodes: int, time_limit: float = 600.0,
                 start_method: str = "spawn", max_running: int | None = None) -> None:
        super().__init__(n_nodes, time_limit)
        if max_running is None:
            max_running = n_nodes
        if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
            raise ValueError(f"max_running: expected an integer >= 1 or None, got "
                             f"{max_running!r}")
        self.max_running = max_running
        # task -> (its job, the last CPU seconds per node-unit): a task id that comes back
        # with another job (a new episode's task) is not yet measured
        self._cost: dict[Any, tuple[JobSpec, float]] = {}
        self._ctx = mp.get_context(start_method)
        self._procs: list[Any] = [None] * n_nodes
        self._conns: list[Any] = [None] * n_nodes
        for i in range(n_nodes):  # start them all, then wait: imports overlap
            self._launch(i)
        for i in range(n_nodes):
            self._await_ready(i)

    def _launch(self, i: int) -> None:
        parent, child = self._ctx.Pipe()
        with _one_thread():
            # typeshed's BaseContext (get_context's type for a str) has no Process; every
            # context get_context returns has one
            proc = self._ctx.Process(  # type: ignore[attr-defined]
                target=_worker, args=(child,), daemon=True, name=f"core-env-live-node-{i}")
            proc.start()
        child.close()
        self._procs[i], self._conns[i], self.alive[i] = proc, parent, True

    def _await_ready(self, i: int) -> None:
        """Wait until worker i has started (imports are not part of any slot's time)."""
        conn = self._conns[i]
        if not conn.poll(STARTUP_SECONDS) or conn.recv() != "ready":
            self._stop(i)
            raise RuntimeError(f"node {i}: its worker did not start within "
                               f"{STARTUP_SECONDS:g} s")

    def _start(self, i: int) -> None:
        self._launch(i)
        self._await_ready(i)

    def _warm_nodes(self, nodes: list[int], specs: tuple[JobSpec, ...]) -> None:
        for i in nodes:
            self._conns[i].send(("warm", specs))
        errors = []  # every reply is read, so no stale one waits in a pipe
        for i in nodes:
            if not self._conns[i].poll(STARTUP_SECONDS):
                raise RuntimeError(f"node {i}: its worker did not warm up within "
                                   f"{STARTUP_SECONDS:g} s")
            _, error = self._conns[i].recv()
            if error is not None:
                errors.append(f"node {i}: {error}")
        if errors:
            raise RuntimeError(errors[0])

    def pid(self, node: int) -> int:
        """The process id of ``node``'s worker."""
        return int(self._procs[node].pid)

    def _stop(self, node: int) -> None:
        proc, conn = self._procs[node], self._conns[node]
        if conn is not None:
            conn.close()
        if proc is not None and proc.is_alive():
            proc.kill()
            proc.join(5)
        self.alive[node] = False
        self._resident[node].clear()

    def run_slot(self, tasks: dict[Any, SlotTask]) -> dict[Any, SlotResult]:
        """Run one slot of every task in ``tasks`` (task id -> :class:`SlotTask`) in
        parallel; returns task id -> :class:`SlotResult` (see :meth:`Runtime._check_tasks`
        for what is refused).

        At most ``max_running`` jobs train at once, the longest expected first (a task's
        last measured CPU seconds per node-unit times its node-units; tasks not yet seen
        first, then by node-units); each job's ``time_limit`` runs from when it was sent."""
        leaders = self._check_tasks(tasks)
        order = sorted(tasks, key=lambda k: self._expected(k, tasks[k]), reverse=True)
        results: dict[Any, SlotResult] = {}
        pending: dict[Any, tuple[int, float]] = {}  # key -> (node, when it was sent)
        while order or pending:
            while order and len(pending) < self.max_running:
                key = order.pop(0)
                node = leaders[key]
                try:
                    self._conns[node].send(self._message(key, tasks[key], node))
                    pending[key] = (node, time.perf_counter())
                except (BrokenPipeError, OSError):
                    self.alive[node] = False
                    results[key] = self._failed(tasks[key], node, "worker died")
            if not pending:
                continue
            waiting = {self._conns[n]: k for k, (n, _) in pending.items()}
            due = min(sent for _, sent in pending.values()) + self.time_limit
            # wait returns some of the objects it is given: here the workers' connections
            ready = cast("list[multiprocessing.connection.Connection]",
                         multiprocessing.connection.wait(
                             list(waiting), timeout=max(due - time.perf_counter(), 0.0)))
            if not ready:  # time limit: kill and restart the workers past it
                now = time.perf_counter()
                for key, (node, sent) in list(pending.items()):
                    if now - sent >= self.time_limit:
                        del pending[key]
                        self.restart(node)
                        results[key] = self._failed(
                            tasks[key], node, f"time limit {self.time_limit:g} s exceeded")
            for conn in ready:
                key = waiting[conn]
                node, _ = pending.pop(key)
                try:
                    reply = conn.recv()
                except (EOFError, OSError):
                    self._procs[node].join(1)
                    self.alive[node] = False
                    results[key] = self._failed(tasks[key], node, "worker died")
                    continue
                results[key] = self._result(key, tasks[key], node, reply)
                if results[key].error is None:
                    units = results[key].units * len(tasks[key].nodes)
                    self._cost[key] = (tasks[key].spec,
                                       results[key].train_cpu_seconds / units)
        return results

    def _expected(self, key: Any, task: SlotTask) -> tuple[bool, float]:
        units = task.units * len(task.nodes)
        spec, cost = self._cost.get(key, (None, None))
        if spec != task.spec:
            cost = None
        return (cost is None, units if cost is None else cost * units)

    def close(self) -> None:
        """Stop every worker."""
        for i in range(self.n_nodes):
            conn = self._conns[i]
            if conn is not None and self.alive[i]:
                try:
                    conn.send(None)
                except (BrokenPipeError, OSError):
                    pass
            proc = self._procs[i]
            if proc is not None:
                proc.join(2)
            self._stop(i)
