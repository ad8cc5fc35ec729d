"""The flags the ``mara-bench`` suites share, defined once, and :class:`Command`, the record by
which a suite module joins the command line (:mod:`benchmarks.cli`).

Contract: a suite module exposes ``COMMAND = Command(name, help, add_arguments, run)``.
``add_arguments(parser)`` adds the suite's flags to its subparser, the common ones through
the helpers here, so that they are spelt, typed and checked alike in every suite:
``--presets`` (preset ids; a suite that runs one preset takes ``--preset``, one id), ``--seeds`` (at
least 1) with ``--seed-offset`` (the first seed, at least 0), ``--workers`` (at least 1),
``--out``, ``--fresh``, ``--policies``, ``--reference`` and ``--backend`` /
``--ray-address``.
``run(args)`` runs the parsed namespace and returns the exit status.

Validation happens once. Values are checked by argparse, whose ``type=`` functions wrap
:mod:`core_env.utils.checks` (a bad value: exit status 2 naming the flag, nothing run). What
argparse cannot check (a policy that does not fit a preset, a checkpoint that does not load,
two flags that contradict each other) the suite's ``run`` checks before running and raises
``ValueError``, which :func:`benchmarks.cli.main` turns into the same usage error. Example::

    def add_arguments(parser):
        add_presets(parser, ["CoRE-v0"], one=True)
        add_seeds(parser, seeds=5, seed_offset=1000)

    def run_command(args):
        print(format_table(run(args.presets[0], args.seeds, args.seed_offset)))
        return 0

    COMMAND = Command("my-suite", "what it measures", add_arguments, run_command)
"""

from __future__ import annotations

import argparse
import json
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core_env.utils.checks import check_int, check_number, fail

VALUE = "value"
"""The name a ``type=`` check gives its value (``fail(VALUE, text, ...)``): :func:`arg_type`
drops it, since argparse names the flag itself (``argument --seeds: expected ...``)."""


@dataclass(frozen=True)
class Command:
    """One ``mara-bench`` subcommand: its name, one-line help, flags and runner."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def arg_type(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type=`` from a check of the text: its ``ValueError`` becomes an
    ``ArgumentTypeError`` (a usage error, exit status 2)."""

    def parse(text: str) -> Any:
        try:
            return check(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{VALUE}: ")) from None

    parse.__name__ = getattr(check, "__name__", "value")
    return parse


def _convert(kind: type, text: str) -> Any:
    """``kind(text)``, or the text itself when it is not one (the check then reports it)."""
    try:
        return kind(text)
    except ValueError:
        return text


def integer(minimum: int | None = None) -> Callable[[str], int]:
    """``type=``: a whole number >= ``minimum`` (:func:`core_env.utils.checks.check_int`)."""
    return arg_type(lambda text: check_int(VALUE, _convert(int, text), minimum))


def _positive(text: str) -> float:
    try:
        return check_number(VALUE, _convert(float, text), 0.0, math.inf, lo_open=True)
    except ValueError:
        fail(VALUE, text, "a positive finite number")
        raise


positive = arg_type(_positive)
"""``type=``: a positive finite number (:func:`core_env.utils.checks.check_number`)."""


def preset_id(choices: Sequence[str] | None = None,
              overrides: Callable[[str], Any] | None = None) -> Callable[[str], str]:
    """``type=``: one of ``choices`` (default: :data:`core_env.PRESETS`), or one of them with
    overrides, ``ID:name=value[,name=value ...]`` (:func:`core_env.presets.split_preset`),
    checked by ``overrides(text)`` (default: :func:`core_env.make_config`, for the
    default choices; with other ``choices`` and no ``overrides``, plain ids only)."""

    def check(text: str) -> str:
        import core_env

        names = sorted(core_env.PRESETS if choices is None else choices)
        if text in names:
            return text
        make = overrides or (core_env.make_config if choices is None else None)
        if make is not None and ":" in text and text.partition(":")[0] in names:
            try:
                make(text)
            except ValueError as e:
                fail(VALUE, text, f"a preset id with valid overrides ({e})")
            return text
        fail(VALUE, text, f"a preset id, one of {', '.join(names)}"
             + (", optionally with overrides ID:name=value,..." if make else ""))

    return arg_type(check)


def _parsed_policy(text: str) -> Any:
    from mara_agents.policy_spec import PolicySpec

    return PolicySpec.parse(text).check()


parsed_policy = arg_type(_parsed_policy)
"""``type=``: a built-in policy name or an importable ``package.module:Factory`` spec, as
its :class:`~mara_agents.policy_spec.PolicySpec` (parsed once, here)."""

policy_spec = arg_type(lambda text: _parsed_policy(text).text)
"""``type=``: as :data:`parsed_policy`, the spec's text (for suites that keep names)."""


class _OnePreset(argparse.Action):
    """``--preset`` of a suite that runs one preset: exactly one id (``--presets``, its name
    before, still works with a ``FutureWarning``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if option_string == "--presets":
            warnings.warn("--presets: this suite runs one preset; the flag is --preset now "
                          "(--presets goes in the next release)", FutureWarning, stacklevel=2)
        if len(values) != 1:
            raise argparse.ArgumentError(self, f"expected one preset id (this suite runs one "
                                               f"preset), got {len(values)}: {values}")
        setattr(namespace, self.dest, list(values))


def add_presets(parser: argparse.ArgumentParser, default: Sequence[str], *, one: bool = False,
                choices: Sequence[str] | None = None, help: str | None = None,
                overrides: Callable[[str], Any] | None = None) -> None:
    """``--presets ID [ID ...]`` (a list); with ``one``, ``--preset ID``: exactly one id
    (``args.presets`` either way; see :func:`preset_id` for ``choices`` and
    ``overrides``)."""
    text = help or ("preset id (this suite runs exactly one)" if one else "preset ids")
    flags = ("--preset", "--presets") if one else ("--presets",)
    parser.add_argument(*flags, dest="presets", nargs="+", type=preset_id(choices, overrides),
                        metavar="PRESET",
                        default=list(default), action=_OnePreset if one else "store",
                        help=text)


def add_seeds(parser: argparse.ArgumentParser, seeds: int, seed_offset: int = 0) -> None:
    """``--seeds N`` (at least 1) and ``--seed-offset S``: seeds S .. S + N - 1."""
    parser.add_argument("--seeds", type=integer(1), default=seeds,
                        help="number of seeds (seed-offset .. seed-offset + seeds - 1)")
    parser.add_argument("--seed-offset", type=integer(0), default=seed_offset,
                        help="the first seed")


def add_workers(parser: argparse.ArgumentParser, default: int = 2,
                help: str = "local processes (1: in this process)") -> None:
    """``--workers N`` (at least 1)."""
    parser.add_argument("--workers", type=integer(1), default=default, help=help)


def add_out(parser: argparse.ArgumentParser, default: Path | None, help: str) -> None:
    """``--out PATH``: a results folder, or a JSON file (``default`` None: not written)."""
    parser.add_argument("--out", type=Path, default=default, help=help)


def add_policies(parser: argparse.ArgumentParser, default: Sequence[str] | None,
                 help: str = "built-in names or package.module:Factory specs of your own",
                 parsed: bool = False) -> None:
    """``--policies SPEC [SPEC ...]``, each checked by :data:`policy_spec` (``parsed``:
    :data:`parsed_policy`, the values are :class:`~mara_agents.policy_spec.PolicySpec`)."""
    parser.add_argument("--policies", nargs="+", type=parsed_policy if parsed else policy_spec,
                        metavar="POLICY", default=None if default is None else list(default),
                        help=help)


def add_fresh(parser: argparse.ArgumentParser) -> None:
    """``--fresh``: recompute every episode, also those stored in ``--out``."""
    parser.add_argument("--fresh", action="store_true",
                        help="recompute every episode instead of reusing those stored in "
                             "--out")


def add_reference(parser: argparse.ArgumentParser, default: str | None, help: str) -> None:
    """``--reference SPEC``: the policy the others are paired against."""
    parser.add_argument("--reference", type=policy_spec, metavar="POLICY", default=default,
                        help=help)


def add_backend(parser: argparse.ArgumentParser, help: str, address_help: str) -> None:
    """``--backend local|ray`` and ``--ray-address``."""
    parser.add_argument("--backend", choices=("local", "ray"), default="local", help=help)
    parser.add_argument("--ray-address", default=None, help=address_help)


def write_json(out: Path | None, res: object) -> None:
    """Write a suite's result as JSON to ``out`` (``--out``), if one was given."""
    if out is not None:
        from benchmarks.store import write_atomic

        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, json.dumps(res, indent=2))
