"""``mara-bench session``: schedule your own jobs as they are submitted (live mode, SPEC §8).

A :class:`~core_env.live.session.LiveSession` on local worker processes or a Ray cluster,
run by one policy, taking submissions from JSON-lines files (one job per line, read as
lines are appended) and folders (one ``*.json`` file per job, read as files appear; see
:mod:`core_env.live.submissions`). It runs until interrupted (Ctrl-C or SIGTERM), or with
``--until-idle`` until every job has finished and no new one came; a status view shows the
jobs meanwhile, and the report (every job's outcome, the refused submissions, the events,
timing) is written to ``--out`` as JSON. Job classes (``module:Class``) import from the
directory the command was started in, as policies do::

    touch jobs.jsonl
    mara-bench session jobs.jsonl --policy lara --out report.json &
    echo '{"kind": "mlp-digits", "variant": {"hidden": 64}, "target": 0.3, "deadline": 30,
           "max_nodes": 2}' >> jobs.jsonl     # (on one line)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.flags import (
    Command,
    add_backend,
    add_out,
    add_presets,
    integer,
    policy_spec,
    positive,
    write_json,
)


def _source(text: str) -> Any:
    from core_env.live.submissions import FolderSource, JsonLinesSource

    path = Path(text)
    return FolderSource(path) if path.is_dir() else JsonLinesSource(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from benchmarks.live import pilot_file
    from core_env.live import live_config

    parser.add_argument("submissions", nargs="+", metavar="SOURCE",
                        help="JSON-lines files and folders the submissions come from (each "
                             "must exist)")
    parser.add_argument("--policy", type=policy_spec, default="lara",
                        help="the scheduler: a built-in name or package.module:Factory")
    add_presets(parser, ["Live-Small-v0"], one=True, overrides=live_config,
                choices=("Live-Small-v0", "Live-v0"),
                help="the layout (nodes, visible slots, longest deadline), optionally with "
                     "overrides (Live-Small-v0:n_nodes=8,max_visible_tasks=16)")
    add_backend(parser, "the runtime: worker processes here, or Ray actors",
                "with --backend ray: the cluster to join (default: a local Ray)")
    parser.add_argument("--slot-seconds", type=positive, default=None,
                        help="the wall clock: each slot is this many seconds of training, "
                             "and deadlines may be given in seconds (default: the work "
                             "clock, one work unit per node and slot)")
    parser.add_argument("--max-running", type=integer(1), default=None, metavar="N",
                        help="with --backend local: at most N jobs train at once")
    parser.add_argument("--pilots", type=pilot_file, default=None, metavar="FILE",
                        help="a pilot file whose fitted alphas are the priors of its kinds' "
                             "jobs (default: the shipped pilot set, mlp-digits)")
    parser.add_argument("--capacity", type=integer(1), default=256,
                        help="the most jobs the session takes")
    parser.add_argument("--time-limit", type=positive, default=600.0,
                        help="seconds one job's slot may take before it is failed")
    parser.add_argument("--seed", type=integer(0), default=0, help="the session's seed")
    parser.add_argument("--until-idle", action="store_true",
                        help="return once every job has finished and the sources had "
                             "nothing new (default: run until Ctrl-C)")
    parser.add_argument("--max-slots", type=integer(1), default=None,
                        help="return after this many slots")
    parser.add_argument("--poll-seconds", type=positive, default=0.5,
                        help="how often an idle session looks for submissions")
    parser.add_argument("--view", choices=("auto", "rich", "plain", "none"), default="auto",
                        help="the status view: a live table (rich), one line per event "
                             "(plain), or none; auto: rich on a terminal")
    add_out(parser, None, "write the final report here (JSON)")
    parser.add_argument("--record", type=Path, default=None,
                        help="write the session's record here (.npz, core_env.live.record)")


def serve(args: argparse.Namespace) -> dict[str, Any]:
    """Run a session from parsed flags; returns its report."""
    from core_env.live import PILOTS, make_runtime
    from core_env.live.live_presets import live_config
    from core_env.live.session import LiveSession, LiveSessionEnv
    from core_env.live.status import make_view
    from mara_agents.policy import make_policy

    if args.max_running is not None and args.backend != "local":
        raise ValueError("--max-running: only with --backend local")
    sources = [_source(s) for s in args.submissions]
    cfg = live_config(args.presets[0])
    # job classes import from the directory the command was started in, as policies do:
    # spawned workers inherit the path, and Ray adds the driver's directory to its workers'
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    runtime = make_runtime(args.backend, cfg.cluster.n_nodes, args.time_limit,
                           args.ray_address, args.max_running)
    try:
        base = LiveSessionEnv(cfg, pilots=args.pilots or PILOTS, capacity=args.capacity,
                              runtime=runtime, time_limit=args.time_limit,
                              clock="wall" if args.slot_seconds else "work",
                              slot_seconds=args.slot_seconds)
        env, policy = make_policy(args.policy, base)
        session = LiveSession(env, policy, seed=args.seed, view=make_view(args.view))
        try:
            session.run(sources, until_idle=args.until_idle, max_slots=args.max_slots,
                        poll_seconds=args.poll_seconds)
        except KeyboardInterrupt:
            session.note("interrupted: stopping (unfinished jobs are reported as they are)")
        finally:
            if session.view is not None:
                session.view.close()
                session.view = None
        report = {"policy": args.policy, "preset": args.presets[0],
                  "backend": args.backend, **session.report()}
        if args.record is not None:
            base.save_record(args.record)
        session.close()
    finally:
        runtime.close()
    return report


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, systemd, a container stopping) raises ``KeyboardInterrupt`` inside
    the block, as Ctrl-C does, so that the session stops and its report is still written;
    the previous handler is restored after. Only in the main thread (where signals arrive)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench session``: every value checked by argparse or before anything starts.
    SIGTERM stops the session as Ctrl-C does (the report is written)."""
    with sigterm_as_interrupt():
        report = serve(args)
    write_json(args.out, report)
    totals = {k: report[k] for k in ("submitted", "completed", "expired", "failed",
                                     "waiting", "queued", "running")}
    print(json.dumps({"slots": report["slots"], **totals,
                      "refused": len(report["rejected"])}))
    if args.out is not None:
        print(f"report in {args.out}")
    return 0


COMMAND = Command("session", "schedule your own jobs as they are submitted (a live session "
                             "reading JSON-lines files or folders)", add_arguments,
                  run_command)
