"""Where benchmark results live: atomic writes, validated reads, the run manifest.

A results folder holds ``episodes/<key>.json`` (one finished episode or bound each, written
atomically by :func:`write_atomic` as soon as it is done), ``manifest.json`` (each preset's
config hash and the code versions that contributed) and the summary files the report
writes. Every stored record is checked on read (:func:`check_record`): a file that does not
parse or does not match what its name says is moved aside as ``*.corrupt`` and recomputed,
with a warning naming it::

    write_atomic(out / "table.md", table)   # readers see the old file or the new one
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import re
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core_env.dynamics import EPISODE_KEYS as EPISODE_FIELDS

MANIFEST = "manifest.json"
"""Run manifest in a results folder: each preset's config hash and the code versions that
contributed episodes (see :func:`update_manifest`)."""


_UNSAFE = re.compile(r"[:/\\]")


def file_key(preset: str, policy: str, seed: int) -> str:
    """The name (without ``.json``) of a record's file: ``<preset>__<policy>__<seed>``, with
    the ``:`` of a ``module:Factory`` policy spec and the ``/`` or ``\\`` of a
    ``name@folder`` spec written as ``+`` (portable file names), and so the ``:`` of a
    preset with overrides (``CoRE-v0:switch_cost=0.3``)."""
    return f"{safe_name(preset)}__{safe_name(policy)}__{seed}"


def safe_name(text: str) -> str:
    """``text`` with ``:``, ``/`` and ``\\`` written as ``+`` (a portable file name part)."""
    return _UNSAFE.sub("+", text)


def config_record(preset: str) -> dict[str, Any]:
    """A preset's full configuration and its hash (recorded with every result)."""
    import core_env

    cfg = dataclasses.asdict(core_env.make_config(preset))
    blob = json.dumps(cfg, sort_keys=True, default=str)
    return {"config": cfg, "config_hash": hashlib.sha256(blob.encode()).hexdigest()[:16]}


def config_hash(preset: Any) -> str | None:
    """The config hash of a preset of core_env (None for anything else)."""
    try:
        return config_record(preset)["config_hash"] if isinstance(preset, str) else None
    except ValueError:  # not a preset of core_env (a custom episode function)
        return None


def code_version() -> str:
    """Which code produced a result: ``<git describe --always --dirty>+src.<hash>``.

    The first part is the package version where git is unavailable. The hash (12 hex
    digits of SHA-256) covers the path and bytes of every ``.py`` file of ``core_env``,
    ``mara_agents`` and ``benchmarks`` and the shipped checkpoints, so two runs with the
    same string ran the same code even on a dirty tree (where ``git describe`` alone says
    only "dirty").
    """
    root = Path(__file__).resolve().parent.parent
    head = None
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                             text=True, cwd=root, timeout=10, check=False)
        if out.returncode == 0 and out.stdout.strip():
            head = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    if head is None:
        import core_env

        head = core_env.__version__
    digest = hashlib.sha256()
    for pkg in ("core_env", "mara_agents", "benchmarks"):
        files = [p for pattern in ("*.py", "weights/*.pt", "weights/*.json")
                 for p in (root / pkg).rglob(pattern)]
        for f in sorted(files):
            digest.update(f.relative_to(root).as_posix().encode() + b"\0")
            digest.update(f.read_bytes() + b"\0")
    return f"{head}+src.{digest.hexdigest()[:12]}"


def write_csv(path: Path, rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> None:
    """Write ``rows`` as CSV with the columns ``fields`` (other keys left out, missing ones
    empty), atomically (:func:`write_atomic`)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k) for k in fields})
    write_atomic(path, buf.getvalue())


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that ``path`` is either its old self or complete, never partial.

    The text goes to a hidden temporary file next to ``path`` (``.<name>.<pid>.tmp``),
    is flushed and fsynced, then renamed over ``path`` (atomic on POSIX) and the directory
    entry is fsynced, so a crash or a kill at any point (SIGINT, SIGKILL, power loss after
    the rename) leaves no truncated ``path``. A leftover temporary file is removed by the
    next run on the folder.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's live process
        return True
    return True


_COUNTS = ("arrived", "completed", "expired", "illegal_actions", "capacity_conflicts",
           "switches", "restores", "length")


def check_record(record: Any, key: str, expected_hash: str | None,
                 policy_hash: str | None = None) -> str | None:
    """What is wrong with a stored result, or None.

    A stored result must be what its file name says it is: a dict whose ``preset``,
    ``policy`` and ``seed`` make its key (:func:`file_key`) and whose
    ``config_hash`` is the preset's current one, and, where the policy has a fingerprint
    (``policy_hash`` given: :meth:`mara_agents.policy_spec.PolicySpec.fingerprint`, the
    digest of its weights or of a ``module:Factory``'s source), whose ``policy_hash`` is
    that one. An episode's statistics must be whole
    counts >= 0 with completed + expired <= arrived, ``completion_rate`` =
    completed / arrived exactly, utilization in [0, 1] and a finite return; a bound record
    needs 0 <= bound <= n_tasks.
    """
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    preset, policy, seed = record.get("preset"), record.get("policy"), record.get("seed")
    if not (isinstance(preset, str) and isinstance(policy, str) and isinstance(seed, int)
            and not isinstance(seed, bool)):
        return "preset, policy and seed missing or of the wrong type"
    if file_key(preset, policy, seed) != key:
        return f"it holds {file_key(preset, policy, seed)}, not {key}"
    if record.get("config_hash") != expected_hash:
        return (f"config hash {record.get('config_hash')!r}, but {preset} has "
                f"{expected_hash!r} now")
    if policy_hash is not None and record.get("policy_hash") != policy_hash:
        return (f"stale: run with another version of {policy} (its weights or source; key "
                f"{record.get('policy_hash')!r} then, {policy_hash!r} now)")
    if "bound" in record:
        b, n = record.get("bound"), record.get("n_tasks")
        if not (isinstance(b, int) and isinstance(n, int) and 0 <= b <= n):
            return f"bound {b!r} of {n!r} tasks: expected whole numbers with 0 <= bound <= n"
        return None
    if not any(k in record for k in EPISODE_FIELDS):
        return None  # the record of a custom episode function
    missing = [k for k in EPISODE_FIELDS if k not in record]
    if missing:
        return f"episode statistics missing: {missing}"
    bad = [k for k in _COUNTS if not (isinstance(record[k], int)
                                      and not isinstance(record[k], bool) and record[k] >= 0)]
    if bad:
        return f"counts {bad} are not whole numbers >= 0"
    if record["completed"] + record["expired"] > record["arrived"]:
        return "completed + expired exceeds arrived"
    rate = record["completion_rate"]
    if not isinstance(rate, float) or rate != record["completed"] / max(record["arrived"], 1):
        return (f"completion_rate {rate!r} is not completed / arrived = "
                f"{record['completed']} / {record['arrived']}")
    util, ret = record["utilization"], record["return"]
    if not (isinstance(util, (int, float)) and 0.0 <= util <= 1.0):
        return f"utilization {util!r} outside [0, 1]"
    if not (isinstance(ret, (int, float)) and math.isfinite(ret)):
        return f"return {ret!r} is not a finite number"
    return None


def clean(store: Path, hashes: dict[str, str | None],
          policy_hashes: Mapping[str, str | None] | None = None) -> None:
    """Remove temporary files left by killed writers (their pid is gone) and move aside, as
    ``*.corrupt``, every episode file that does not parse or does not pass
    :func:`check_record` (so it is recomputed), with a warning naming each.
    ``policy_hashes`` maps policy names to their current fingerprints."""
    for tmp in store.glob(".*.tmp"):
        pid = tmp.name.rsplit(".", 2)[-2]
        if not pid.isdigit() or not _pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
    moved = []
    for f in sorted(store.glob("*.json")):
        problem: str | None
        try:
            record = json.loads(f.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            problem = f"unreadable ({type(e).__name__})"
        else:
            # whatever the file holds (names, if it is valid)
            preset: Any = record.get("preset") if isinstance(record, dict) else None
            policy: Any = record.get("policy") if isinstance(record, dict) else None
            problem = check_record(record, f.stem, hashes.get(preset, config_hash(preset)),
                                   (policy_hashes or {}).get(policy))
        if problem is not None:
            os.replace(f, f.with_name(f.name + ".corrupt"))
            moved.append(f"{f.name}: {problem}")
    if moved:
        warnings.warn(f"{store}: {len(moved)} stored results were invalid or stale, moved "
                      f"aside as *.corrupt and will be recomputed:\n  " + "\n  ".join(moved),
                      stacklevel=3)


def update_manifest(out: Path, presets: Sequence[str]) -> None:
    """Record (or check) the config hash of every preset of the run and the code version.

    Raises:
        ValueError: if the folder holds episodes of a preset whose configuration has
            changed since (its config hash differs), or an unreadable manifest.
    """
    path = out / MANIFEST
    old: dict[str, Any] = {"config_hashes": {}, "code_versions": []}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: unreadable run manifest ({e}); delete it to accept "
                             f"the episodes in {out} as they are") from e
        if not (isinstance(old, dict) and isinstance(old.get("config_hashes"), dict)
                and isinstance(old.get("code_versions"), list)):
            raise ValueError(f"{path}: expected a run manifest with config_hashes and "
                             f"code_versions; delete it to accept the episodes in {out}")
    hashes = dict(old["config_hashes"])
    for preset in sorted(set(presets)):
        h = config_hash(preset)
        if preset in hashes and hashes[preset] != h:
            raise ValueError(
                f"{out}: preset {preset!r} has changed since its episodes there were run "
                f"(config hash {hashes[preset]} then, {h} now); use a new --out folder or "
                f"delete {out / 'episodes'} to recompute")
        hashes[preset] = h
    version = code_version()
    versions = list(old["code_versions"]) + ([version] if version not in old["code_versions"]
                                             else [])
    write_atomic(path, json.dumps({"config_hashes": hashes, "code_versions": versions},
                                   indent=2, sort_keys=True))
