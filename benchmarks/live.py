"""The ``live`` suite: policies scheduling real training jobs, beside the simulator's prediction.

For each seed and policy, one episode of a live preset (:class:`core_env.live.
LiveSchedulerEnv`: every task a real training run on the local runtime's workers), then the
same policy on the replayed simulator (:func:`core_env.live.replay` with the tasks'
reference curves: the simulator's model of the same jobs, arrivals, deadlines and targets;
on the wall clock its slot is calibrated to the work units each task really trained per slot).
The sim-to-real gap of a policy is its live completion minus its simulated completion,
paired by seed; policies are also paired against the reference policy (LARA) on the live runs.

Per episode it stores the live and simulated statistics, the wall time, the time spent in
``env.step`` (the runtime: real training, serialisation, transfer, the driver) and outside it
(the policy's decisions and its forecasts), the runtime's ``overhead_fraction`` and the
``packing_fraction`` (:meth:`core_env.live.LiveSchedulerEnv.episode_timing`); every
live episode's record is kept (``records/``), so a replay can be rerun or inspected.
Episodes are written as they finish; rerunning resumes.

    mara-bench live --preset Live-Small-v0 --seeds 10     # lara, edf, successive_halving
    mara-bench live --preset Live-v0 --seeds 10           # lara, edf, mara
    mara-bench live --pilots my/pilots.npz                 # tasks from your own jobs' pilots
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.flags import (
    Command,
    add_backend,
    add_out,
    add_policies,
    add_presets,
    add_reference,
    add_seeds,
    arg_type,
    integer,
    positive,
)
from benchmarks.report import audit_cells, audit_row, markdown_table
from benchmarks.stats import DIFFERENCE, RATE, mean_ci
from benchmarks.store import safe_name, write_atomic, write_csv

DEFAULT_POLICIES = {"Live-v0": ("lara", "edf", "mara"),
                    "Live-Small-v0": ("lara", "edf", "successive_halving")}
"""Policies per preset (the shipped MARA runs on 8 to 64 nodes, not on Live-Small-v0's 4)."""
REPLAY = "measured"
"""The replay's slot (:func:`core_env.live.replay`): calibrated to the units each task
really trained per slot (the same as the model's on the work clock)."""
FIELDS = ("preset", "policy", "seed", "live", "sim", "gap", "units_per_slot", "completed",
          "arrived",
          "episode_seconds", "step_seconds", "decision_seconds", "overhead_fraction",
          "packing_fraction",
          "migrations", "migration_bytes", "failed", "lost_slots", "worker_deaths")


class _Timed:
    """A policy whose ``act`` time is summed (the decision time of an episode)."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.seconds = policy, 0.0

    def reset(self, seed: int | None = None) -> None:
        self.policy.reset(seed)

    def act(self, observations: dict) -> dict:
        t0 = time.perf_counter()
        try:
            return self.policy.act(observations)
        finally:
            self.seconds += time.perf_counter() - t0


def run_pair(preset: str, policy: str, seed: int, runtime: Any, records: Path,
             slot_seconds: float | None = None, pilots: str | None = None) -> dict[str, Any]:
    """One live episode (on the wall clock with ``slot_seconds``, else the work clock; tasks
    from the pilot file ``pilots``, else the shipped set) and its replayed simulation;
    returns the stored row."""
    from core_env import CoreSchedulerEnv
    from core_env.live import LiveSchedulerEnv, replay
    from mara_agents.policy import make_policy, run_episode

    options: dict[str, Any] = ({"clock": "work"} if slot_seconds is None
                               else {"clock": "wall", "slot_seconds": slot_seconds})
    if pilots is not None:
        options["pilots"] = pilots
    live_env = LiveSchedulerEnv(preset=preset, runtime=runtime, time_limit=120.0, **options)
    env, pol = make_policy(policy, live_env)
    timed = _Timed(pol)
    t0 = time.perf_counter()
    stats = run_episode(env, timed, seed)
    wall = time.perf_counter() - t0
    record = live_env.record
    assert record is not None  # run_episode reset the env, which started it
    record.save(records / f"{safe_name(preset)}_{policy.replace(':', '_')}_{seed}.npz")
    cfg, wl = replay(record, "reference", slot=REPLAY)
    sim_env, sim_pol = make_policy(policy, CoreSchedulerEnv(cfg))
    sim = run_episode(sim_env, sim_pol, seed, options={"workload": wl})
    timing = live_env.episode_timing()
    return {"preset": preset, "policy": policy, "seed": seed, "slot_seconds": slot_seconds,
            "pilots": pilots,
            "live": stats["completion_rate"], "sim": sim["completion_rate"],
            "gap": stats["completion_rate"] - sim["completion_rate"], "replay": REPLAY,
            "units_per_slot": float(statistics.median(record.units_per_slot()))
            if record.workload.n_tasks else 1.0,
            "completed": stats["completed"], "arrived": stats["arrived"],
            "episode_seconds": wall, "step_seconds": timing["slot"],
            "decision_seconds": timed.seconds,
            "overhead_fraction": timing["overhead_fraction"],
            "packing_fraction": timing["packing_fraction"],
            **{k: stats[k] for k in ("migrations", "migration_bytes", "failed", "lost_slots",
                                     "worker_deaths", "groups")}}


def run(preset: str = "Live-Small-v0", policies: Sequence[str] = ("lara", "edf"),
        seeds: Sequence[int] = tuple(range(10)), out: Path = Path("results/live"),
        progress: bool = True, backend: str = "local", ray_address: str | None = None,
        slot_seconds: float | None = None, pilots: str | None = None,
        max_running: int | None = None) -> list[dict[str, Any]]:
    """Run (or resume) the suite on the ``backend`` runtime (``"local"`` or ``"ray"``,
    joining ``ray_address``), on the work clock or, with ``slot_seconds``, the wall clock,
    with tasks from the pilot file ``pilots`` (None: the shipped set), at most
    ``max_running`` jobs training at once on the local backend (None: every node's);
    returns one row per (policy, seed).

    Raises:
        ValueError: ``out`` holds episodes of the other clock, another ``slot_seconds`` or
            other pilots.
    """
    from core_env.live import live_config, make_runtime

    cfg = live_config(preset)
    episodes, records = out / "episodes", out / "records"
    episodes.mkdir(parents=True, exist_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    todo = [(p, s) for s in seeds for p in policies]
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    runtime = None
    try:
        for i, (policy, seed) in enumerate(todo):
            path = episodes / f"{safe_name(preset)}_{policy.replace(':', '_')}_{seed}.json"
            if path.is_file():
                row = json.loads(path.read_text())
                if row.get("slot_seconds") != slot_seconds:
                    raise ValueError(f"{path}: run with slot_seconds "
                                     f"{row.get('slot_seconds')}, this run asks for "
                                     f"{slot_seconds}; use another --out")
                if row.get("pilots") != pilots:
                    raise ValueError(f"{path}: run with the pilots {row.get('pilots')!r}, "
                                     f"this run asks for {pilots!r}; use another --out")
                if row.get("replay") != REPLAY:
                    raise ValueError(f"{path}: simulated with the replay's slot "
                                     f"{row.get('replay')!r}, this version uses {REPLAY!r}; "
                                     f"use another --out")
                if "packing_fraction" not in row:
                    raise ValueError(f"{path}: written by a version whose overhead_fraction "
                                     f"included the packing loss; use another --out")
                rows[(policy, seed)] = row
                continue
            if runtime is None:
                runtime = make_runtime(backend, cfg.cluster.n_nodes, 120.0, ray_address,
                                       max_running)
            row = run_pair(preset, policy, seed, runtime, records, slot_seconds, pilots)
            write_atomic(path, json.dumps(row, indent=1))
            rows[(policy, seed)] = row
            if progress:
                print(f"[{i + 1}/{len(todo)}] {policy} seed {seed}: live {row['live']:.3f} "
                      f"sim {row['sim']:.3f} in {row['episode_seconds']:.0f} s "
                      f"(overhead {row['overhead_fraction']:.1%})", flush=True)
    finally:
        if runtime is not None:
            runtime.close()
    return [rows[(p, s)] for p, s in todo]


def summarise(rows: Sequence[dict[str, Any]], reference: str = "lara") -> list[dict[str, Any]]:
    """Per policy: live and simulated completion, the paired gap, the paired live difference
    to ``reference``, and the medians of the timings."""

    by: dict[str, dict[int, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["policy"], {})[r["seed"]] = r
    out = []
    for policy, per_seed in by.items():
        rs = list(per_seed.values())
        ref = by.get(reference, {})
        paired = [r["live"] - ref[s]["live"] for s, r in per_seed.items() if s in ref]
        out.append({
            "policy": policy, "seeds": len(rs),
            "live": mean_ci([r["live"] for r in rs], bounds=RATE),
            "sim": mean_ci([r["sim"] for r in rs], bounds=RATE),
            "gap": mean_ci([r["gap"] for r in rs], bounds=DIFFERENCE),
            "vs_reference": (mean_ci(paired, bounds=DIFFERENCE)
                             if paired and policy != reference else None),
            "units_per_slot": statistics.median(r["units_per_slot"] for r in rs),
            "episode_seconds": statistics.median(r["episode_seconds"] for r in rs),
            "overhead_fraction": statistics.median(r["overhead_fraction"] for r in rs),
            "packing_fraction": statistics.median(r["packing_fraction"] for r in rs),
            "decision_share": statistics.median(r["decision_seconds"] / r["episode_seconds"]
                                                for r in rs),
            "migration_mb": statistics.median(r["migration_bytes"] / 1e6 for r in rs),
            **audit_row(rs),
        })
    return out


def _ci(m: tuple[float, float, float] | None) -> str:
    if m is None:
        return "-"
    return f"{100 * m[0]:+.1f} ({100 * m[1]:+.1f}, {100 * m[2]:+.1f})"


def format_table(rows: Sequence[dict[str, Any]], reference: str = "lara") -> str:
    preset = rows[0]["preset"] if rows else "?"
    body = [[s["policy"], s["seeds"], f"{100 * s['live'][0]:.1f}%", f"{100 * s['sim'][0]:.1f}%",
             _ci(s["gap"]), _ci(s["vs_reference"]), f"{s['units_per_slot']:.2f}",
             f"{s['episode_seconds']:.0f}",
             f"{100 * s['overhead_fraction']:.1f}%", f"{100 * s['packing_fraction']:.1f}%",
             f"{100 * s['decision_share']:.1f}%",
             f"{s['migration_mb']:.1f}", *audit_cells(s)] for s in summarise(rows, reference)]
    header = ["policy", "seeds", "live completion", "simulated", "gap live - sim (pts, 95% CI)",
              f"live vs {reference} (pts, 95% CI)", "units per model unit (median)",
              "episode s (median)",
              "runtime overhead", "packing loss", "decision share", "migrated MB",
              "worst group", "largest gap"]
    return markdown_table(header, body, title=f"Live mode: {preset}, real jobs vs the "
                                                f"replayed simulator")


def write(rows: Sequence[dict[str, Any]], out: Path, reference: str = "lara") -> str:
    """``live.json``, ``live.csv``, ``live.md`` and ``live.png`` (live vs simulated
    completion per episode) in ``out``; returns the table."""
    table = format_table(rows, reference)
    write_atomic(out / "live.json", json.dumps(list(rows), indent=1))
    write_csv(out / "live.csv", rows, FIELDS)
    write_atomic(out / "live.md", table)
    _plot(rows, out / "live.png")
    return table


def _plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    from benchmarks.plots import _pyplot, save_figure

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 5))
    for policy in dict.fromkeys(r["policy"] for r in rows):
        pts = [(100 * r["sim"], 100 * r["live"]) for r in rows if r["policy"] == policy]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=policy, alpha=0.7)
    ax.plot([0, 100], [0, 100], color="grey", lw=0.8, ls="--")
    ax.set_xlabel("replayed simulator: completion (%)")
    ax.set_ylabel("live: completion (%)")
    ax.set_title(f"{rows[0]['preset']}: one point per episode" if rows else "")
    ax.legend()
    save_figure(fig, path)


def _pilot_file(text: str) -> str:
    """A pilot file that loads (its absolute path, as stored with every episode)."""
    from core_env.banks import BankError
    from core_env.live import load_pilots

    if not text.endswith(".npz"):
        raise ValueError(f"expected a pilot file ending in .npz, got {text!r}")
    try:
        load_pilots(text)
    except BankError as e:
        raise ValueError(str(e)) from e
    return str(Path(text).resolve())


pilot_file = arg_type(_pilot_file)
"""``type=``: a pilot file of :meth:`core_env.live.Pilots.save`, loaded and checked."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from core_env.live import live_config

    add_presets(parser, ["Live-Small-v0"], one=True, choices=tuple(DEFAULT_POLICIES),
                overrides=live_config,
                help="live preset id, optionally with overrides (Live-v0:load=3; this suite "
                     "runs exactly one)")
    add_policies(parser, None, help="built-in names or package.module:Factory specs "
                 "(default: lara edf mara on Live-v0, lara edf successive_halving on "
                 "Live-Small-v0, whose layout the shipped MARA cannot run)")
    add_seeds(parser, seeds=10)
    add_reference(parser, "lara", "the policy the others are paired against")
    add_backend(parser, "the runtime: worker processes here, or Ray actors",
                "with --backend ray: the cluster to join (default: a local Ray)")
    parser.add_argument("--slot-seconds", type=positive, default=None,
                        help="the wall clock: each slot is this many seconds of training "
                             "(default: the work clock, one work unit per node and slot)")
    parser.add_argument("--max-running", type=integer(1), default=None, metavar="N",
                        help="with --backend local: at most N jobs train at once (a machine "
                             "with fewer CPUs than nodes; default: every node's job)")
    parser.add_argument("--pilots", type=pilot_file, default=None, metavar="FILE",
                        help="a pilot file of your own jobs (Pilots.save; default: the "
                             "shipped pilot set)")
    add_out(parser, Path("results/live"), "results folder; rerun to resume")


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench live``: every value checked by argparse."""
    preset = args.presets[0]
    rows = run(preset, args.policies or DEFAULT_POLICIES[preset.partition(":")[0]],
               range(args.seed_offset, args.seed_offset + args.seeds), args.out,
               backend=args.backend, ray_address=args.ray_address,
               slot_seconds=args.slot_seconds, pilots=args.pilots,
               max_running=args.max_running)
    print(write(rows, args.out, args.reference))
    print(f"results in {args.out}/")
    return 0


COMMAND = Command("live", "policies on real training jobs (live mode) beside the replayed "
                          "simulator: the sim-to-real gap", add_arguments, run_command)
