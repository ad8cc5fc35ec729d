"""What a live runtime's worker runs (every backend's: the local processes and the Ray actors):
building jobs ahead of their first slot (:func:`warm_jobs`), one task's slot
(:func:`run_job`: continue the job it holds or restore the state it is sent, train, save),
and the local worker process's loop. :func:`run_serial` trains a job in this process, the
reference a runtime's results must equal. :mod:`core_env.live.runtime` re-exports these names.
"""

from __future__ import annotations

import math
import time
import traceback
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from core_env.live.jobs import JobSpec, make_job

RESIDENT = 8
"""Jobs a worker keeps in memory (least recently used dropped first): a job that stays on its
node continues from the object itself instead of being restored from its state."""


def warm_jobs(specs: Sequence[JobSpec]) -> str | None:
    """Build each job once (imports and data caches, off the clock): None, or what failed
    (the job kind and variant, and the error)."""
    for spec in specs:
        try:
            make_job(spec)
        except Exception as e:
            error = traceback.format_exception_only(type(e), e)[-1].strip()
            return f"job {spec.kind!r} {spec.variant} cannot be built: {error}"
    return None


def check_state(blob: Any) -> bytes:
    """A job's ``save()`` result as bytes; TypeError naming what it returned otherwise."""
    if isinstance(blob, (bytes, bytearray)):
        return bytes(blob)
    raise TypeError(f"save() returned {type(blob).__name__}, expected bytes")


def run_job(resident: OrderedDict, key: Any, spec: JobSpec, state: bytes | None, units: int,
            nodes: int, reuse: bool, seconds: float | None = None) -> tuple:
    """One task's slot on a worker (every backend's workers run this): continue the job the
    worker holds under ``key`` if ``reuse``, else build it and restore ``state`` (None: a
    fresh run); train (``units`` units, or on the wall clock ``units`` at a time until
    ``seconds`` have passed since it began, restore included, see
    :class:`~core_env.live.slots.SlotTask`); save.
    Returns ``(loss, state, error, seconds, restore_seconds, save_seconds,
    train_cpu_seconds, units trained)``; a job's own exception is reported, not raised."""
    t0, c1 = time.perf_counter(), 0.0
    try:
        job = resident.pop(key, None)
        if not reuse:
            job = make_job(spec)
            if state is not None:
                job.load(state)
        t1, c1 = time.perf_counter(), time.process_time()
        loss, done = float(job.train(units, nodes)), units
        while seconds is not None and math.isfinite(loss) and \
                time.perf_counter() - t0 < seconds:  # the restore is part of the slot
            loss, done = float(job.train(units, nodes)), done + units
        t2, c2 = time.perf_counter(), time.process_time()
        blob = check_state(job.save()) if math.isfinite(loss) else None
        t3 = time.perf_counter()
        error = None if math.isfinite(loss) else f"non-finite loss {loss!r}"
        if error is None:
            resident[key] = job
            while len(resident) > RESIDENT:
                resident.popitem(last=False)
        return loss, blob, error, t3 - t0, t1 - t0, t3 - t2, c2 - c1, done
    except Exception as e:  # the job's own error: reported, not fatal
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return (float("nan"), None, f"job raised {tb}", time.perf_counter() - t0, 0.0, 0.0,
                time.process_time() - c1 if c1 else 0.0, 0)


def _worker(conn: Any) -> None:  # pragma: no cover - runs in the worker process
    """Worker loop: say it is ready, then receive ("warm", specs) or (key, spec, state,
    units, nodes, reuse, seconds) and reply (see :func:`run_job`)."""
    conn.send("ready")
    resident: OrderedDict[Any, Any] = OrderedDict()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        reply = ("warm", warm_jobs(msg[1])) if msg[0] == "warm" else run_job(resident, *msg)
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return


def run_serial(spec: JobSpec, slots: Sequence[tuple[int, int]]) -> list[float]:
    """The losses of ``spec`` trained in this process for a sequence of (units, nodes)
    slots: the reference a runtime's results must equal."""
    job = make_job(spec)
    return [float(job.train(u, k)) for u, k in slots]
