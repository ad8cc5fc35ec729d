"""Named scheduling suites of ``mara-bench`` (SPEC §7).

=========  ==========================================================  =======  =========
suite      presets                                                      seeds    bound
=========  ==========================================================  =======  =========
default    CoRE-v0, CoRE-Heavy-v0 (what ``make demo`` runs)              10       no
schedule   CoRE-v0, CoRE-Heavy-v0, CoRE-Extreme-v0, CoRE-HeldOut-v0,     50       yes
           CoRE-Real-v0, CoRE-RealTrace-v0
ablation   CoRE-v0, CoRE-Heavy-v0, CoRE-HeldOut-v0: MARA and its          50       no
           ablations (differences paired against ``mara-ft``)
=========  ==========================================================  =======  =========

Every suite runs every policy of :data:`POLICIES` (the ``ablation`` suite: LARA, MARA and
its ablations, :data:`ABLATION_POLICIES`) unless ``--policies`` narrows it. Seeds
are 0..n-1 (``--seed-offset`` shifts them); each policy sees the same seeds, hence the same
tasks and noise, so differences are paired.

Suites with a bound also compute, for every (preset, seed), the clairvoyant upper bound on
completions (:func:`core_env.bound.clairvoyant_bound`, see ``docs/bound.md``). It runs
through the same harness as the episodes (as the pseudo-policy :data:`BOUND_POLICY`: in
parallel, stored per seed, resumable), and the table gains each policy's completions as a
share of the bound and a row for the bound itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from benchmarks.harness import EpisodeSpec, run_episode_spec, run_episodes, write_report

from mara_agents.policy import POLICY_NAMES as POLICIES  # noqa: E402  (table order)

ABLATION_POLICIES = ("lara", "mara", "mara-fast", "mara-d32", "mara-staged", "mara-2m", "mara-ft",
                     "mara-wls", "mara-noshaping", "mat-dec")
"""The ``ablation`` suite's policies (see ``mara_agents.policy.MARA_CHECKPOINTS``)."""

SUITES = {
    "default": {"presets": ("CoRE-v0", "CoRE-Heavy-v0"), "seeds": 10, "bound": False,
                "mara": True},
    "schedule": {"presets": ("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0",
                             "CoRE-Real-v0", "CoRE-RealTrace-v0"),
                 "seeds": 50, "bound": True, "mara": True},
    "ablation": {"presets": ("CoRE-v0", "CoRE-Heavy-v0", "CoRE-HeldOut-v0"), "seeds": 50,
                 "bound": False, "policies": ABLATION_POLICIES, "reference": "mara-ft"},
}
"""Suites with ``"mara": True`` also run MARA (after LARA in the tables) when its shipped
checkpoint is present (:func:`suite_policies`): ``default`` (``make demo``) and ``schedule``."""


def suite_policies(suite: str) -> tuple[str, ...]:
    """The policies a suite runs by default (see :data:`SUITES`)."""
    if "policies" in SUITES[suite]:
        return tuple(SUITES[suite]["policies"])
    names = list(POLICIES)
    shipped = resources.files("mara_agents") / "checkpoints" / "mara_default.pt"
    if SUITES[suite].get("mara") and shipped.is_file():
        names.insert(names.index("lara") + 1, "mara")
    return tuple(names)

BOUND_POLICY = "bound"
"""Pseudo-policy name of the clairvoyant-bound records (``<preset>__bound__<seed>.json``)."""

BOUND_OPTIONS: dict[str, Any] = {"scaling": "concave", "time_limit": 10.0}
"""Options of :func:`core_env.bound.clairvoyant_bound` used by the suites."""


def bound_record(spec: EpisodeSpec) -> dict[str, Any]:
    """The clairvoyant bound of ``spec.preset`` at ``spec.seed`` as a result record.

    Fields: preset, policy (= :data:`BOUND_POLICY`), seed, then every field of
    :class:`core_env.bound.BoundResult` (bound, n_tasks, candidates, method, lp_value,
    milp_dual, milp_primal, milp_gap, lp_seconds, milp_seconds, scaling), and bound_rate
    (bound / n_tasks).
    """
    from core_env.bound import clairvoyant_bound

    res = clairvoyant_bound(spec.preset, spec.seed, **BOUND_OPTIONS)
    return {"preset": spec.preset, "policy": BOUND_POLICY, "seed": spec.seed,
            **res._asdict(), "bound_rate": res.rate}


def run_spec(spec: EpisodeSpec) -> dict[str, Any]:
    """The suites' episode function: a bound record for :data:`BOUND_POLICY`, else an
    episode of the policy (:func:`benchmarks.harness.run_episode_spec`)."""
    if spec.policy == BOUND_POLICY:
        return bound_record(spec)
    return run_episode_spec(spec)


def run_suite(suite: str, out: Path, policies: Sequence[str] | None = None,
              presets: Sequence[str] | None = None, seeds: int | None = None,
              seed_offset: int = 0, workers: int = 2, backend: str = "local",
              ray_address: str | None = None, progress: bool = True,
              bound: bool | None = None) -> str:
    """Run (or resume) a suite into ``out``; returns the Markdown table.

    Args:
        bound: compute the clairvoyant bound of every (preset, seed) (default: the suite's
            setting in :data:`SUITES`).
    """
    if suite not in SUITES:
        raise ValueError(f"suite: expected one of {sorted(SUITES)}, got {suite!r}")
    spec = SUITES[suite]
    policies = tuple(policies or suite_policies(suite))
    if BOUND_POLICY in policies:
        raise ValueError(f"policies: {BOUND_POLICY!r} is the bound's record name, not a "
                         f"policy; expected names from {list(POLICIES)}")
    presets = tuple(presets or spec["presets"])
    n = spec["seeds"] if seeds is None else seeds
    if n < 1:
        raise ValueError(f"seeds: expected >= 1, got {n}")
    with_bound = spec["bound"] if bound is None else bound
    runs = (*policies, BOUND_POLICY) if with_bound else policies
    episodes = [EpisodeSpec(p, pol, seed_offset + s) for p in presets for pol in runs
                for s in range(n)]
    results = run_episodes(episodes, out, episode_fn=run_spec, backend=backend,
                           workers=workers, ray_address=ray_address, progress=progress)
    meta = {"suite": suite, "policies": list(policies), "presets": list(presets),
            "seeds": list(range(seed_offset, seed_offset + n)), "backend": backend,
            "reference": spec.get("reference", "lara")}
    if with_bound:
        meta["bound_options"] = dict(BOUND_OPTIONS)
    return write_report(results, out, meta)
