"""The shared validators: one message format, bools and non-finite numbers refused."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from core_env.utils.checks import check_int, check_ints, check_number


@pytest.mark.parametrize("value,minimum,maximum,message", [
    (0, 1, None, "seeds: expected an integer >= 1, got 0"),
    (True, None, None, "seeds: expected an integer, got True"),
    (2.0, 1, None, "seeds: expected an integer >= 1, got 2.0"),
    (5, 0, 3, "seeds: expected an integer in [0, 3], got 5"),
    (-1, None, 0, None), (4, None, 3, "seeds: expected an integer <= 3, got 4")])
def test_check_int_names_the_argument_and_what_was_expected(value, minimum, maximum, message):
    if message is None:
        assert check_int("seeds", value, minimum, maximum) == -1
        return
    with pytest.raises(ValueError) as e:
        check_int("seeds", value, minimum, maximum)
    assert str(e.value) == message


def test_numpy_integers_pass_unless_the_field_is_stored_as_given():
    assert check_int("n", np.int64(3), 1) == 3 and type(check_int("n", np.int64(3))) is int
    with pytest.raises(ValueError, match="n: expected an integer >= 1"):
        check_int("n", np.int64(3), 1, exact=True)

    @dataclass
    class Config:
        steps: int = 1
        seed: int = 0

    check_ints(Config(), ("steps", "seed"), 0)
    with pytest.raises(ValueError, match="steps: expected an integer >= 1, got 0"):
        check_ints(Config(steps=0), ("steps", "seed"), 1)


@pytest.mark.parametrize("value", [math.nan, math.inf, True, "1", None, 10**400])
def test_check_number_refuses_what_is_not_a_finite_real(value):
    with pytest.raises(ValueError, match="lr: expected a finite number"):
        check_number("lr", value)


def test_check_number_bounds_and_open_ends():
    assert check_number("c", 0.0, 0.0, 1.0, hi_open=True) == 0.0
    with pytest.raises(ValueError, match=r"c: expected a finite number in \[0.0, 1.0\), got 1.0"):
        check_number("c", 1.0, 0.0, 1.0, hi_open=True)
    with pytest.raises(ValueError, match=r"lr: expected a finite number in \(0, inf\]"):
        check_number("lr", 0, 0, lo_open=True)
