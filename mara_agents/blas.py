"""One BLAS thread for MARA's single-environment numpy inference.

The numpy FM sampler and the numpy MAT multiply small float32 matrices (a few dozen rows).
numpy's OpenBLAS splits such products over every core it sees, and when the other cores are
busy (the training jobs a scheduler shares its machine with, the other episodes of a
benchmark) each product waits for a core (measured in ``docs/mara.md``, "Inference cost").
:func:`one_blas_thread` limits BLAS to one thread for the duration of a call (threadpoolctl;
the previous setting is restored afterwards); :func:`single_blas_thread` is the decorator::

    with one_blas_thread():
        actions = policy.act(observations)

The results agree with the threaded ones to float32 rounding, not bit for bit: OpenBLAS's
threaded products can round differently from its one-thread ones (its Haswell kernels do).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_controller: Any = None


def one_blas_thread() -> AbstractContextManager:
    """A context manager that runs its body with BLAS on one thread (about 8 microseconds
    to enter and leave)."""
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()  # inspects the loaded libraries once
    return _controller.limit(limits=1, user_api="blas")


def single_blas_thread(fn: F) -> F:
    """Decorator: ``fn`` runs inside :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
