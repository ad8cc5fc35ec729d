"""Status views of a live session (:class:`~core_env.live.session.LiveSession`).

* :class:`RichView`: a live terminal table (the ``rich`` library, in the ``live`` extra) of
  the session (slot, nodes busy, jobs by status) and its jobs (status, nodes, loss against
  target, progress, deadline and the predicted slots to the target), redrawn every slot,
  with events printed above it;
* :class:`PlainView`: one printed line per event (arrived, completed, missed, failed,
  refused), for logs and terminals without ``rich``.

:func:`make_view` picks one; a view has ``update(session)``, ``event(slot, text)`` and
``close()``.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

VIEWS = ("auto", "rich", "plain", "none")
"""The kinds :func:`make_view` takes."""

SHOWN_FINISHED = 5
"""How many finished jobs the rich table keeps below the pending ones (the latest)."""


def summary(session: Any, rows: list[dict[str, Any]] | None = None) -> str:
    """One line: slot, nodes busy last slot, jobs by status (``rows``: the session's
    ``base.jobs()``, if already at hand)."""
    base = session.base
    rows = base.jobs() if rows is None else rows
    counts = {s: sum(r["status"] == s for r in rows) for s in
              ("waiting", "queued", "running", "completed", "expired", "failed")}
    busy = int((base.sim.last_task[0] >= 0).sum())
    clock = (f"{base.slot_seconds:g} s slots" if base.clock == "wall" else "work clock")
    return (f"slot {int(base.sim.t[0])} ({clock}) | nodes busy {busy}/{len(base.possible_agents)}"
            f" | " + ", ".join(f"{k} {v}" for k, v in counts.items() if v)
            + (" | submissions closed" if base.closed else ""))


class PlainView:
    """Events as printed lines (see the module docstring)."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file or sys.stdout

    def update(self, session: Any) -> None:
        pass

    def event(self, slot: int, text: str) -> None:
        print(f"[slot {slot}] {text}", file=self.file, flush=True)

    def close(self) -> None:
        pass


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


class RichView:
    """A live table of the session (see the module docstring).

    Raises:
        ImportError: ``rich`` is not installed (``pip install 'core-env[live]'``).
    """

    def __init__(self, console: Any = None) -> None:
        try:
            from rich.console import Console
            from rich.live import Live
        except ImportError as e:
            raise ImportError("the rich status view needs rich: pip install "
                              "'core-env[live]' (or use view='plain')") from e
        self.console = console or Console()
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def table(self, session: Any) -> Any:
        from rich.table import Table

        base, t = session.base, int(session.base.sim.t[0])
        rows = base.jobs()
        pending = [r for r in rows if r["status"] in ("waiting", "queued", "running")]
        done = [r for r in rows if r not in pending][-SHOWN_FINISHED:]
        table = Table(title=summary(session, rows), title_justify="left")
        for col in ("id", "name", "status", "nodes", "loss", "target", "progress",
                    "deadline in", "eta", "alpha"):
            table.add_column(col, justify="left" if col in ("name", "status") else "right")
        style = {"completed": "green", "expired": "red", "failed": "red bold",
                 "running": "cyan"}
        for r in pending + done:
            eta = r.get("eta")
            late = r.get("on_track") is False
            table.add_row(
                str(r["id"]), r["name"], f"[{style.get(r['status'], '')}]{r['status']}",
                str(r.get("nodes", "-")), _fmt(r["loss"]), _fmt(r["target"]),
                "-" if r.get("psi") is None else f"{100 * r['psi']:.0f}%",
                str(r["deadline"] - t) if r in pending else "-",
                "-" if eta is None else (f"[red]{eta}" if late else str(eta)),
                f"{r['alpha']:.2f}")
        return table

    def update(self, session: Any) -> None:
        self.live.update(self.table(session), refresh=True)

    def event(self, slot: int, text: str) -> None:
        self.live.console.print(f"[slot {slot}] {text}", markup=False, highlight=False)

    def close(self) -> None:
        self.live.stop()


def make_view(kind: str = "auto", file: TextIO | None = None) -> Any:
    """A view: ``"rich"``, ``"plain"``, ``"none"`` (None), or ``"auto"``: rich on a
    terminal where it is installed, else plain.

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in VIEWS:
        raise ValueError(f"view: expected one of {VIEWS}, got {kind!r}")
    if kind == "none":
        return None
    if kind == "auto":
        out = file or sys.stdout
        try:
            import rich  # noqa: F401
            kind = "rich" if out.isatty() else "plain"
        except ImportError:
            kind = "plain"
    if kind == "rich":
        from rich.console import Console

        return RichView(Console(file=file) if file is not None else None)
    return PlainView(file)


__all__ = ["VIEWS", "PlainView", "RichView", "make_view", "summary"]
