"""The scheduling suites of ``mara-bench`` (SPEC §7) and :func:`run_suite`, their Python API.

=========  ==========================================================  =======  =========
suite      presets                                                      seeds    bound
=========  ==========================================================  =======  =========
default    CoRE-v0, CoRE-Heavy-v0 (what ``make demo`` runs)              10       no
schedule   CoRE-v0, CoRE-Heavy-v0, CoRE-Extreme-v0, CoRE-HeldOut-v0,     50       yes
           CoRE-Real-v0, CoRE-RealTrace-v0
baselines  CoRE-v0, CoRE-Heavy-v0, CoRE-Extreme-v0, CoRE-HeldOut-v0:      20       no
           the baseline schedulers only (docs/baselines.md)
ablation   CoRE-v0, CoRE-Heavy-v0, CoRE-HeldOut-v0: MARA and its          50       no
           ablations from ``experiments/`` (paired against their control)
fairness   CoRE-v0 and CoRE-Tenants-v0 at 1x, 1.5x and 2x load: the       20       no
           group audit (``fairness.md``, :mod:`benchmarks.fairness`)
=========  ==========================================================  =======  =========

Every suite runs its policies unless ``policies`` narrows or extends them: built-in names
(:data:`mara_agents.policy.POLICY_NAMES`) or your own ``package.module:Factory`` specs
(:mod:`mara_agents.policy`), so ``run_suite("default", out, policies=["lara",
"mypkg.sched:MyPolicy"])`` gives the paired table for your scheduler. Seeds are 0..n-1
(``seed_offset`` shifts them); each policy sees the same seeds, hence the same tasks and
noise, so differences are paired.

Suites with a bound also compute, for every (preset, seed), the clairvoyant upper bound on
completions (:func:`core_env.bound.clairvoyant_bound`, see ``docs/bound.md``). It runs
through the same runner as the episodes (as the pseudo-policy :data:`BOUND_POLICY`: in
parallel, stored per seed, resumable), and the table gains each policy's completions as a
share of the bound and a row for the bound itself.

On the command line each suite is ``mara-bench <suite>`` (:data:`COMMANDS`, flags from
:mod:`benchmarks.flags`); its values are checked by argparse, and :func:`run_suite`'s own
checks (:func:`check_suite_args`) are for Python callers::

    mara-bench default --presets CoRE-Small-v0 --seeds 2 --policies lara edf --out /tmp/x
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.fairness import FAIRNESS_PRESETS
from benchmarks.flags import (
    Command,
    add_backend,
    add_fresh,
    add_out,
    add_policies,
    add_presets,
    add_reference,
    add_seeds,
    add_workers,
)
from benchmarks.report import write_report
from benchmarks.runner import BACKENDS, EpisodeSpec, run_episode_spec, run_episodes
from core_env.presets import split_preset
from core_env.utils.checks import check_int, fail
from mara_agents.policy_spec import BASELINES, FAIR_FRACTIONS, PolicySpec


class Suite(NamedTuple):
    """A named scheduling suite."""

    presets: tuple[str, ...]
    seeds: int
    bound: bool = False
    policies: tuple[str, ...] | None = None
    """None: every baseline, plus MARA after LARA when its checkpoint is shipped."""
    reference: str = "lara"
    """The policy the paired differences are taken against."""


FAIRNESS_POLICIES = ("lara", "fair_lara", "edf", "successive_halving", "las", "mara",
                     *(f"mara_fair@{f}" for f in FAIR_FRACTIONS))
"""The ``fairness`` suite's policies: MARA-fair at every shipped fraction (its frontier)."""

ABLATION_POLICIES = ("lara", "mara", *(f"mara_agents.ablations:{v}" for v in (
    "mara_ft", "mara_wls", "mara_noshaping", "mat_dec")))
"""The ``ablation`` suite's policies: MARA's fine-tuned ablations, shipped with the package
(:mod:`mara_agents.ablations`)."""

SUITES = {
    "default": Suite(("CoRE-v0", "CoRE-Heavy-v0"), 10),
    "schedule": Suite(("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0",
                       "CoRE-Real-v0", "CoRE-RealTrace-v0", "CoRE-Switch-v0",
                       "CoRE-Cluster-v0"), 50, bound=True),
    "baselines": Suite(("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0",
                        "CoRE-Switch-v0", "CoRE-Cluster-v0"), 20, policies=BASELINES),
    "ablation": Suite(("CoRE-v0", "CoRE-Heavy-v0", "CoRE-HeldOut-v0"), 50,
                      policies=ABLATION_POLICIES, reference="mara_agents.ablations:mara_ft"),
    "fairness": Suite(FAIRNESS_PRESETS, 20, policies=FAIRNESS_POLICIES),
}
"""The suites by name (see the module docstring)."""

FAIRNESS_SUITES = ("fairness",)
"""The suites that also write the group report (:mod:`benchmarks.fairness`)."""

BOUND_POLICY = "bound"
"""Pseudo-policy name of the clairvoyant-bound records (``<preset>__bound__<seed>.json``)."""

BOUND_OPTIONS: dict[str, Any] = {"scaling": "concave", "time_limit": 10.0}
"""Options of :func:`core_env.bound.clairvoyant_bound` used by the suites."""


def suite_policies(suite: str) -> tuple[str, ...]:
    """The policies a suite runs by default (see :data:`SUITES`)."""
    policies = SUITES[suite].policies
    if policies is not None:
        return policies
    from mara_agents.mat.checkpoint import shipped  # torch: only when a suite asks

    names = list(BASELINES)
    if shipped().is_file():
        names.insert(names.index("lara") + 1, "mara")
    return tuple(names)


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
    episode of the policy (:func:`benchmarks.runner.run_episode_spec`)."""
    if spec.policy == BOUND_POLICY:
        return bound_record(spec)
    return run_episode_spec(spec)


def resolve_policies(suite: str, policies: Sequence[str | PolicySpec] | None = None,
                     reference: str | PolicySpec | None = None) -> tuple[PolicySpec, ...]:
    """The policies a run of ``suite`` takes, parsed (:class:`PolicySpec`) and checked
    against each other and ``reference`` (what no single flag can check); by default the
    suite's, each checked to resolve (``policies`` given are checked by the caller:
    argparse, or :func:`check_suite_args`).

    Raises:
        ValueError: a default that does not resolve, the bound's name as a policy, a policy
            twice, or a ``reference`` that is not one of the policies.
    """
    if policies:
        names = [str(p) for p in policies]
    else:
        names = list(suite_policies(suite))
    if BOUND_POLICY in names:
        raise ValueError(f"policies: {BOUND_POLICY!r} is the bound's record name, not a "
                         f"policy")
    if len(set(names)) != len(names):
        raise ValueError(f"policies: each at most once, got {names}")
    if reference is not None and str(reference) not in names:
        raise ValueError(f"reference: expected one of the policies {names}, "
                         f"got {str(reference)!r}")
    if policies:
        return tuple(PolicySpec.parse(p) for p in policies)
    return tuple(PolicySpec.parse(p).check() for p in names)


def check_suite_args(suite: str, policies: Sequence[str] | None = None,
                     presets: Sequence[str] | None = None, seeds: int | None = None,
                     seed_offset: int = 0, workers: int = 2, backend: str = "local",
                     reference: str | None = None
                     ) -> tuple[tuple[PolicySpec, ...], tuple[str, ...], int]:
    """Validate a suite's arguments before anything runs; returns ``(policies, presets,
    seeds)`` with the suite's defaults filled in.

    Raises:
        ValueError: naming the argument and the valid values.
    """
    import core_env

    if suite not in SUITES:
        fail("suite", suite, f"one of {sorted(SUITES)}")
    spec = SUITES[suite]
    parsed = [p if str(p) == BOUND_POLICY else PolicySpec.parse(p).check()  # named below
              for p in policies or ()]
    specs = resolve_policies(suite, parsed, reference)
    presets = tuple(presets) if presets else spec.presets
    unknown = [p for p in presets if split_preset(p)[0] not in core_env.PRESETS]
    if unknown:
        raise ValueError(f"presets: unknown {unknown}; expected some of "
                         f"{sorted(core_env.PRESETS)}")
    for p in presets:
        try:
            core_env.make_config(p)
        except ValueError as e:
            raise ValueError(f"presets: {p!r}: {e}") from e
    n = check_int("seeds", spec.seeds if seeds is None else seeds, 1)
    check_int("seed_offset", seed_offset, 0)
    check_int("workers", workers, 1)
    if backend not in BACKENDS:
        fail("backend", backend, f"one of {BACKENDS}")
    return specs, presets, n


def check_policies_fit(policies: Sequence[str | PolicySpec], presets: Sequence[str]) -> None:
    """Build every policy once per distinct layout of the presets (their observation and
    state layouts; per preset for a policy that depends on it, :attr:`PolicySpec.per_preset`),
    so that a suite fails before anything runs (a MARA checkpoint trained for another
    cluster size, a factory that fails).

    Raises:
        ValueError: naming the policy, the preset and why.
    """
    import core_env
    from mara_agents.policy import make_policy

    layouts: dict[str, Any] = {}
    for preset in presets:
        env = core_env.parallel_env(preset=preset)
        layouts[preset] = (env.layout, env.state_layout)
    for policy in map(PolicySpec.parse, policies):
        built: set[Any] = set()
        for preset in presets:
            key = (layouts[preset], preset if policy.per_preset else None)
            if key in built:
                continue
            built.add(key)
            try:
                make_policy(policy, core_env.parallel_env(preset=preset), preset=preset)
            except Exception as e:  # a user's factory may raise anything
                what = "" if isinstance(e, ValueError) else f"{type(e).__name__}: "
                raise ValueError(f"policy {policy.text!r} cannot run on {preset}: {what}{e}"
                                 ) from e


def run_suite(suite: str, out: Path, policies: Sequence[str] | None = None,
              presets: Sequence[str] | None = None, seeds: int | None = None,
              seed_offset: int = 0, workers: int = 2, backend: str = "local",
              ray_address: str | None = None, progress: bool = True,
              bound: bool | None = None, reference: str | None = None,
              fresh: bool = False) -> str:
    """Run (or resume) a suite into ``out``; returns the Markdown table.

    Args:
        suite: a name of :data:`SUITES`.
        out: the results folder (rerunning into it resumes).
        policies: built-in names or ``package.module:Factory`` specs (default: the suite's).
        presets: preset ids (default: the suite's).
        seeds: number of seeds; ``seed_offset`` is the first.
        workers: local processes (1: in this process); ``backend="ray"`` runs on Ray
            (``ray_address`` joins a cluster).
        progress: show a progress bar.
        bound: compute the clairvoyant bound of every (preset, seed) (default: the suite's
            setting in :data:`SUITES`).
        reference: the policy every other is paired against in the table (default: the
            suite's, ``lara``; it must be one of ``policies``).
        fresh: recompute every episode, also those stored in ``out``.

    Raises:
        ValueError: a bad argument, before anything runs or is written.
    """
    specs, presets, n = check_suite_args(suite, policies, presets, seeds, seed_offset,
                                         workers, backend, reference)
    return _run_checked(suite, out, specs, presets, n, seed_offset, workers, backend,
                        ray_address, progress, bound, reference, fresh)


def _run_checked(suite: str, out: Path, policies: tuple[PolicySpec, ...],
                 presets: Sequence[str], n: int, seed_offset: int, workers: int, backend: str,
                 ray_address: str | None, progress: bool, bound: bool | None,
                 reference: str | None, fresh: bool = False) -> str:
    """:func:`run_suite` on checked arguments (the policies built once per layout first)."""
    spec = SUITES[suite]
    reference = spec.reference if reference is None else str(reference)
    check_policies_fit(policies, presets)
    with_bound = spec.bound if bound is None else bound
    runs: tuple[PolicySpec | None, ...] = (*policies, None) if with_bound else policies
    episodes = [EpisodeSpec(p, BOUND_POLICY if pol is None else pol.text, seed_offset + s, pol)
                for p in presets for pol in runs for s in range(n)]
    results = run_episodes(episodes, out, episode_fn=run_spec, backend=backend,
                           workers=workers, ray_address=ray_address, progress=progress,
                           policy_hashes={p.text: p.fingerprint() for p in policies},
                           fresh=fresh)
    meta: dict[str, Any] = {"suite": suite, "policies": [p.text for p in policies],
                            "presets": list(presets),
                            "seeds": list(range(seed_offset, seed_offset + n)),
                            "backend": backend, "reference": reference}
    if with_bound:
        meta["bound_options"] = dict(BOUND_OPTIONS)
    table = write_report(results, out, meta)
    if suite in FAIRNESS_SUITES:
        from benchmarks.fairness import write_fairness

        table += "\n" + write_fairness(results, out)
    return table


HELP = {
    "default": "every baseline and MARA on CoRE-v0 and CoRE-Heavy-v0, seeds 0-9",
    "schedule": "every baseline and MARA on every preset, 50 seeds, with the clairvoyant "
                "bound",
    "baselines": "the baseline schedulers on four presets, 20 seeds (docs/baselines.md)",
    "ablation": "MARA and its fine-tuned ablations (mara_agents.ablations), 50 seeds, paired "
                "against their control",
    "fairness": "who loses when tasks miss: per-group completion, worst group, gaps and "
                "Jain's index on CoRE-v0 and CoRE-Tenants-v0 at 1x, 1.5x, 2x load, 20 seeds",
}
"""The one-line help of each suite's subcommand."""


def add_arguments(parser: argparse.ArgumentParser, suite: str) -> None:
    """The flags of a scheduling suite, its defaults those of :data:`SUITES`."""
    spec = SUITES[suite]
    add_policies(parser, None, help="built-in names or package.module:Factory specs of your "
                                    "own (default: the suite's)", parsed=True)
    add_presets(parser, spec.presets)
    add_seeds(parser, spec.seeds)
    add_workers(parser)
    add_backend(parser, "where episodes run", "ray.init(address=...) to join a cluster")
    add_reference(parser, None, f"the policy the others are paired against (default: "
                                f"{spec.reference})")
    add_out(parser, Path("results") / suite, "results folder; rerun to resume")
    add_fresh(parser)


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench <suite>``: the values are checked by argparse, the policies against
    each other here, once (:func:`resolve_policies`)."""
    policies = resolve_policies(args.suite, args.policies, args.reference)  # parsed once
    print(_run_checked(args.suite, args.out, policies, tuple(args.presets), args.seeds,
                       args.seed_offset, args.workers, args.backend, args.ray_address,
                       progress=True, bound=None, reference=args.reference,
                       fresh=args.fresh))
    print(f"results in {args.out}/")
    return 0


COMMANDS = tuple(Command(name, HELP[name], functools.partial(add_arguments, suite=name),
                         run_command) for name in SUITES)
"""The scheduling suites' subcommands of ``mara-bench``."""
