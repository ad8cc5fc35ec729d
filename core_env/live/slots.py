"""One slot of live training as the runtime sees it: the work a task is given
(:class:`SlotTask`), what comes back (:class:`SlotResult`), and the wall time a slot's jobs
would take on shared CPUs with no overhead (:func:`shared_makespan`). :mod:`core_env.live.runtime`
runs the slots (and re-exports these names).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from core_env.live.jobs import JobSpec


class SlotTask(NamedTuple):
    """One task's work for a slot.

    Attributes:
        spec: what to build. state: its last end-of-slot state (``None``: a fresh run).
        units: work units per node this slot. nodes: the node indices it trains on.
        seconds: ``None`` (the work clock): train exactly ``units`` units. A number (the wall
            clock): train ``units`` units at a time until ``seconds`` have passed since the
            worker began the task, restoring a moved job's state included (so a move costs
            training time, as a restore does on a cluster); a call that has begun finishes,
            so a slot trains at least ``units`` units and may overrun by one call.
    """

    spec: JobSpec
    state: bytes | None
    units: int
    nodes: tuple[int, ...]
    seconds: float | None = None


class SlotResult(NamedTuple):
    """What one task's slot produced.

    Attributes:
        loss: the observed loss after the slot (NaN on error).
        state: the new end-of-slot state (the previous one on error).
        error: None, or what went wrong ("worker died", "time limit ...", the exception).
        seconds: wall time of the job's own work on the worker (restore + train + save).
        restore_seconds, save_seconds: the parts of it spent restoring and serialising.
        state_bytes: size of the new state.
        node: the worker that ran it.
        train_cpu_seconds: CPU time of the worker process inside ``train`` alone (with more
            workers than CPUs, ``seconds`` includes waiting for a CPU; this does not).
        units: work units per node trained (``units`` of the task on the work clock; on the
            wall clock, whatever fitted in its seconds; 0 on error).
    """

    loss: float
    state: bytes | None
    error: str | None
    seconds: float
    restore_seconds: float
    save_seconds: float
    state_bytes: int
    node: int
    train_cpu_seconds: float = 0.0
    units: int = 0


def shared_makespan(seconds: Sequence[float], cpus: int, max_running: int) -> float:
    """The wall time ``seconds`` of CPU work (one job each) take on ``cpus`` CPUs with no
    overhead at all: at most ``max_running`` jobs at once, the longest first, the CPUs shared
    equally among the jobs running (a job runs at ``min(1, cpus / running)`` of a CPU, as
    the OS time-shares processes), a job never split over CPUs. What a slot of these jobs
    would take if the runtime itself cost nothing: at least the longest job, and at least
    all the work spread over the CPUs, more where one process per job leaves a CPU idle.

    Raises:
        ValueError: a negative or non-finite time, or ``cpus`` / ``max_running`` < 1.
    """
    for name, v in (("cpus", cpus), ("max_running", max_running)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    waiting = sorted((float(s) for s in seconds), reverse=True)
    if any(not (math.isfinite(s) and s >= 0) for s in waiting):
        raise ValueError(f"seconds: expected finite times >= 0, got {waiting!r}")
    running: list[float] = []  # the remaining CPU seconds of the jobs running
    clock = 0.0
    while waiting or running:
        while waiting and len(running) < max_running:
            running.append(waiting.pop(0))
        rate = min(1.0, cpus / len(running))
        running.sort()
        step = running[0] / rate  # until the job with the least left finishes
        clock += step
        running = [r - step * rate for r in running[1:]]
    return clock
