"""Argument checks with one message format: ``"<name>: expected <allowed>, got <value>"``.

Every validator of the project (configuration fields, job arguments, suite arguments,
command-line flags) raises through these, so a bad value reads the same wherever it is
caught::

    >>> check_int("seeds", 0, minimum=1)
    Traceback (most recent call last):
    ValueError: seeds: expected an integer >= 1, got 0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np


def fail(name: str, value: Any, allowed: str) -> NoReturn:
    """Raise ``ValueError("<name>: expected <allowed>, got <value!r>")``."""
    raise ValueError(f"{name}: expected {allowed}, got {value!r}")


def is_int(value: Any) -> bool:
    """True for whole numbers (Python or numpy integers), False for bools."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value: Any, minimum: int | None = None,
              maximum: int | None = None, *, exact: bool = False) -> int:
    """``int(value)`` if it is a whole number in ``[minimum, maximum]`` (either bound may be
    None), else ``ValueError`` naming ``name``. ``exact``: a Python ``int`` only (not a numpy
    integer), for fields that are stored as they are given (frozen dataclasses, JSON)."""
    ok = is_int(value) and (isinstance(value, int) or not exact)
    if not ok or (minimum is not None and value < minimum) or \
            (maximum is not None and value > maximum):
        if minimum is not None and maximum is not None:
            fail(name, value, f"an integer in [{minimum}, {maximum}]")
        elif minimum is not None:
            fail(name, value, f"an integer >= {minimum}")
        elif maximum is not None:
            fail(name, value, f"an integer <= {maximum}")
        fail(name, value, "an integer")
    return int(value)


def check_ints(obj: Any, names: Sequence[str], minimum: int) -> None:
    """:func:`check_int` (``exact``) on each of ``obj``'s attributes ``names`` (a dataclass's
    fields, stored as given)."""
    for name in names:
        check_int(name, getattr(obj, name), minimum, exact=True)


def check_number(name: str, value: Any, lo: float = -math.inf, hi: float = math.inf, *,
                 lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` if it is a finite real number (not a bool) in the interval from ``lo`` to
    ``hi`` (closed unless ``lo_open`` / ``hi_open``), else ``ValueError`` naming ``name``."""
    try:
        ok = (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
              and math.isfinite(value))
    except OverflowError:  # an int too large for a float
        ok = False
    if ok:
        ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        if lo == -math.inf and hi == math.inf:
            fail(name, value, "a finite number")
        lb, rb = "(" if lo_open else "[", ")" if hi_open else "]"
        fail(name, value, f"a finite number in {lb}{lo}, {hi}{rb}")
    return value
