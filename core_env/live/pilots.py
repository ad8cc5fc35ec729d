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

Arrays of the file (P pilot runs of W units, V variants):

==============  ==============  ===========================================================
array           dtype           meaning
==============  ==============  ===========================================================
``specs``       str[V]          JSON ``{"kind": ..., "variant": {...}}`` of each variant
``alpha``       float64[V]      fitted scaling exponent of each variant
``variant_of``  int64[P]        variant of each pilot run
``seed``        int64[P]        its seed
``initial``     float64[P]      validation loss before training
``loss``        float64[P*W]    loss after units 1..W, runs one after another
``smooth``      float64[P*W]    non-increasing (isotonic) fit of ``loss``
==============  ==============  ===========================================================
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from core_env.banks import DATA_DIR, BankError, _read_npz
from core_env.live.jobs import JobSpec, make_job

PILOTS = "live-pilots"
"""Name of the shipped pilot set (file ``<name>.npz`` in :data:`core_env.banks.DATA_DIR`)."""

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

_ARRAYS = {"specs": "U", "alpha": "f", "variant_of": "i", "seed": "i", "initial": "f",
           "loss": "f", "smooth": "f"}


@dataclass(frozen=True, eq=False)
class Pilots:
    """A pilot set (see the module docstring)."""

    specs: tuple[tuple[str, dict[str, Any]], ...]
    alpha: np.ndarray
    variant_of: np.ndarray
    seed: np.ndarray
    initial: np.ndarray
    loss: np.ndarray  # float64[P, W]
    smooth: np.ndarray  # float64[P, W]

    @property
    def units(self) -> int:
        """W: the units every reference curve covers."""
        return int(self.loss.shape[1])

    def job(self, run: int) -> JobSpec:
        """The job of pilot run ``run`` (its variant at its seed)."""
        kind, variant = self.specs[int(self.variant_of[run])]
        return JobSpec(kind, dict(variant), int(self.seed[run]))

    def target(self, run: int, required: float) -> float:
        """The loss pilot run ``run`` reaches by ``required`` units (>= 1; see the module
        docstring): its smooth curve there, raised to the lowest observed loss up to it."""
        u = min(max(int(math.ceil(required)), 1), self.units)
        return max(float(self.loss[run, :u].min()), float(self.smooth[run, u - 1]))


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


def record_pilots(variants=DEFAULT_VARIANTS, seeds: int = 4, units: int = 192,
                  nodes: tuple[int, ...] = (2, 4, 8), alpha_seeds: int = 1,
                  progress: bool = False) -> dict[str, np.ndarray]:
    """Run the pilots (in this process, one thread) and return the file's arrays.

    Alpha of a variant is the median of :func:`fit_alpha` over its first ``alpha_seeds``
    seeds, clipped to [0.05, 1].
    """
    specs, alpha, variant_of, seed_of, initial, loss = [], [], [], [], [], []
    for v, (kind, variant) in enumerate(variants):
        specs.append(json.dumps({"kind": kind, "variant": variant}, sort_keys=True))
        estimates: list[float] = []
        for seed in range(seeds):
            job = make_job(JobSpec(kind, dict(variant), seed))
            start = float(job.loss()) if callable(getattr(job, "loss", None)) else None
            curve = [float(job.train(1, 1)) for _ in range(units)]
            initial.append(curve[0] if start is None else start)
            variant_of.append(v)
            seed_of.append(seed)
            loss.append(curve)
            if seed < alpha_seeds:
                scaled = {}
                for k in nodes:
                    jk = make_job(JobSpec(kind, dict(variant), seed))
                    scaled[k] = [float(jk.train(1, k)) for _ in range(units // 2)]
                estimates += fit_alpha(curve, scaled)
            if progress:
                print(f"variant {v} seed {seed}: loss {curve[0]:.3f} -> {min(curve):.3f}",
                      flush=True)
        a = statistics.median(estimates) if estimates else 1.0
        alpha.append(min(max(a, 0.05), 1.0))
    loss_arr = np.asarray(loss, dtype=np.float64)
    smooth = np.stack([np.exp(_isotonic_decreasing(np.log(c))) for c in loss_arr])
    return {"specs": np.asarray(specs), "alpha": np.asarray(alpha),
            "variant_of": np.asarray(variant_of, dtype=np.int64),
            "seed": np.asarray(seed_of, dtype=np.int64),
            "initial": np.asarray(initial, dtype=np.float64),
            "loss": loss_arr.ravel(), "smooth": smooth.ravel()}


def make_pilots(variants, seeds: int = 4, units: int = 192,
                nodes: tuple[int, ...] = (2, 4, 8), alpha_seeds: int = 1) -> Pilots:
    """Run the pilots of your own job variants (``[(kind, variant), ...]``, kinds as for
    :class:`~core_env.live.jobs.JobSpec`) and return the pilot set, for
    ``LiveSchedulerEnv(pilots=...)`` (:func:`record_pilots` then :func:`validate_pilots`)."""
    arrays = record_pilots(variants, seeds=seeds, units=units, nodes=nodes,
                           alpha_seeds=alpha_seeds)
    return validate_pilots(Path("<pilots of " + ", ".join(k for k, _ in variants) + ">"),
                           arrays)


def validate_pilots(path: Path, a: dict[str, np.ndarray]) -> Pilots:
    """Check a pilot set's arrays and wrap them (:class:`BankError` naming the file)."""
    def bad(msg: str) -> BankError:
        return BankError(f"{path}: {msg}")

    v, p = a["specs"].shape[0], a["seed"].shape[0]
    if v == 0 or p == 0:
        raise bad("expected at least one variant and one pilot run")
    if a["alpha"].shape[0] != v or not np.all((a["alpha"] > 0) & (a["alpha"] <= 1)):
        raise bad("alpha: expected one value in (0, 1] per variant")
    for key in ("variant_of", "initial"):
        if a[key].shape[0] != p:
            raise bad(f"{key}: expected {p} entries (one per pilot run)")
    if np.any((a["variant_of"] < 0) | (a["variant_of"] >= v)) or np.any(a["seed"] < 0):
        raise bad("variant_of / seed: expected variant indices and seeds >= 0")
    w, rem = divmod(a["loss"].shape[0], p)
    if rem or w < 1 or a["smooth"].shape[0] != p * w:
        raise bad("loss / smooth: expected the same whole number of units per run")
    for key in ("loss", "smooth", "initial"):
        if not np.all(np.isfinite(a[key]) & (a[key] > 0)):
            raise bad(f"{key}: expected finite losses > 0")
    specs = []
    for s in a["specs"].tolist():
        try:
            d = json.loads(s)
            specs.append((str(d["kind"]), dict(d["variant"])))
        except (ValueError, KeyError, TypeError) as e:
            raise bad(f"specs: {s!r} is not a JSON job spec ({e})") from e
    return Pilots(tuple(specs), a["alpha"].astype(np.float64),
                  a["variant_of"].astype(np.int64), a["seed"].astype(np.int64),
                  a["initial"].astype(np.float64), a["loss"].reshape(p, w).astype(np.float64),
                  a["smooth"].reshape(p, w).astype(np.float64))


def load_pilots(name: str = PILOTS, data_dir: Path | str | None = None) -> Pilots:
    """Load and check a pilot set (cached for the shipped folder); the shipped file must
    match its checksum in the data manifest.

    Raises:
        BankError: naming the file, if it is missing, corrupted or malformed.
    """
    if data_dir is None:
        return _load_shipped(name)
    path = Path(data_dir) / f"{name}.npz"
    return validate_pilots(path, _read_npz(path, _ARRAYS))


@lru_cache(maxsize=None)
def _load_shipped(name: str) -> Pilots:
    path = DATA_DIR / f"{name}.npz"
    return validate_pilots(path, _read_npz(path, _ARRAYS))


def write_pilots(arrays: dict[str, np.ndarray], out_dir: Path, name: str = PILOTS) -> Path:
    """Write ``<name>.npz`` into ``out_dir`` and record its checksum in the folder's
    manifest (created if missing)."""
    import hashlib

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.npz"
    np.savez(path, **arrays)
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
    path = write_pilots(arrays, args.out)
    print(f"wrote {path}; alpha per variant: "
          + ", ".join(f"{a:.2f}" for a in arrays["alpha"]))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
