"""Forecasting cases: observed prefixes of synthetic curves with their true remaining work.

Used by the forecast benchmark (SPEC §4: prefixes at 10%, 20% and 40% of the work to
target) and to train learned forecasters. A case is one task: its curve and noise path are
drawn as in the environment (:func:`core_env.curves.draw_curve_params`), its target is the
hidden curve's value at s*, and it is observed as a scheduler would see it, once per slot of
training, up to a prefix end. The truth is the least work at or after the prefix end at
which the *observed* loss reaches the target (what success needs), minus the work done::

    cases = make_cases(np.random.default_rng(0), "train", 100, prefix=0.2)

Observation schedule (truth-independent): each task gets a work rate r drawn log-uniformly
from ``rate`` (node-slots per observation: in ``CoRE-v0`` a slot delivers k**alpha with
1 <= k <= 8 nodes at speed 1, about 1 to 5), lowered to at most a third of the prefix end so
that short prefixes still hold a few observations, and every increment is r times a
lognormal(0, 0.3) factor. Given the work done so far, the number and spacing of the
observations carry no information about the remaining work (``docs/forecasting.md``, "The
forecast benchmark", says why that matters).
"""

from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np

from core_env import pmath
from core_env.curves import (
    FAMILIES,
    draw_curve_params,
    evaluate_curves,
    first_crossing,
    grid_position,
)
from core_env.forecast.protocol import HistoryBatch


class ForecastCases(NamedTuple):
    """n forecasting cases (see the module docstring)."""

    batch: HistoryBatch  # the observed prefixes
    log_targets: np.ndarray  # float64[n], ln eps
    remaining: np.ndarray  # float64[n], true remaining work (inf if never reached)
    required: np.ndarray  # float64[n], least work at which the observed loss reaches eps
    family: np.ndarray  # int8[n], index into FAMILIES
    log_loss_table: np.ndarray  # float32[n, G], the observed paths (for analysis / training)


def make_cases(rng: np.random.Generator, mix: str, n: int, prefix: float | tuple[float, float],
               required_work: tuple[float, float] = (4.0, 160.0),
               rate: tuple[float, float] = (0.5, 6.0), max_obs: int = 256) -> ForecastCases:
    """Draw n cases from a mix.

    Args:
        rng: the generator (all randomness comes from it).
        mix: a key of ``core_env.curves.MIXES``.
        n: number of cases.
        prefix: fraction of the observed work-to-target at which the prefix ends, or a
            (low, high) range to draw it from uniformly.
        required_work: log-uniform range of s* (as ``WorkloadConfig.required_work``).
        rate: log-uniform range of the work per observation (see the module docstring).
        max_obs: most observations kept per prefix (the latest ones).

    Returns:
        The cases; those whose observed loss never reaches the target have ``remaining``
        = inf and should be skipped by metrics.
    """
    lo, hi = pmath.log(required_work[0]), pmath.log(required_work[1])
    s_star = pmath.exp(rng.uniform(lo, hi, size=n))
    params = draw_curve_params(rng, mix, s_star)
    family, _, obs_ll, log_target = evaluate_curves(params, mix)
    required = first_crossing(obs_ll, log_target)
    if np.isscalar(prefix):  # (np.isscalar does not narrow the type: the casts do)
        frac = np.full(n, float(cast(float, prefix)))
    else:
        span = cast("tuple[float, float]", prefix)
        frac = rng.uniform(span[0], span[1], size=n)
    reachable = np.isfinite(required)
    end = np.where(reachable, required, s_star) * frac
    if not 0.0 < rate[0] <= rate[1]:
        raise ValueError(f"rate: expected 0 < low <= high, got {rate!r}")
    # environment-like schedule, independent of the truth given the prefix end
    step = np.minimum(pmath.exp(rng.uniform(pmath.log(rate[0]), pmath.log(rate[1]), size=n)),
                      end / 3.0)
    jitter = pmath.exp(rng.normal(0.0, 0.3, size=(n, max_obs)))  # log-normal
    work = np.cumsum(step[:, None] * jitter, axis=1)
    length = np.clip((work <= end[:, None]).sum(axis=1), 2, max_obs)
    width = int(length.max())
    log_work = pmath.log(work[:, :width])
    pos = np.arange(width)[None, :]
    valid = pos < length[:, None]
    i0, w = grid_position(log_work)
    table = obs_ll.astype(np.float64)
    rows2 = np.arange(n)[:, None]
    log_loss = table[rows2, i0] + (table[rows2, i0 + 1] - table[rows2, i0]) * w
    log_work = np.where(valid, log_work, 0.0)
    log_loss = np.where(valid, log_loss, 0.0)
    rows = np.arange(n)
    x_now = log_work[rows, length - 1]
    remaining = first_crossing(obs_ll, log_target, x_now) - pmath.exp(x_now)
    batch = HistoryBatch(log_work=log_work, log_loss=log_loss, length=length.astype(np.int64),
                         key=rows.astype(np.int64))
    return ForecastCases(batch=batch, log_targets=log_target, remaining=remaining,
                         required=required, family=family, log_loss_table=obs_ll)


def family_names(cases: ForecastCases) -> np.ndarray:
    """The family name of every case."""
    return np.asarray(FAMILIES)[cases.family]
