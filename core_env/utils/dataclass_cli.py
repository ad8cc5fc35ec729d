"""Dataclass configs as command lines: one flag per field, nested dataclasses as
``--<field>-<subfield>``, help text from the docstring under each field."""

from __future__ import annotations

import argparse
import ast
import inspect
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each dataclass field (for ``--help``), of the class and of the
    dataclasses it derives from."""
    docs: dict[str, str] = {}
    for klass in reversed([k for k in cls.__mro__ if is_dataclass(k)]):
        tree = ast.parse(inspect.getsource(klass))
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, nxt in zip(body, body[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)):
                docs[node.target.id] = " ".join(str(nxt.value.value).split())
    return docs


def add_flags(parser: argparse.ArgumentParser, cls: type, defaults: Any, prefix: str = ""
              ) -> None:
    """One flag per dataclass field (``--a-b``); nested dataclasses get ``--<field>-<sub>``
    (their argparse ``dest`` is ``field.sub``)."""
    docs = field_docs(cls)
    for f in fields(cls):
        default = getattr(defaults, f.name)
        dest = prefix + f.name
        if is_dataclass(default) and not isinstance(default, type):  # a nested config
            add_flags(parser, type(default), default, prefix=dest + ".")
            continue
        flag = "--" + dest.replace(".", "-").replace("_", "-")
        # argparse %-formats help strings: escape the docstrings' own percent signs
        help_text = f"{docs.get(f.name, '')} (default: {default})".replace("%", "%%")
        if isinstance(default, bool):
            parser.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction,
                                default=default, help=help_text)
        elif isinstance(default, tuple):
            parser.add_argument(flag, dest=dest, type=type(default[0]), nargs=2,
                                default=default, metavar=("LOW", "HIGH"), help=help_text)
        else:
            parser.add_argument(flag, dest=dest, type=type(default), default=default,
                                help=help_text)


def build(cls: type[T], values: dict[str, Any], defaults: Any | None = None) -> T:
    """Instantiate ``cls`` from flat ``{"a": .., "model.b": ..}`` values (nested dataclass
    fields rebuilt from their dotted keys)."""
    defaults = cls() if defaults is None else defaults
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        default = getattr(defaults, f.name)
        if is_dataclass(default) and not isinstance(default, type):  # a nested config
            sub = {k.split(".", 1)[1]: v for k, v in values.items()
                   if k.startswith(f.name + ".")}
            kwargs[f.name] = build(type(default), sub, default)
        elif f.name in values:
            v = values[f.name]
            kwargs[f.name] = tuple(v) if isinstance(v, list) else v
    return cls(**kwargs)


def parse_config(cls: type[T], argv: Sequence[str] | None, prog: str, description: str) -> T:
    """Parse a command line into a ``cls`` instance; invalid values exit with the
    ``ValueError`` message (argparse error, exit status 2)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_flags(parser, cls, cls())
    values = vars(parser.parse_args(argv))
    try:
        return build(cls, values)
    except ValueError as e:
        parser.error(str(e))
        raise  # unreachable: parser.error exits
