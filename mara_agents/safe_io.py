"""Files of tensors, saved atomically with an integrity record and loaded only after checks.

Every ``.pt`` file the project writes (MARA checkpoints, distilled students, the FM
forecaster, the MARL adapters' models) is a plain dict of tensors, numbers, strings, lists and
dicts, saved by :func:`save` with an ``"integrity"`` entry:

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
1-3 with a :class:`UserWarning` naming it::

    save("model.pt", {"format": "mine/1", "state_dict": model.state_dict()})
    blob = load("model.pt", "my model")
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
