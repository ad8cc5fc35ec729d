"""Worker processes that end when their parent does.

A process pool's workers outlive a parent killed with SIGKILL (nothing runs in the parent to
stop them), and so does the resource tracker. :func:`worker_pool` starts workers that watch
their parent:

* on Linux, ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker the moment
  the thread that started it exits;
* everywhere, a daemon thread that checks twice a second whether the parent process is
  still the one that started the worker, and exits the worker if not.

The resource tracker of :mod:`multiprocessing` then ends by itself (its pipe closes when
the last process holding it is gone)::

    with worker_pool(2) as pool:
        results = list(pool.map(run_episode_spec, specs))
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1
POLL_SECONDS = 0.5
"""How often a worker checks that its parent is alive."""


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(POLL_SECONDS)
        if os.getppid() != parent:
            os._exit(1)


def die_with_parent(parent: int) -> None:
    """Make this process exit when the process ``parent`` is gone (call it first thing in a
    worker; :func:`worker_pool` does)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
            pass
    if os.getppid() != parent:  # the parent died before we got here
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True,
                     name="core_env-watch-parent").start()


def _init_worker(parent: int, initializer, initargs) -> None:
    die_with_parent(parent)
    if initializer is not None:
        initializer(*initargs)


def worker_pool(workers: int, initializer=None, initargs: tuple = ()) -> ProcessPoolExecutor:
    """A ``ProcessPoolExecutor`` of ``workers`` spawned processes that die with this one.

    Args:
        workers: number of processes (>= 1).
        initializer, initargs: as for ``ProcessPoolExecutor``, run after the parent watch is
            set up.
    """
    return ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"),
                               initializer=_init_worker,
                               initargs=(os.getpid(), initializer, tuple(initargs)))
