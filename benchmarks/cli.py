"""``mara-bench`` / ``python -m benchmarks``: run a named suite and print its table.

Contract: every suite is a :class:`benchmarks.flags.Command` listed once in
:func:`commands`; the parser is built from that list (one subcommand per suite, with the
suite's own flags) and ``main`` dispatches to the command's ``run``. Every argument is
checked before anything runs or is written, once: a bad name, number or file is a usage
error (exit status 2) that lists what is valid. A policy that fails during an episode
(:class:`benchmarks.runner.EpisodeError`) ends the command with exit status 1 and one message
naming the policy, preset and seed, and where it was raised. Example::

    mara-bench default --presets CoRE-Small-v0 --seeds 2 --policies lara edf --out /tmp/x
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence

from benchmarks.flags import Command


def _demo(args: argparse.Namespace) -> int:
    from benchmarks import demo

    print(demo.main())
    return 0


DEMO = Command("demo", "the default suite into results/default (what `make demo` runs)",
               lambda parser: None, _demo)
"""``mara-bench demo``: :func:`benchmarks.demo.main`, no flags."""


def commands() -> tuple[Command, ...]:
    """Every suite of ``mara-bench``, in the order of ``mara-bench --help``."""
    from benchmarks import (
        compare_checkpoints,
        forecast,
        live,
        marl,
        policy_time,
        session,
        soak,
        speed,
        suites,
    )

    return (DEMO, *suites.COMMANDS, forecast.COMMAND, speed.COMMAND, policy_time.COMMAND,
            compare_checkpoints.COMMAND, live.COMMAND, session.COMMAND, marl.COMMAND,
            soak.COMMAND)


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every flag's default in its help (a list as it is typed), unless None or named by
    the help itself."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or "(default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)

    def _expand_help(self, action: argparse.Action) -> str:
        if isinstance(action.default, (list, tuple)):
            action = copy.copy(action)
            action.default = " ".join(str(v) for v in action.default)
        return super()._expand_help(action)


def build_parser(cmds: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The ``mara-bench`` parser: one subcommand per command (default: :func:`commands`);
    the chosen one's name is ``args.suite``."""
    fmt = _Formatter
    parser = argparse.ArgumentParser(prog="mara-bench", description=__doc__.split("\n\n")[0],
                                     formatter_class=fmt)
    sub = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for cmd in commands() if cmds is None else cmds:
        cmd.add_arguments(sub.add_parser(cmd.name, help=cmd.help, description=cmd.help,
                                         formatter_class=fmt))
    return parser


def main(argv: list[str] | None = None) -> int:
    cmds = {c.name: c for c in commands()}
    parser = build_parser(tuple(cmds.values()))
    args = parser.parse_args(argv)
    from benchmarks.runner import EpisodeError

    try:
        return cmds[args.suite].run(args)
    except ValueError as e:  # bad input found while starting (a name, a file): no traceback
        parser.exit(2, f"mara-bench {args.suite}: error: {e}\n")
    except EpisodeError as e:  # a policy failed in an episode: which one, and where
        parser.exit(1, f"mara-bench {args.suite}: error: {e}\n  ({e.origin})\n")


if __name__ == "__main__":
    sys.exit(main())
