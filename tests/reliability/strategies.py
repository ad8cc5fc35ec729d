"""Shared hypothesis settings, configuration strategies and action streams for the
reliability tests.

Settings: every property here is decorated with :data:`PROPERTY` (or :data:`HEAVY`), not a
global profile, so the other test directories keep their own defaults. In CI (the default)
a property tries ``PROPERTY_EXAMPLES`` = 60 examples and a heavy one (a whole episode or
more per example, run twice) ``HEAVY_EXAMPLES`` = 25, with no deadline; set
``HYPOTHESIS_PROFILE=thorough`` for 20x as many.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from core_env.config import ClusterConfig, CoreConfig, EpisodeConfig, RewardConfig, WorkloadConfig
from core_env.curves import MIXES

_SCALE = 20 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1
PROPERTY_EXAMPLES = 60 * _SCALE
HEAVY_EXAMPLES = 25 * _SCALE
_COMMON: dict[str, Any] = dict(deadline=None, derandomize=_SCALE == 1,
                               suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])
PROPERTY = settings(max_examples=PROPERTY_EXAMPLES, **_COMMON)
"""Settings of an ordinary property (one short episode per example)."""
HEAVY = settings(max_examples=HEAVY_EXAMPLES, **_COMMON)
"""Settings of a property whose examples run several episodes."""

ACTION_STYLES = ("uniform", "masked", "pile", "sticky", "idle", "mixed")
"""How :func:`actions_for` picks actions: uniform over [0, K] (masked actions included),
uniform over each node's legal actions, every node on one slot (capacity conflicts), keep
the last action with probability 0.8 (few switches), mostly idle, or a different style
every step."""


def _float(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def _range(lo: float, hi: float) -> st.SearchStrategy[tuple[float, float]]:
    return st.tuples(_float(lo, hi), _float(lo, hi)).map(lambda p: (min(p), max(p)))


@st.composite
def configs(draw: st.DrawFn, max_nodes: int = 6, max_slots: int = 6,
            max_arrival_slots: int = 25) -> CoreConfig:
    """A random *valid* configuration, small enough that an episode takes milliseconds:
    any speed mode (uniform, fixed heterogeneous, drawn from a list), any switching cost,
    either mix, tight or loose deadlines and caps, sometimes a step limit that truncates."""
    n = draw(st.integers(1, max_nodes))
    mode = draw(st.sampled_from(("uniform", "fixed", "choices")))
    speeds = st.floats(0.05, 4.0, allow_nan=False)
    cluster = ClusterConfig(
        n_nodes=n, max_visible_tasks=draw(st.integers(1, max_slots)),
        node_speeds=tuple(draw(st.lists(speeds, min_size=n, max_size=n)))
        if mode == "fixed" else None,
        speed_choices=tuple(draw(st.lists(speeds, min_size=1, max_size=3)))
        if mode == "choices" else None,
        switch_cost=draw(st.one_of(st.just(0.0), _float(0.0, 0.95))),
        switch_cost_spread=draw(st.one_of(st.just((1.0, 1.0)),
                                          st.tuples(_float(0.1, 1.0), _float(1.0, 5.0)))))
    w_lo = draw(st.integers(1, 12))
    workload = WorkloadConfig(
        mix=draw(st.sampled_from(sorted(MIXES))),
        load=draw(_float(0.05, 3.0)),
        base_arrival_rate=draw(_float(0.05, 1.5)),
        arrival_slots=draw(st.integers(1, max_arrival_slots)),
        required_work=draw(_range(0.5, 200.0)),
        deadline_slack=draw(_range(0.05, 4.0)),
        window=(w_lo, draw(st.integers(w_lo, 60))),
        parallelism_choices=tuple(draw(st.lists(st.integers(1, 8), min_size=1, max_size=4))),
        alpha_range=draw(_range(0.05, 1.0)))
    reward = RewardConfig(shaping_beta=draw(st.sampled_from((0.0, 1.0)) | _float(0.0, 10.0)))
    episode = EpisodeConfig(max_steps=draw(st.none() | st.integers(1, 60)))
    return CoreConfig(cluster=cluster, workload=workload, reward=reward, episode=episode)


def actions_for(style: str, rng: np.random.Generator, mask: np.ndarray,
                last: np.ndarray | None) -> np.ndarray:
    """int64[N] joint action in [0, K] from the per-node masks int8[N, K + 1]."""
    n, k1 = mask.shape
    if style == "mixed":
        style = ACTION_STYLES[int(rng.integers(len(ACTION_STYLES) - 1))]
    legal = (rng.random(mask.shape) * mask).argmax(axis=1)
    if style == "uniform":
        return rng.integers(0, k1, size=n)
    if style == "masked":
        return legal
    if style == "pile":
        return np.full(n, legal[0])
    if style == "sticky":
        keep = (rng.random(n) < 0.8) & (last is not None)
        return np.where(keep, last if last is not None else 0, legal)
    if style == "idle":
        return np.where(rng.random(n) < 0.8, 0, legal)
    raise ValueError(f"style: expected one of {ACTION_STYLES}, got {style!r}")
