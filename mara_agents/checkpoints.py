"""Checkpoint files: the MARA checkpoint format, atomic saves with an integrity record, and
verified loads (also used by the FM forecaster's files).

Every ``.pt`` file the project writes (MARA checkpoints, distilled students, the FM
forecaster) is a plain dict of tensors, numbers, strings, lists and dicts, saved by
:func:`save` with an ``"integrity"`` entry:

* ``"tensors"``: the sha256 of every tensor (dtype, shape and bytes), by its path in the
  dict (``"state_dict/encoder.weight"``);
* ``"fields"``: the sha256 of everything else (the canonical JSON of the non-tensor
  entries: configs, format tags, counters).

:func:`load` trusts nothing before it has checked, in this order:

1. the file exists and is a zip archive (torch's container) whose every record has the
   CRC-32 it claims (``torch.load`` does not check the CRCs of tensor data, so without this
   a flipped byte in the weights loads silently);
2. ``torch.load(weights_only=True)``: only tensors and plain containers are unpickled, so a
   crafted pickle is refused without running it;
3. the result is a dict, its integrity record matches (every tensor and the other fields),
   and every floating-point tensor is finite.

Any failure is one :class:`ValueError` whose message starts with the file's path and says
what is wrong. A file without an integrity record (written before it existed) passes steps
1-3 with a :class:`UserWarning` naming it.

**MARA checkpoints** (format ``"mara-mat/1"``) hold ``mat_config`` (the MAT's sizes),
``layout`` (node and slot counts and every feature name it was trained on),
``train_config`` (the :class:`~mara_agents.train.trainer.PPOConfig` as a dict),
``value_norm`` and ``state_dict``; a training run's checkpoints also hold its optimiser and
generator state and its learning curve. :func:`load_checkpoint` checks them on top of
:func:`load`; :func:`model_from_checkpoint` builds the MAT for an environment's layout. The
shipped default lives in ``mara_agents/weights`` (:func:`shipped`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from core_env.forecast.wrapper import FORECAST_FEATURES
from core_env.layout import Layout
from mara_agents.mat.model import MAT, MATConfig

INTEGRITY_KEY = "integrity"
"""The entry of a saved dict that holds its integrity record."""


def _walk(obj: Any, prefix: str, tensors: dict[str, torch.Tensor]) -> Any:
    """``obj`` with every tensor replaced by its path (collected into ``tensors``)."""
    if isinstance(obj, torch.Tensor):
        tensors[prefix] = obj
        return {"__tensor__": prefix}
    if isinstance(obj, dict):
        return {str(k): _walk(v, f"{prefix}/{k}" if prefix else str(k), tensors)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walk(v, f"{prefix}/{i}", tensors) for i, v in enumerate(obj)]
    return obj


def _tensor_sha(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def integrity_record(blob: dict[str, Any]) -> dict[str, Any]:
    """The integrity record of a checkpoint dict (see the module docstring)."""
    tensors: dict[str, torch.Tensor] = {}
    rest = _walk({k: v for k, v in blob.items() if k != INTEGRITY_KEY}, "", tensors)
    text = json.dumps(rest, sort_keys=True, default=repr)
    return {"algorithm": "sha256",
            "tensors": {name: _tensor_sha(t) for name, t in sorted(tensors.items())},
            "fields": hashlib.sha256(text.encode()).hexdigest()}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save(path: str | Path, blob: dict[str, Any]) -> None:
    """Write ``blob`` with its integrity record to ``path``, atomically: a uniquely named
    temporary file in the same folder, fsynced, then renamed over ``path`` (a reader sees
    the old file or the new one, never a partial one; two writers never share a name)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**{k: v for k, v in blob.items() if k != INTEGRITY_KEY},
              INTEGRITY_KEY: integrity_record(blob)}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; a checkpoint is not
        with os.fdopen(fd, "wb") as fh:
            torch.save(record, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | Path, what: str = "checkpoint") -> dict[str, Any]:
    """Load a checkpoint dict after checking it (see the module docstring).

    Args:
        path: the ``.pt`` file.
        what: what the file should be, for messages (``"MARA checkpoint"``).

    Raises:
        ValueError: ``"<path>: ..."``, naming what is wrong.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such {what} file")
    try:
        with zipfile.ZipFile(path) as archive:
            bad_record = archive.testzip()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, UnicodeDecodeError, EOFError, OSError,
            ValueError) as e:
        raise ValueError(f"{path}: not a readable {what}: not a torch zip archive, or "
                         f"truncated or corrupted ({type(e).__name__}: {e})") from e
    if bad_record is not None:
        raise ValueError(f"{path}: corrupted {what} (CRC-32 mismatch in record "
                         f"{bad_record!r})")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [ln for ln in str(e).splitlines() if "GLOBAL" in ln or "Unsupported" in ln]
        reason = lines[0].strip() if lines else type(e).__name__
        raise ValueError(f"{path}: refused: the {what} holds objects other than tensors and "
                         f"plain data, which could run code on load ({reason})") from e
    except Exception as e:  # torch raises RuntimeError, KeyError, EOFError, ... on damage
        first = str(e).splitlines()[0] if str(e) else ""
        raise ValueError(f"{path}: not a readable {what} ({type(e).__name__}: {first})"
                         ) from e
    if not isinstance(blob, dict):
        raise ValueError(f"{path}: not a {what}: expected a dict, got {type(blob).__name__}")
    check(blob, path, what)
    return blob


def check(blob: dict[str, Any], path: str | Path, what: str = "checkpoint") -> None:
    """Verify a loaded dict's integrity record and the finiteness of its tensors.

    Raises:
        ValueError: naming ``path`` and the first entry that does not match.
    """
    record = blob.get(INTEGRITY_KEY)
    now = integrity_record(blob)
    if record is None:
        warnings.warn(f"{path}: this {what} has no integrity record (written before "
                      f"records existed); only its CRCs and values were checked. Save it "
                      f"again to add one.", UserWarning, stacklevel=3)
    else:
        if not (isinstance(record, dict) and isinstance(record.get("tensors"), dict)
                and isinstance(record.get("fields"), str)):
            raise ValueError(f"{path}: malformed integrity record in this {what}")
        missing = sorted(set(record["tensors"]) ^ set(now["tensors"]))
        if missing:
            raise ValueError(f"{path}: the {what}'s tensors do not match its integrity "
                             f"record (present in only one of them: {missing[:5]})")
        for name, sha in now["tensors"].items():
            if record["tensors"][name] != sha:
                raise ValueError(f"{path}: tensor {name!r} does not match its sha256 in the "
                                 f"integrity record (corrupted or altered {what})")
        if record["fields"] != now["fields"]:
            raise ValueError(f"{path}: the {what}'s configuration fields do not match their "
                             f"sha256 in the integrity record (corrupted or altered)")
    tensors: dict[str, torch.Tensor] = {}
    _walk({k: v for k, v in blob.items() if k != INTEGRITY_KEY}, "", tensors)
    for name, t in sorted(tensors.items()):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{path}: tensor {name!r} holds non-finite values (NaN or inf)")


# --- the MARA checkpoint format ---------------------------------------------------------

CHECKPOINT_FORMAT = "mara-mat/1"
"""Format tag of MARA checkpoints."""

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
"""Where the shipped MARA checkpoint lives."""

DEFAULT_CHECKPOINT = "mara_default.pt"
"""File name of the shipped checkpoint in :data:`WEIGHTS_DIR`."""

CHECKPOINT_SCHEMA = {"mat_config": dict, "layout": dict, "train_config": dict,
                     "value_norm": dict, "state_dict": dict}
"""Entries every MARA checkpoint has, with their types."""


def shipped(name: str = DEFAULT_CHECKPOINT) -> Path:
    """Path of a checkpoint shipped in the package."""
    return WEIGHTS_DIR / name


def wrapped_layout(layout: Layout) -> Layout:
    """The observation layout with the forecast columns (what MARA reads)."""
    return layout.with_task_features(FORECAST_FEATURES)


def layout_record(layout: Layout) -> dict[str, Any]:
    """What a checkpoint must match: node and slot counts and every feature name."""
    return {"n_nodes": layout.n_nodes, "n_slots": layout.n_slots,
            "global": [f.name for f in layout.global_features],
            "node": [f.name for f in layout.node_features],
            "task": [f.name for f in layout.task_features]}


def save_checkpoint(path: str | Path, model: MAT, layout: Layout, train_config: dict[str, Any],
                    value_norm: dict[str, float], extra: dict[str, Any] | None = None) -> None:
    """Write a MARA checkpoint with :func:`save` (atomic, with an integrity record)."""
    save(path, {"format": CHECKPOINT_FORMAT, "mat_config": model.config.to_dict(),
                "layout": layout_record(layout), "train_config": dict(train_config),
                "value_norm": dict(value_norm), "state_dict": model.state_dict(),
                **(extra or {})})


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a MARA checkpoint after checking it: everything :func:`load` checks, then its
    format tag, its entries and their types.

    Raises:
        ValueError: ``"<path>: ..."``, naming what is wrong.
    """
    blob = load(path, "MARA checkpoint")
    if blob.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a MARA checkpoint (expected format "
                         f"{CHECKPOINT_FORMAT!r}, got {blob.get('format')!r})")
    for key, kind in CHECKPOINT_SCHEMA.items():
        if not isinstance(blob.get(key), kind):
            raise ValueError(f"{path}: entry {key!r}: expected a {kind.__name__}, got "
                             f"{type(blob.get(key)).__name__}")
    bad = [k for k, v in blob["state_dict"].items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise ValueError(f"{path}: state_dict entries that are not tensors: {bad[:5]}")
    cfg = blob["train_config"]
    if not isinstance(cfg.get("forecaster"), str):
        raise ValueError(f"{path}: train_config has no forecaster name")
    for key in ("fm_steps", "fm_samples"):
        if not (isinstance(cfg.get(key), int) and cfg[key] >= 1):
            raise ValueError(f"{path}: train_config.{key}: expected an integer >= 1, got "
                             f"{cfg.get(key)!r}")
    return blob


SIZES = {"n_nodes": (8, 64), "n_slots": (16, 64)}
"""The cluster sizes (inclusive ranges) a MARA checkpoint runs on besides its own. The MAT
has one token per node and per visible slot, and the features are normalised by the cluster
(node counts by N, slot counts by K), so its weights fit any size; these are the sizes whose
results are reported (docs/baselines.md, "Other cluster sizes"), and the loader refuses the
others."""


def model_from_checkpoint(blob: dict[str, Any], layout: Layout, source: str = "checkpoint"
                          ) -> MAT:
    """Build the MAT of a checkpoint for an environment layout (in eval mode): the same
    features, at the checkpoint's own cluster size or one within :data:`SIZES`.

    Raises:
        ValueError: the checkpoint was trained on other features, or the cluster size is
            neither its own nor within :data:`SIZES` (the message lists the differences), its
            MAT configuration is not valid, or its weights do not fit it.
    """
    want = layout_record(layout)
    have = blob["layout"]
    diff = [k for k in want if want[k] != have.get(k)
            and not (k in SIZES and SIZES[k][0] <= want[k] <= SIZES[k][1])]
    if diff:
        details = "; ".join(f"{k}: checkpoint {have.get(k)!r}, env {want[k]!r}" for k in diff)
        sizes = ", ".join(f"{k} {lo}-{hi}" for k, (lo, hi) in SIZES.items())
        raise ValueError(f"{source}: trained for a different observation layout ({details}; "
                         f"it runs at its own size or at {sizes} with the same features)")
    try:
        model = MAT(MATConfig(**blob["mat_config"]), layout)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{source}: mat_config {blob['mat_config']!r} is not a valid MAT "
                         f"configuration ({e})") from e
    try:
        model.load_state_dict(blob["state_dict"])
    except RuntimeError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        raise ValueError(f"{source}: the weights do not fit mat_config "
                         f"({'; '.join(lines[1:4]) or lines[0]})") from e
    model.eval()
    return model
