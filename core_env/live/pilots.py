"""Pilot curves: what the live workload knows about each job kind before an episode.

A live task's target must be one its job can reach. As a real curve bank gives the simulator
its targets (:func:`core_env.banks.place_curves`), pilot runs give the live mode its: for each
job variant of a pilot set and each pilot seed, one run on one node, one work unit per slot,
recording the validation loss after every unit (its *reference curve*), and runs on k = 2, 4, 8
nodes from which the variant's scaling exponent alpha is fitted (the simulator's law: k nodes
deliver k**alpha units of single-node progress per slot). A live task draws a variant and a
pilot seed, runs with that seed, and gets the target its reference curve reaches by the
task's required work s* (as for the banks: the non-increasing fit of the curve at s*, raised to
the lowest observed loss up to s*), so with one node it reaches its target at s* exactly.

The shipped set ``live-pilots`` (``core_env/data/live-pilots.npz``, listed with its checksum in
the data manifest) is made by::

    python -m core_env.live.pilots              # about 5 minutes on one core

Pilots of your own jobs: ``make_pilots([JobSpec("mypkg.jobs:MyJob", {...}), ...])`` runs
them, ``pilots.save("my/pilots.npz")`` writes them with a manifest of how they were made
(the ``about`` array), and ``load_pilots("my/pilots.npz")``,
``LiveSchedulerEnv(pilots="my/pilots.npz")`` and ``mara-bench live --pilots my/pilots.npz``
read them back (checked as the shipped file is).

The set itself, its file format and loading it: :mod:`core_env.live.pilot_set` (its names,
:class:`Pilots` and :func:`load_pilots` among them, are re-exported here).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Union, cast

import numpy as np

from core_env.banks import DATA_DIR
from core_env.live.jobs import JobSpec, make_job

# the pilot set and its file live in core_env.live.pilot_set; its names stay importable here
from core_env.live.pilot_set import (  # noqa: F401 (re-exported)
    PILOTS,
    Pilots,
    data_digest,
    load_pilots,
    validate_pilots,
)
from core_env.live.worker import check_state
from core_env.utils.checks import check_int

DEFAULT_VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = tuple(
    ("mlp-digits", {"batch": 32, "unit_samples": 8192, **v}) for v in (
        {"hidden": 128, "lr": 0.00025, "lr_scaling": "sqrt"},
        {"hidden": 64, "lr": 0.000125, "lr_scaling": "sqrt"},
        {"hidden": 128, "lr": 0.0000625, "lr_scaling": "linear"},
        {"hidden": 64, "lr": 0.0005, "lr_scaling": "none"},
        {"hidden": 128, "lr": 0.000125, "momentum": 0.95, "lr_scaling": "sqrt"},
        {"hidden": 64, "lr": 0.00025, "lr_scaling": "linear"},
    ))
"""The job variants of the shipped pilot set: MLPs on digits that differ in width, learning
rate, momentum and learning-rate scaling with k. A work unit is 8,192 samples (256 SGD steps
on one node, tens of milliseconds), so that a slot's training outweighs the runtime's fixed
costs (serialisation, transfer, the driver)."""

def _isotonic_decreasing(y: np.ndarray) -> np.ndarray:
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(y, increasing=False).x, dtype=np.float64)


def fit_alpha(reference: list[float], scaled: dict[int, list[float]],
              levels: tuple[int, ...] = (8, 16, 32, 64)) -> list[float]:
    """Scaling exponents from one seed: for each level (the reference curve's loss after that
    many units) and each k, alpha = ln(units(1) / slots(k)) / ln k, where slots(k) is the
    first slot at which the k-node run is at or below the level."""
    out = []
    for u in levels:
        if u > len(reference):
            continue
        level = min(reference[:u])
        u1 = next(i + 1 for i, v in enumerate(reference) if v <= level)
        for k, losses in scaled.items():
            n = next((i + 1 for i, v in enumerate(losses) if v <= level), None)
            if n is not None and u1 > 1:
                out.append(math.log(u1 / n) / math.log(k))
    return out


JobLike = Union[JobSpec, tuple[str, dict[str, Any]]]
"""A job variant of a pilot set: a :class:`JobSpec` (its seed is not used: pilot seeds are
0 .. seeds - 1) or a ``(kind, variant)`` pair."""


def _variants(jobs: Iterable[JobLike]) -> list[tuple[str, dict[str, Any]]]:
    """``jobs`` as ``(kind, variant)`` pairs (ValueError naming a bad entry)."""
    out = []
    for i, job in enumerate(jobs):
        if isinstance(job, JobSpec):
            out.append((job.kind, dict(job.variant)))
        elif (isinstance(job, tuple) and len(job) == 2 and isinstance(job[0], str)
              and isinstance(job[1], dict)):
            JobSpec(job[0], dict(job[1]))  # checks the kind and variant
            out.append((job[0], dict(job[1])))
        else:
            raise ValueError(f"jobs[{i}]: expected a JobSpec or a (kind, variant) pair, got "
                             f"{job!r}")
    if not out:
        raise ValueError("jobs: expected at least one job variant")
    return out


def _name(kind: str, variant: dict[str, Any], seed: int) -> str:
    return f"{kind} {json.dumps(variant, sort_keys=True)} seed {seed}"


def _checked_loss(value: Any, kind: str, variant: dict[str, Any], seed: int, what: str
                  ) -> float:
    """``float(value)`` if a finite loss > 0, else ValueError naming the run and unit."""
    try:
        loss = float(value)
    except (TypeError, ValueError):
        loss = math.nan
    if not (math.isfinite(loss) and loss > 0):
        raise ValueError(f"pilot of {_name(kind, variant, seed)}: {what} gave loss {value!r}, "
                         f"expected a finite loss > 0")
    return loss


def _round_trip(kind: str, variant: dict[str, Any], seed: int) -> None:
    """Train a fresh job one unit, save it, load the state into another fresh job and check
    that both give the same loss on their next unit (ValueError naming what failed)."""
    name = _name(kind, variant, seed)
    job = make_job(JobSpec(kind, dict(variant), seed))
    _checked_loss(job.train(1, 1), kind, variant, seed, "unit 1")
    try:
        blob = check_state(job.save())
    except TypeError as e:
        raise ValueError(f"pilot of {name}: {e}") from e
    copy = make_job(JobSpec(kind, dict(variant), seed))
    try:
        copy.load(blob)
    except Exception as e:
        raise ValueError(f"pilot of {name}: load() of its own save() raised "
                         f"{type(e).__name__}: {e}") from e
    a = _checked_loss(job.train(1, 1), kind, variant, seed, "unit 2")
    b = _checked_loss(copy.train(1, 1), kind, variant, seed, "unit 2 after load()")
    if a != b:
        raise ValueError(f"pilot of {name}: a job loaded from save() does not continue as "
                         f"the saved one (next loss {b!r} against {a!r}); save() must keep "
                         f"everything train() depends on")


def record_pilots(variants: Iterable[JobLike] = DEFAULT_VARIANTS, seeds: int = 4,
                  units: int = 192, nodes: tuple[int, ...] = (2, 4, 8), alpha_seeds: int = 1,
                  progress: bool = False, round_trip: bool = False) -> dict[str, np.ndarray]:
    """Run the pilots (in this process, one thread) and return the file's arrays.

    Alpha of a variant is the median of :func:`fit_alpha` over its first ``alpha_seeds``
    seeds, clipped to [0.05, 1]; where no estimate exists (no k-node run reached the
    reference curve's levels) it is 1 (linear scaling, the most optimistic value) and a
    warning names the variant. ``round_trip``: round-trip each variant's ``save``/``load``
    once first (:func:`make_pilots` does).

    Raises:
        ValueError: a bad job list or count, a loss that is not finite and > 0 (naming the
            variant, seed and unit), or a ``save``/``load`` that fails its round trip.
    """
    pairs = _variants(variants)
    check_int("seeds", seeds, 1)
    check_int("units", units, 1)
    check_int("alpha_seeds", alpha_seeds, 0)
    for k in nodes:
        check_int("nodes", k, 2)
    specs, alpha, variant_of, seed_of, initial, loss = [], [], [], [], [], []
    assumed = []
    for v, (kind, variant) in enumerate(pairs):
        if round_trip:
            _round_trip(kind, variant, 0)
        specs.append(json.dumps({"kind": kind, "variant": variant}, sort_keys=True))
        estimates: list[float] = []
        for seed in range(seeds):
            job = make_job(JobSpec(kind, dict(variant), seed))
            job_loss = getattr(job, "loss", None)  # optional: not part of TrainingJob
            start = (_checked_loss(job_loss(), kind, variant, seed, "loss() before training")
                     if callable(job_loss) else None)
            curve = [_checked_loss(job.train(1, 1), kind, variant, seed, f"unit {u + 1}")
                     for u in range(units)]
            initial.append(curve[0] if start is None else start)
            variant_of.append(v)
            seed_of.append(seed)
            loss.append(curve)
            if seed < alpha_seeds:
                scaled = {}
                for k in nodes:
                    jk = make_job(JobSpec(kind, dict(variant), seed))
                    scaled[k] = [_checked_loss(jk.train(1, k), kind, variant, seed,
                                               f"unit {u + 1} on {k} nodes")
                                 for u in range(units // 2)]
                estimates += fit_alpha(curve, scaled)
            if progress:
                print(f"pilots: variant {v + 1}/{len(pairs)} ({kind}) seed {seed + 1}/{seeds}: "
                      f"loss {curve[0]:.3f} -> {min(curve):.3f}", flush=True)
        if not estimates:
            assumed.append(v)
            warnings.warn(f"pilots: alpha of {kind} {json.dumps(variant, sort_keys=True)} "
                          f"could not be fitted (no run on {list(nodes)} nodes reached its "
                          f"reference curve's levels in {units // 2} units); assuming 1.0, "
                          f"linear scaling (the most optimistic value)", stacklevel=2)
        a = statistics.median(estimates) if estimates else 1.0
        alpha.append(min(max(a, 0.05), 1.0))
    loss_arr = np.asarray(loss, dtype=np.float64)
    smooth = np.stack([np.exp(_isotonic_decreasing(np.log(c))) for c in loss_arr])
    about = {"source": "core_env.live.pilots.record_pilots",
             "job_kinds": sorted({k for k, _ in pairs}), "variants": len(pairs),
             "seeds": seeds, "units": units, "nodes": list(nodes), "alpha_seeds": alpha_seeds,
             "alpha_assumed": assumed, "loss": "the jobs' own loss() / train() values",
             "work": "the jobs' own work units"}
    return {"specs": np.asarray(specs), "alpha": np.asarray(alpha),
            "variant_of": np.asarray(variant_of, dtype=np.int64),
            "seed": np.asarray(seed_of, dtype=np.int64),
            "initial": np.asarray(initial, dtype=np.float64),
            "loss": loss_arr.ravel(), "smooth": smooth.ravel(),
            "about": np.asarray([json.dumps(about, sort_keys=True)])}


def make_pilots(jobs: Iterable[JobLike], seeds: int = 4, units: int = 192,
                nodes: tuple[int, ...] = (2, 4, 8), alpha_seeds: int = 1,
                progress: bool = False) -> Pilots:
    """Run the pilots of your own job variants and return the pilot set, for
    ``LiveSchedulerEnv(pilots=...)`` or :meth:`Pilots.save`.

    Args:
        jobs: :class:`JobSpec` s or ``(kind, variant)`` pairs (kinds as for
            :class:`~core_env.live.jobs.JobSpec`).
        seeds: pilot runs per variant (seeds 0 .. seeds - 1).
        units: work units of each reference curve (a preset's tasks need up to its
            ``required_work`` maximum: 40 for the Small layouts, 192 for Live-v0's).
        nodes: the node counts of the scaling runs that alpha is fitted from.
        alpha_seeds: seeds per variant with scaling runs.
        progress: print a line per pilot run.

    Each variant's ``save``/``load`` is round-tripped once before its runs (a job restored
    from its state must continue as the saved one), so a broken one fails here and not in
    an episode; see :func:`record_pilots` for the errors and the alpha warning.
    """
    pairs = _variants(jobs)
    arrays = record_pilots(pairs, seeds=seeds, units=units, nodes=nodes,
                           alpha_seeds=alpha_seeds, progress=progress, round_trip=True)
    return validate_pilots(Path("<pilots of " + ", ".join(k for k, _ in pairs) + ">"),
                           arrays)


def _write_shipped(arrays: dict[str, np.ndarray], out_dir: Path, name: str = PILOTS) -> Path:
    """Write the shipped set ``<name>.npz`` of the built-in variants into ``out_dir`` (the
    data folder) and record its checksum and provenance in the folder's manifest (created if
    missing); the manifest describes it, so the file has no ``about`` array. A set of your
    own jobs is written by :meth:`Pilots.save`."""
    import hashlib

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.npz"
    np.savez(path, **cast("dict[str, Any]", {k: v for k, v in arrays.items() if k != "about"}))
    manifest_path = out_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    files = manifest.setdefault("files", {})
    files[path.name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                        "source": "pilot runs of core_env.live's built-in job kinds "
                                  "(python -m core_env.live.pilots)",
                        "licence": "MIT (this project)",
                        "pilot_runs": int(arrays["seed"].shape[0]),
                        "variants": int(arrays["specs"].shape[0]),
                        "loss": "validation cross-entropy",
                        "work": "work units of each variant (unit_samples samples)"}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m core_env.live.pilots",
                                 description="Record the live mode's pilot curves.")
    ap.add_argument("--out", type=Path, default=DATA_DIR, help="data folder")
    ap.add_argument("--seeds", type=int, default=4, help="pilot seeds per variant")
    ap.add_argument("--units", type=int, default=192, help="units per reference curve")
    args = ap.parse_args(argv)
    arrays = record_pilots(seeds=args.seeds, units=args.units, progress=True)
    path = _write_shipped(arrays, args.out)
    print(f"wrote {path}; alpha per variant: "
          + ", ".join(f"{a:.2f}" for a in arrays["alpha"]))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
