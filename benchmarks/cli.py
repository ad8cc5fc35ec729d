"""``mara-bench`` / ``python -m benchmarks``: run a named suite and print its table."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _write_json(out: Path | None, res: object) -> None:
    """Write a suite's result as JSON to ``out`` (``--out``), if one was given."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mara-bench", description=__doc__)
    sub = parser.add_subparsers(dest="suite", required=True)
    sub.add_parser("demo", help="the default suite (what make demo runs)")
    speed = sub.add_parser("speed", help="PettingZoo env vs batched simulator throughput")
    speed.add_argument("--preset", default="CoRE-v0")
    speed.add_argument("--runs", type=int, default=5)
    speed.add_argument("--num-envs", type=int, default=256)
    speed.add_argument("--pz-steps", type=int, default=3000)
    speed.add_argument("--batched-steps", type=int, default=1500)
    speed.add_argument("--seed", type=int, default=0)
    speed.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    for name, help_ in (("default", "every policy on CoRE-v0 and CoRE-Heavy-v0 (make demo)"),
                        ("schedule", "every policy on every preset, 50 seeds"),
                        ("ablation", "MARA and its ablations (checkpoints shipped), 50 seeds")):
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--policies", nargs="+", default=None)
        sp.add_argument("--presets", nargs="+", default=None)
        sp.add_argument("--seeds", type=int, default=None, help="number of seeds (0..n-1)")
        sp.add_argument("--seed-offset", type=int, default=0)
        sp.add_argument("--workers", type=int, default=2, help="local processes")
        sp.add_argument("--backend", choices=("local", "ray"), default="local")
        sp.add_argument("--ray-address", default=None, help="ray.init(address=...)")
        sp.add_argument("--out", type=Path, default=None,
                        help="results folder (default results/<suite>); rerun to resume")
    fc = sub.add_parser("forecast", help="remaining-work forecast accuracy: FM vs WLS vs oracle")
    fc.add_argument("--cases", type=int, default=2000, help="cases per mix and prefix")
    fc.add_argument("--seed", type=int, default=12345)
    fc.add_argument("--no-fm", action="store_true", help="skip the flow-matching forecaster")
    fc.add_argument("--out", type=Path, default=Path("results/forecast"))
    pt = sub.add_parser("policy-time", help="episode wall time per policy (inference cost)")
    pt.add_argument("--policies", nargs="+", default=["mara", "lara"],
                    help="policies to time; the last is the baseline of the ratios")
    pt.add_argument("--preset", default="CoRE-v0")
    pt.add_argument("--seeds", type=int, default=5)
    pt.add_argument("--seed-offset", type=int, default=1000)
    pt.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    ck = sub.add_parser("checkpoints", help="MARA checkpoints (and LARA) on the same seeds")
    ck.add_argument("checkpoints", nargs="+", help="MARA checkpoint files (a.pt,b.pt: an "
                    "ensemble); the first is the reference of the paired differences")
    ck.add_argument("--preset", default="CoRE-v0")
    ck.add_argument("--seeds", type=int, default=48)
    ck.add_argument("--seed-offset", type=int, default=100)
    ck.add_argument("--workers", type=int, default=2, help="local processes")
    ck.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    soak = sub.add_parser("soak", help="1M env steps + 100k batched steps: memory and errors")
    soak.add_argument("--preset", default="CoRE-v0")
    soak.add_argument("--env-steps", type=int, default=1_000_000)
    soak.add_argument("--batched-steps", type=int, default=100_000)
    soak.add_argument("--num-envs", type=int, default=256)
    soak.add_argument("--seed", type=int, default=0)
    soak.add_argument("--out", type=Path, default=Path("results/soak"))
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ValueError as e:  # bad input found while starting (a name, a file): no traceback
        parser.exit(2, f"mara-bench {args.suite}: error: {e}\n")


def _run(args: argparse.Namespace) -> int:
    """Run the parsed subcommand."""
    if args.suite == "demo":
        from benchmarks import demo
        print(demo.main())
    elif args.suite == "speed":
        from benchmarks import speed as sp
        res = sp.run(args.preset, args.runs, args.pz_steps, args.num_envs, args.batched_steps,
                     args.seed)
        print(sp.format_table(res))
        _write_json(args.out, res)
    elif args.suite in ("default", "schedule", "ablation"):
        from benchmarks.suites import run_suite
        out = args.out or Path("results") / args.suite
        print(run_suite(args.suite, out, args.policies, args.presets, args.seeds,
                        args.seed_offset, args.workers, args.backend, args.ray_address))
        print(f"results in {out}/")
    elif args.suite == "forecast":
        from benchmarks import forecast as fc_suite
        res = fc_suite.run(args.cases, args.seed, include_fm=not args.no_fm)
        fc_suite.write(res, args.out)
        print(fc_suite.format_table(res))
        print(f"results in {args.out}/")
    elif args.suite == "policy-time":
        from benchmarks import policy_time
        res = policy_time.run(args.policies, args.preset, args.seeds, args.seed_offset)
        print(policy_time.format_table(res))
        _write_json(args.out, res)
    elif args.suite == "checkpoints":
        from benchmarks import checkpoints as ck_suite
        res = ck_suite.run(args.checkpoints, args.preset, args.seeds, args.seed_offset,
                           args.workers)
        print(ck_suite.format_table(res))
        _write_json(args.out, res)
    elif args.suite == "soak":
        from benchmarks import soak as soak_suite
        res = soak_suite.run(args.preset, args.env_steps, args.batched_steps, args.num_envs,
                             args.seed)
        soak_suite.write(res, args.out)
        print(soak_suite.format_table(res))
        print(f"results in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
