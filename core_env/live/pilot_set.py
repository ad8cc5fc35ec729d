"""A pilot set: the reference curves and fitted scaling exponents of a set of job variants
(:class:`Pilots`; how they are recorded and used: :mod:`core_env.live.pilots`), its file and
loading it (:func:`load_pilots`: a file of your own or the shipped ``live-pilots``, checked).

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
``about``       str[1]          optional: JSON manifest of how the set was made (source,
                                job kinds, seeds, units, alpha fitted or assumed)
==============  ==============  ===========================================================
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Union, cast

import numpy as np

from core_env.banks import DATA_DIR, BankError, _read_npz
from core_env.live.jobs import JobSpec

PILOTS = "live-pilots"
"""Name of the shipped pilot set (file ``<name>.npz`` in :data:`core_env.banks.DATA_DIR`)."""

_ARRAYS = {"specs": "U", "alpha": "f", "variant_of": "i", "seed": "i", "initial": "f",
           "loss": "f", "smooth": "f"}


@dataclass(frozen=True, eq=False)
class Pilots:
    """A pilot set (see :mod:`core_env.live.pilots` and this module's docstring)."""

    specs: tuple[tuple[str, dict[str, Any]], ...]
    alpha: np.ndarray
    variant_of: np.ndarray
    seed: np.ndarray
    initial: np.ndarray
    loss: np.ndarray  # float64[P, W]
    smooth: np.ndarray  # float64[P, W]
    about: dict[str, Any] = field(default_factory=dict)
    """How the set was made (the file's ``about`` manifest; empty if it has none)."""

    @property
    def units(self) -> int:
        """W: the units every reference curve covers."""
        return int(self.loss.shape[1])

    def job(self, run: int) -> JobSpec:
        """The job of pilot run ``run`` (its variant at its seed)."""
        kind, variant = self.specs[int(self.variant_of[run])]
        return JobSpec(kind, dict(variant), int(self.seed[run]))

    def arrays(self) -> dict[str, np.ndarray]:
        """The file's arrays (see the module docstring); ``about`` carries the SHA-256 of
        the others (:func:`data_digest`), checked when the file is loaded."""
        data = {"specs": np.asarray([json.dumps({"kind": k, "variant": v}, sort_keys=True)
                                     for k, v in self.specs]),
                "alpha": self.alpha, "variant_of": self.variant_of, "seed": self.seed,
                "initial": self.initial, "loss": self.loss.ravel(),
                "smooth": self.smooth.ravel()}
        about = {**self.about, "sha256": data_digest(data)}
        return {**data, "about": np.asarray([json.dumps(about, sort_keys=True)])}

    def save(self, path: Union[str, Path]) -> Path:
        """Write the set to ``path`` (an ``.npz`` file; its folder is created), with its
        ``about`` manifest; :func:`load_pilots` reads it back. Returns the path.

        Raises:
            ValueError: ``path`` does not end in ``.npz``.
        """
        path = Path(path)
        if path.suffix != ".npz":
            raise ValueError(f"path: expected a file name ending in .npz, got {str(path)!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp.npz")
        # cast: numpy's stub also types the names in **kwds as its keyword allow_pickle
        np.savez(tmp, **cast("dict[str, Any]", self.arrays()))
        tmp.replace(path)
        return path

    def target(self, run: int, required: float) -> float:
        """The loss pilot run ``run`` reaches by ``required`` units (>= 1; see
        :mod:`core_env.live.pilots`): its smooth curve there, raised to the lowest observed
        loss up to it."""
        u = min(max(int(math.ceil(required)), 1), self.units)
        return max(float(self.loss[run, :u].min()), float(self.smooth[run, u - 1]))


def data_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of a pilot set's data arrays (every array but ``about``: names, dtypes,
    shapes and bytes, in name order)."""
    import hashlib

    h = hashlib.sha256()
    for key in sorted(k for k in arrays if k != "about"):
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


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
    about: dict[str, Any] = {}
    if "about" in a:
        try:
            about = json.loads(str(np.asarray(a["about"]).reshape(-1)[0]))
        except (ValueError, IndexError) as e:
            raise bad(f"about: expected one JSON manifest ({e})") from e
        if not isinstance(about, dict):
            raise bad("about: expected a JSON object")
        digest = about.pop("sha256", None)
        if digest is not None and digest != data_digest(a):
            raise bad("checksum does not match the file's about manifest (corrupted or "
                      "modified file)")
    return Pilots(tuple(specs), a["alpha"].astype(np.float64),
                  a["variant_of"].astype(np.int64), a["seed"].astype(np.int64),
                  a["initial"].astype(np.float64), a["loss"].reshape(p, w).astype(np.float64),
                  a["smooth"].reshape(p, w).astype(np.float64), about)


def load_pilots(name: Union[str, Path] = PILOTS, data_dir: Path | str | None = None
                ) -> Pilots:
    """Load and check a pilot set: a file (a path ending in ``.npz``, e.g. one written by
    :meth:`Pilots.save`) or the name of a set in ``data_dir`` (default: the shipped
    folder, cached; the shipped file must match its checksum in the data manifest).

    Raises:
        BankError: naming the file, if it is missing, corrupted or malformed.
    """
    if isinstance(name, Path) or str(name).endswith(".npz"):
        if data_dir is not None:
            raise ValueError(f"data_dir: give a pilot file ({str(name)!r}) or a name in "
                             f"data_dir, not both")
        path = Path(name)
        return validate_pilots(path, _read_npz(path, _ARRAYS))
    if data_dir is None:
        return _load_shipped(name)
    path = Path(data_dir) / f"{name}.npz"
    return validate_pilots(path, _read_npz(path, _ARRAYS))


@lru_cache(maxsize=None)
def _load_shipped(name: str) -> Pilots:
    path = DATA_DIR / f"{name}.npz"
    return validate_pilots(path, _read_npz(path, _ARRAYS))
