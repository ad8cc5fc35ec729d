"""Render the generated blocks of ``docs/env.md`` and ``README.md`` from the code.

Every table that restates something the code defines (the observation and state layouts,
the configuration fields, the presets, the task-family mixes, the ``make demo`` output) is
generated here and lives in the Markdown files between marker comments::

    <!-- BEGIN observation-table -->
    ...generated text...
    <!-- END observation-table -->

Usage, from the repository root::

    python -m tools.docs.gen_env_tables           # rewrite the blocks in place
    python -m tools.docs.gen_env_tables --check   # exit 1 and name the stale blocks

``tests/docs/test_docs.py`` fails when a block differs from what this script renders now, so
after changing a feature, a configuration field or a preset, re-run this script.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # lets `python tools/docs/gen_env_tables.py` work too
    sys.path.insert(0, str(ROOT))

import core_env  # noqa: E402
from core_env import curves, presets  # noqa: E402

DEFAULT_PRESET = "CoRE-v0"
"""The preset whose N and K the observation and state tables are rendered for."""

RANGE_NOTES = {
    "window": "Allowed: integers with 1 <= low <= high <= 10000.",
    "speed_choices": "Each speed in (0, 4].",
}
"""Allowed ranges that ``config.py`` checks but whose field docstrings do not state (taken
from the checks in ``__post_init__``); delete an entry once the docstring says it."""


# ----- helpers -----
def _md(text: str) -> str:
    """A docstring fragment as one line of Markdown table text."""
    text = " ".join(inspect.cleandoc(text).split())
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)  # :class:`X` -> `X`
    text = text.replace("``", "`")
    return text.replace("|", "\\|")


def _num(x: float) -> str:
    return f"{x:g}"


def _code(value: object) -> str:
    return f"`{value!r}`"


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring written under the field in ``cls``'s source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[node.target.id] = nxt.value.value
    return docs


def config_sections() -> list[tuple[str, type]]:
    """(name, class) of every section of :class:`core_env.CoreConfig`, in order."""
    default = core_env.CoreConfig()
    return [(f.name, type(getattr(default, f.name)))
            for f in dataclasses.fields(core_env.CoreConfig)]


def _default(f: dataclasses.Field) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _flat_fields(cfg: core_env.CoreConfig) -> dict[str, object]:
    return {f.name: getattr(getattr(cfg, sec), f.name)
            for sec, cls in config_sections() for f in dataclasses.fields(cls)}


# ----- blocks -----
def _layout_table(layout: core_env.Layout) -> str:
    rows = [[block, f"`{name}`", f"`{idx}`", _num(lo), _num(hi), _md(doc)]
            for block, name, idx, lo, hi, doc in layout.describe()]
    return _table(["block", "feature", "index", "low", "high", "meaning"], rows)


def _default_nk() -> tuple[int, int]:
    c = core_env.PRESETS[DEFAULT_PRESET].cluster
    return c.n_nodes, c.max_visible_tasks


def observation_table() -> str:
    n, k = _default_nk()
    lay = core_env.observation_layout(n, k)
    head = (f"`{DEFAULT_PRESET}` (N = {n}, K = {k}): D = {lay.global_size} global + "
            f"{lay.node_size} node + {k} x {lay.task_size} task = **{lay.size}** float32 "
            f"values. `k` is the task slot, 0 .. K - 1.")
    return head + "\n\n" + _layout_table(lay)


def state_table() -> str:
    n, k = _default_nk()
    lay = core_env.state_layout(n, k)
    head = (f"`{DEFAULT_PRESET}` (N = {n}, K = {k}): S = {lay.global_size} global + "
            f"{n} x {lay.node_size} node + {k} x {lay.task_size} task = **{lay.size}** float32 "
            f"values. `i` is the node, 0 .. N - 1; `k` is the task slot, 0 .. K - 1.")
    return head + "\n\n" + _layout_table(lay)


def arguments_table() -> str:
    rows = []
    for _sec, cls in config_sections():
        docs = field_docs(cls)
        for f in dataclasses.fields(cls):
            doc = _md(docs.get(f.name, ""))
            if f.name in RANGE_NOTES:
                doc += " " + RANGE_NOTES[f.name]
            default = _default(f)
            shown = f"`{type(default).__name__}()`" if dataclasses.is_dataclass(default) \
                else _code(default)
            rows.append([f"`{f.name}`", f"`{cls.__name__}`", f"`{f.type}`".replace("|", "\\|"),
                         shown, doc])
    sections = [[f"`{sec}`", f"`{cls.__name__}`", "", f"`{cls.__name__}()`",
                 _md(field_docs(core_env.CoreConfig).get(sec, ""))]
                for sec, cls in config_sections()]
    return _table(["field", "section", "type", "default", "meaning and allowed range"],
                  rows + sections)


def _preset_blurbs() -> dict[str, str]:
    """Preset id -> one-line description, read from the table in ``presets.py``'s docstring."""
    out = {}
    for line in (presets.__doc__ or "").splitlines():
        m = re.match(r"^(\S+)\s{2,}(\S.*)$", line.strip())
        if m and m.group(1) in core_env.PRESETS:
            out[m.group(1)] = _md(m.group(2))
    return out


def presets_table() -> str:
    base = _flat_fields(core_env.PRESETS[DEFAULT_PRESET])
    blurbs = _preset_blurbs()
    rows = []
    for pid, cfg in core_env.PRESETS.items():
        w = cfg.workload
        diff = [f"`{name}={value!r}`" for name, value in _flat_fields(cfg).items()
                if value != base[name]]
        rows.append([f"`{pid}`", blurbs.get(pid, ""), str(cfg.cluster.n_nodes),
                     str(cfg.cluster.max_visible_tasks), f"`{w.mix}`", _num(w.arrival_rate),
                     str(w.arrival_slots), _num(w.arrival_rate * w.arrival_slots),
                     str(cfg.max_steps), ", ".join(diff) if diff else "(the reference)"])
    return _table(["id", "what it is", "N", "K", "mix", "arrivals / slot", "arrival slots",
                   "expected tasks", "max_steps", f"differs from `{DEFAULT_PRESET}` in"], rows)


def presets_summary() -> str:
    blurbs = _preset_blurbs()
    rows = []
    for pid, cfg in core_env.PRESETS.items():
        w = cfg.workload
        rows.append([f"`{pid}`", blurbs.get(pid, ""), str(cfg.cluster.n_nodes),
                     str(cfg.cluster.max_visible_tasks),
                     _num(w.arrival_rate * w.arrival_slots)])
    return _table(["id", "what it is", "nodes N", "visible slots K", "expected tasks"], rows)


def mixes_table() -> str:
    fields = [f for f in dataclasses.fields(curves.FamilyParams) if f.name != "family"]
    docs = field_docs(curves.FamilyParams)
    # A field documented as "rl: ...; vision: ..." applies to those families only.
    applies = {f.name: set(re.findall(r"(?:^|; )(\w+):", inspect.cleandoc(docs.get(f.name, ""))))
               & set(curves.FAMILIES) for f in fields}
    rows, real = [], []
    for mix, entries in curves.MIXES.items():
        if all(isinstance(p, curves.RealFamily) for p, _ in entries):  # replays bank curves
            splits = {p.split for p, _ in entries}
            real.append([f"`{mix}`", ", ".join(f"`{p.family}` {_num(w)}" for p, w in entries),
                         ", ".join(sorted(splits))])
            continue
        for p, weight in entries:
            cells = []
            for f in fields:
                v = getattr(p, f.name)
                if applies[f.name] and p.family not in applies[f.name]:
                    cells.append("-")
                elif isinstance(v, tuple):
                    cells.append(", ".join(_num(x) for x in v))
                else:
                    cells.append(_num(v))
            rows.append([f"`{mix}`", f"`{p.family}`", _num(weight)] + cells)
    legend = _table(["column", "meaning"],
                    [[f"`{f.name}`", _md(docs.get(f.name, ""))] for f in fields])
    main = _table(["mix", "family", "weight"] + [f"`{f.name}`" for f in fields], rows)
    banks = _table(["mix", "families (weight), each replaying its bank `<family>.npz`",
                    "bank split"], real)
    return main + "\n\n" + legend + "\n\n" + banks


def demo_output() -> str:
    """The table ``make demo`` prints (the default suite, computed afresh)."""
    import tempfile
    from pathlib import Path

    from benchmarks import demo

    with tempfile.TemporaryDirectory() as tmp:
        return demo.main(Path(tmp), progress=False)


BLOCKS: dict[str, Callable[[], str]] = {
    "observation-table": observation_table,
    "state-table": state_table,
    "arguments-table": arguments_table,
    "presets-table": presets_table,
    "presets-summary": presets_summary,
    "mixes-table": mixes_table,
    "demo-output": demo_output,
}
"""Block name -> renderer."""

FILES: dict[str, tuple[str, ...]] = {
    "docs/env.md": ("observation-table", "state-table", "arguments-table", "presets-table",
                    "mixes-table"),
    "README.md": ("presets-summary", "demo-output"),
}
"""File (relative to the repository root) -> the blocks it holds."""


# ----- splicing -----
def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- BEGIN {re.escape(name)} -->\n)(.*?)(<!-- END {re.escape(name)} -->)",
                      re.DOTALL)


def extract(text: str, name: str) -> str:
    """The text between a block's markers (without the marker lines)."""
    m = _pattern(name).search(text)
    if m is None:
        raise KeyError(f"block {name!r}: markers <!-- BEGIN {name} --> / <!-- END {name} --> "
                       f"not found")
    return m.group(2)


def wrap(body: str) -> str:
    """A rendered block as it sits between its markers: blank lines around it."""
    return "\n" + body.rstrip("\n") + "\n\n"


def splice(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` replaced by ``body``."""
    extract(text, name)  # raises if the markers are missing
    return _pattern(name).sub(lambda m: m.group(1) + wrap(body) + m.group(3), text, count=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if a block is out of date")
    args = parser.parse_args(argv)
    stale = []
    for rel, names in FILES.items():
        path = ROOT / rel
        text = path.read_text()
        new = text
        for name in names:
            new = splice(new, name, BLOCKS[name]())
            if extract(text, name) != extract(new, name):
                stale.append(f"{rel}: {name}")
        if new != text and not args.check:
            path.write_text(new)
    if stale:
        verb = "stale" if args.check else "updated"
        print(f"{verb}: " + "; ".join(stale))
        return 1 if args.check else 0
    print("all generated blocks are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
