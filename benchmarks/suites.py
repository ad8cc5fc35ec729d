"""Named scheduling suites of ``mara-bench`` (SPEC §7).

=========  ==========================================================  =======
suite      presets                                                      seeds
=========  ==========================================================  =======
default    CoRE-v0, CoRE-Heavy-v0 (what ``make demo`` runs)              10
schedule   CoRE-v0, CoRE-Heavy-v0, CoRE-Extreme-v0, CoRE-HeldOut-v0      50
=========  ==========================================================  =======

Every suite runs every policy of :data:`POLICIES` unless ``--policies`` narrows it. Seeds
are 0..n-1 (``--seed-offset`` shifts them); each policy sees the same seeds, hence the same
tasks and noise, so differences are paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import EpisodeSpec, run_episodes, write_report

from mara_agents.policy import POLICY_NAMES as POLICIES  # noqa: E402  (table order)

SUITES = {
    "default": {"presets": ("CoRE-v0", "CoRE-Heavy-v0"), "seeds": 10},
    "schedule": {"presets": ("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0"),
                 "seeds": 50},
}


def run_suite(suite: str, out: Path, policies: Sequence[str] | None = None,
              presets: Sequence[str] | None = None, seeds: int | None = None,
              seed_offset: int = 0, workers: int = 2, backend: str = "local",
              ray_address: str | None = None, progress: bool = True) -> str:
    """Run (or resume) a suite into ``out``; returns the Markdown table."""
    if suite not in SUITES:
        raise ValueError(f"suite: expected one of {sorted(SUITES)}, got {suite!r}")
    spec = SUITES[suite]
    policies = tuple(policies or POLICIES)
    presets = tuple(presets or spec["presets"])
    n = spec["seeds"] if seeds is None else seeds
    if n < 1:
        raise ValueError(f"seeds: expected >= 1, got {n}")
    episodes = [EpisodeSpec(p, pol, seed_offset + s) for p in presets for pol in policies
                for s in range(n)]
    results = run_episodes(episodes, out, backend=backend, workers=workers,
                           ray_address=ray_address, progress=progress)
    meta = {"suite": suite, "policies": list(policies), "presets": list(presets),
            "seeds": list(range(seed_offset, seed_offset + n)), "backend": backend}
    return write_report(results, out, meta)
