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

NAME_WIDTH = 14
"""The rich table's name column takes the console's width that the other columns leave, and
at least this many characters; a longer name loses its middle (:func:`shorten`), so that
names which differ only at the end (a seed, a learning rate) stay distinguishable."""


def shorten(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` in at most ``width`` characters: its start and its end, joined by an
    ellipsis where the middle was left out.

    Raises:
        ValueError: ``width`` < 3.
    """
    if width < 3:
        raise ValueError(f"width: expected at least 3 characters, got {width}")
    if len(name) <= width:
        return name
    tail = (width - 1) // 2
    return f"{name[:width - 1 - tail]}\u2026{name[len(name) - tail:]}"


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
        from rich.box import SIMPLE_HEAD
        from rich.table import Table

        base, t = session.base, int(session.base.sim.t[0])
        rows = base.jobs()
        pending = [r for r in rows if r["status"] in ("waiting", "queued", "running")]
        done = [r for r in rows if r not in pending][-SHOWN_FINISHED:]
        cells = []  # (plain text, styled) per column, the name left out
        style = {"completed": "green", "expired": "red", "failed": "red bold",
                 "running": "cyan"}
        for r in pending + done:
            eta = "-" if r.get("eta") is None else str(r["eta"])
            cells.append([
                (str(r["id"]),) * 2, (r["status"], f"[{style.get(r['status'], '')}]{r['status']}"),
                (str(r.get("nodes", "-")),) * 2, (_fmt(r["loss"]),) * 2,
                (_fmt(r["target"]),) * 2,
                ("-" if r.get("psi") is None else f"{100 * r['psi']:.0f}%",) * 2,
                (str(r["deadline"] - t) if r in pending else "-",) * 2,
                (eta, f"[red]{eta}" if r.get("on_track") is False else eta),
                (f"{r['alpha']:.2f}",) * 2])
        heads = ("id", "status", "nodes", "loss", "target", "done", "due in", "eta",
                 "alpha")
        # every other column as wide as its widest cell or header; the name gets what is left
        # of the console (each column costs 2 more: the gap before it), at least NAME_WIDTH, and a
        # longer name loses its middle (shorten)
        widths = [max([len(h)] + [len(row[i][0]) for row in cells]) for i, h in enumerate(heads)]
        room = self.console.width - sum(widths) - 2 * len(heads)
        names = [shorten(r["name"], max(room, NAME_WIDTH)) for r in pending + done]
        table = Table(title=summary(session, rows), title_justify="left", box=SIMPLE_HEAD,
                      show_edge=False, pad_edge=False, collapse_padding=True)
        for i, head in enumerate(heads):
            if i == 1:
                table.add_column("name", min_width=max(map(len, names), default=4),
                                 no_wrap=True)
            table.add_column(head, justify="left" if head == "status" else "right",
                             min_width=widths[i], no_wrap=True)
        for row, name in zip(cells, names, strict=True):
            table.add_row(row[0][1], name, *(styled for _, styled in row[1:]))
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


__all__ = ["NAME_WIDTH", "VIEWS", "PlainView", "RichView", "make_view", "shorten", "summary"]
