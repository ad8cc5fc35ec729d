"""What the checks of :mod:`core_env.testing` share: the error they raise, the report they
return, and comparing values (bit-identical episodes) and describing a value outside its
space in a failure's message. :mod:`core_env.testing` re-exports :class:`EnvCheckError` and
:class:`CheckReport`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, NoReturn

import gymnasium
import numpy as np


class EnvCheckError(AssertionError):
    """A property of the env contract does not hold; the message says which and where."""


class CheckReport(NamedTuple):
    """What :func:`core_env.testing.check_env` checked (all of it passed)."""

    episodes: int
    """Episodes played by the invariant checks (determinism replays included)."""
    steps: int
    """Environment steps taken by the invariant checks."""
    forbidden_actions: int
    """Forbidden (masked) actions played on purpose, each checked to run as idle."""
    pettingzoo_tests: tuple[str, ...]
    """Library checks that ran (``parallel_api_test``, ``api_test``, ``parallel_seed_test``,
    or ``gymnasium.check_env``)."""


def _fail(message: str) -> NoReturn:
    raise EnvCheckError(message)


def _outside(space: gymnasium.Space, value: Any) -> str:
    """A hint naming the offending entries of a Box (or a Dict of Boxes)."""
    if isinstance(space, gymnasium.spaces.Dict) and isinstance(value, dict):
        return "".join(f"; [{k}]" + _outside(space[k], value[k]) for k in space.spaces
                       if k in value and not space[k].contains(value[k]))
    if isinstance(space, gymnasium.spaces.Box):
        v = np.asarray(value)
        if v.shape != space.shape or v.dtype != space.dtype:
            return f" (expected {space.dtype}{list(space.shape)}, got {v.dtype}{list(v.shape)})"
        bad = np.flatnonzero((v < space.low) | (v > space.high))
        return f" (indices {bad[:5].tolist()} out of bounds)"
    return ""


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(_equal(a[k], b[k]) for k in a))
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        # equal values (NaN == NaN); -0.0 == 0.0, which reused buffers may differ in
        return (a.dtype == b.dtype and a.shape == b.shape
                and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b
