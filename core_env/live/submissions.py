"""Job submissions to a live session (SPEC §8): what a user asks for, and where it comes from.

A :class:`Submission` is a job (:class:`~core_env.live.jobs.JobSpec`) with the loss at which
it is done, its deadline (slots after it arrives, or seconds on the wall clock) and the most
nodes it may use. A running :class:`~core_env.live.session.LiveSession` takes them from
Python (:meth:`~core_env.live.session.LiveSession.submit`) or from sources it polls at each
slot boundary:

* :class:`JsonLinesSource`: a file to which submissions are appended, one JSON object per
  line; a line is read once it ends with a newline (so a half-written line waits);
* :class:`FolderSource`: a folder into which each submission is dropped as a ``*.json`` file
  (one object, or a list of them); write it under another name and rename it, so that a
  half-written file is never read.

A submission's JSON object has the keys of :meth:`Submission.from_dict`::

    {"name": "wide-mlp", "kind": "mymodule:MyJob", "variant": {"hidden": 256}, "seed": 0,
     "target": 0.35, "deadline": 40, "max_nodes": 4}
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core_env.live.jobs import JobSpec
from core_env.utils.checks import check_int, check_number, fail

KEYS = ("name", "kind", "variant", "seed", "target", "deadline", "deadline_seconds",
        "max_nodes", "alpha")
"""The keys of a submission's JSON object (:meth:`Submission.from_dict`)."""


@dataclass(frozen=True)
class Submission:
    """One job submitted to a live session.

    Attributes:
        job: what to train.
        target: the job is done once its observed loss is at most this (> 0).
        deadline: slots it may train in after it arrives (>= 1), or ``None`` with
            ``deadline_seconds``.
        deadline_seconds: the deadline in seconds (> 0), turned into whole slots of the
            session's wall clock (rounded up); only on the wall clock.
        max_nodes: the most nodes it may train on at once (its parallelism cap, >= 1).
        name: how reports and the status view call it ("" = its kind and task id).
        alpha: its scaling exponent in (0, 1] (k nodes add k**alpha work units per slot),
            if you know it; ``None``: the session's prior (see
            :meth:`~core_env.live.session.LiveSessionEnv.prior_alpha`).
    """

    job: JobSpec
    target: float
    deadline: int | None = None
    deadline_seconds: float | None = None
    max_nodes: int = 1
    name: str = ""
    alpha: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.job, JobSpec):
            fail("job", self.job, "a JobSpec")
        check_number("target", self.target, 0.0, lo_open=True)
        if (self.deadline is None) == (self.deadline_seconds is None):
            raise ValueError(f"deadline: give deadline (slots) or deadline_seconds, exactly "
                             f"one, got {self.deadline!r} and {self.deadline_seconds!r}")
        if self.deadline is not None:
            check_int("deadline", self.deadline, 1)
        else:
            check_number("deadline_seconds", self.deadline_seconds, 0.0, lo_open=True)
        check_int("max_nodes", self.max_nodes, 1)
        if not isinstance(self.name, str):
            fail("name", self.name, "a string")
        if self.alpha is not None:
            check_number("alpha", self.alpha, 0.0, 1.0, lo_open=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Submission:
        """A submission from a JSON object: ``kind`` (required), ``variant`` (default
        ``{}``), ``seed`` (default 0), ``target``, ``deadline`` or ``deadline_seconds``,
        ``max_nodes`` (default 1), ``name`` and ``alpha`` (optional).

        Raises:
            ValueError: not an object, an unknown or missing key, or an invalid value (the
                message names the key).
        """
        if not isinstance(d, Mapping):
            raise ValueError(f"submission: expected a JSON object, got {type(d).__name__}")
        unknown = sorted(set(d) - set(KEYS))
        if unknown:
            raise ValueError(f"submission: unknown key {unknown[0]!r}; expected keys among "
                             f"{list(KEYS)}")
        for key in ("kind", "target"):
            if key not in d:
                raise ValueError(f"submission: missing key {key!r}")
        job = JobSpec(d["kind"], d.get("variant", {}), d.get("seed", 0))
        return cls(job, d["target"], d.get("deadline"), d.get("deadline_seconds"),
                   d.get("max_nodes", 1), d.get("name", ""), d.get("alpha"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object :meth:`from_dict` reads back."""
        out = {"name": self.name, "kind": self.job.kind, "variant": self.job.variant,
               "seed": self.job.seed, "target": self.target, "max_nodes": self.max_nodes}
        if self.deadline is not None:
            out["deadline"] = self.deadline
        else:
            out["deadline_seconds"] = self.deadline_seconds
        if self.alpha is not None:
            out["alpha"] = self.alpha
        return out


Polled = tuple[str, Submission | ValueError]
"""What a source's ``poll`` yields per submission: where it came from (``file:line``) and
the submission, or the ValueError that says why it cannot be one."""


def _parse(text: str, where: str) -> list[Polled]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return [(where, ValueError(f"not JSON ({e})"))]
    items = data if isinstance(data, list) else [data]
    out: list[Polled] = []
    for i, item in enumerate(items):
        at = where if len(items) == 1 else f"{where}[{i}]"
        try:
            out.append((at, Submission.from_dict(item)))
        except ValueError as e:
            out.append((at, e))
    return out


class JsonLinesSource:
    """Submissions appended to a JSON-lines file, read as they appear (module docstring).

    Raises:
        ValueError: ``path`` is not an existing file (create it first, e.g. ``touch``).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"submissions: {self.path} is not a file (create it first; "
                             f"each line is one submission)")
        self._offset, self._line = 0, 0

    def poll(self) -> list[Polled]:
        """The submissions on the lines completed since the last poll (blank lines and lines
        starting with ``#`` are skipped)."""
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        out: list[Polled] = []
        for raw in data[:end].decode("utf-8", errors="replace").split("\n")[:-1]:
            self._line += 1
            if raw.strip() and not raw.lstrip().startswith("#"):
                out += _parse(raw, f"{self.path.name}:{self._line}")
        return out


class FolderSource:
    """Submissions dropped into a folder as ``*.json`` files, read once each, oldest first
    (module docstring).

    Raises:
        ValueError: ``path`` is not an existing folder.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise ValueError(f"submissions: {self.path} is not a folder")
        self._seen: set[str] = set()

    def poll(self) -> list[Polled]:
        """The submissions of the ``*.json`` files that appeared since the last poll."""
        new = []
        for p in self.path.glob("*.json"):
            if p.name not in self._seen:
                try:
                    new.append((p.stat().st_mtime, p.name, p))
                except FileNotFoundError:  # renamed away meanwhile
                    continue
        out: list[Polled] = []
        for _, name, p in sorted(new):
            self._seen.add(name)
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                out.append((name, ValueError(f"cannot be read ({e})")))
                continue
            out += _parse(text, name)
        return out


def deadline_slots(sub: Submission, slot_seconds: float | None) -> int:
    """A submission's deadline in slots: ``deadline``, or ``deadline_seconds`` in whole
    slots of ``slot_seconds`` (rounded up).

    Raises:
        ValueError: ``deadline_seconds`` without a wall clock (``slot_seconds`` None).
    """
    if sub.deadline is not None:
        return sub.deadline
    if slot_seconds is None:
        raise ValueError("deadline_seconds: needs the wall clock (clock='wall' with "
                         "slot_seconds; on the work clock a slot has no fixed length), "
                         "give deadline in slots instead")
    assert sub.deadline_seconds is not None  # a Submission has deadline or deadline_seconds
    return max(1, math.ceil(sub.deadline_seconds / slot_seconds - 1e-9))


__all__ = [
    "KEYS",
    "FolderSource",
    "JsonLinesSource",
    "Polled",
    "Submission",
    "deadline_slots",
]
