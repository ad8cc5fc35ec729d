"""Fake episode functions for the tests of the runner and the store: deterministic stand-ins
for :func:`benchmarks.runner.run_episode_spec` that run no policy (a module of the tests, not
a test file, so that worker processes and Ray workers import them by name,
``tests.benchmarks.fake_episodes``)::

    run_episodes(specs, tmp_path, episode_fn=synthetic_episode, workers=2)
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.runner import EpisodeSpec

BASE_RATE = {"lara": 0.5, "edf": 0.4, "oracle_greedy": 0.8}


def synthetic_episode(spec: EpisodeSpec) -> dict[str, Any]:
    """Statistics that depend only on the spec: completion rate = base(policy) + 0.01 *
    (seed mod 5)."""
    done = round(100 * BASE_RATE[spec.policy]) + spec.seed % 5
    rate = done / 100  # what a real episode reports: completed / arrived
    return {"preset": spec.preset, "policy": spec.policy, "seed": spec.seed,
            "arrived": 100, "completed": done, "expired": 100 - done,
            "completion_rate": rate, "utilization": 0.7, "illegal_actions": 0,
            "capacity_conflicts": 0, "switches": 3, "restores": 2, "length": 300,
            "return": float(done)}


def slow_episode(spec: EpisodeSpec) -> dict[str, Any]:
    """:func:`synthetic_episode` after two seconds (a run that is still going when a test
    kills it)."""
    time.sleep(2.0)
    return synthetic_episode(spec)
