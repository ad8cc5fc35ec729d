"""``mara-bench`` / ``python -m benchmarks``: run a named suite and print its table.

Every argument is checked before anything runs or is written: a bad name, number or file
is a usage error (exit status 2) that lists what is valid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SUITE_HELP = {
    "demo": "the default suite into results/default (what `make demo` runs)",
    "default": "every baseline and MARA on CoRE-v0 and CoRE-Heavy-v0, seeds 0-9",
    "schedule": "every baseline and MARA on every preset, 50 seeds, with the clairvoyant "
                "bound",
    "baselines": "the baseline schedulers on four presets, 20 seeds (docs/baselines.md)",
    "ablation": "MARA's ablations from experiments/ (run from the repository's root), 50 "
                "seeds",
}


def _whole(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value
    return parse


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return value


def _preset(text: str) -> str:
    import core_env

    if text not in core_env.PRESETS:
        raise argparse.ArgumentTypeError(f"unknown preset {text!r}; expected one of "
                                         f"{', '.join(sorted(core_env.PRESETS))}")
    return text


def _policy(text: str) -> str:
    from mara_agents.policy import check_policy_spec

    try:
        return check_policy_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(prog="mara-bench", description=__doc__.split("\n\n")[0],
                                     formatter_class=fmt)
    sub = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, formatter_class=fmt)

    command("demo", SUITE_HELP["demo"])
    for name in ("default", "schedule", "baselines", "ablation"):
        sp = command(name, SUITE_HELP[name])
        sp.add_argument("--policies", nargs="+", type=_policy, default=None,
                        help="built-in names or package.module:Factory specs of your own "
                             "(default: the suite's)")
        sp.add_argument("--presets", nargs="+", type=_preset, default=None,
                        help="preset ids (default: the suite's)")
        sp.add_argument("--seeds", type=_whole(1), default=None,
                        help="number of seeds (default: the suite's)")
        sp.add_argument("--seed-offset", type=_whole(0), default=0, help="the first seed")
        sp.add_argument("--workers", type=_whole(1), default=2,
                        help="local processes (1: in this process)")
        sp.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="where episodes run")
        sp.add_argument("--ray-address", default=None,
                        help="ray.init(address=...) to join a cluster")
        sp.add_argument("--reference", type=_policy, default=None,
                        help="the policy the others are paired against (default: lara, "
                             "or the suite's)")
        sp.add_argument("--out", type=Path, default=None,
                        help="results folder (default: results/<suite>); rerun to resume")
    fc = command("forecast", "remaining-work forecast accuracy: FM vs WLS vs the naive "
                             "anchor vs the oracle")
    fc.add_argument("--cases", type=_whole(10), default=2000, help="cases per mix and prefix")
    fc.add_argument("--seed", type=_whole(0), default=12345, help="seed of the cases")
    fc.add_argument("--no-fm", action="store_true", help="skip the flow-matching forecaster")
    fc.add_argument("--fm-checkpoint", type=Path, action="append", default=[],
                    help="also evaluate this FM checkpoint (named fm:<file stem>; repeatable)")
    fc.add_argument("--out", type=Path, default=Path("results/forecast"),
                    help="results folder")
    speed = command("speed", "compiled kernels vs the numpy reference: env throughput")
    speed.add_argument("--preset", type=_preset, default="CoRE-v0", help="preset id")
    speed.add_argument("--runs", type=_whole(1), default=3, help="interleaved repetitions")
    speed.add_argument("--seconds", type=_positive, default=1.0,
                       help="timed seconds per measurement")
    speed.add_argument("--backends", nargs="+", choices=("numpy", "numba"),
                       default=["numpy", "numba"], help="backends (ratios: last / first)")
    speed.add_argument("--batch-sizes", nargs="+", type=_whole(1), default=[1, 64, 256],
                       help="batch sizes B on the preset")
    speed.add_argument("--sizes", nargs="+", type=_whole(2), default=[16, 64, 256, 1024],
                       help="cluster sizes N (K = N/2, load per node of CoRE-v0)")
    speed.add_argument("--no-first-call", action="store_true",
                       help="skip the fresh-process timings")
    speed.add_argument("--seed", type=_whole(0), default=0, help="seed")
    speed.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    pt = command("policy-time", "episode wall time per policy (inference cost)")
    pt.add_argument("--policies", nargs="+", type=_policy, default=["mara", "lara"],
                    help="policies to time (at least two); the last is the baseline")
    pt.add_argument("--preset", type=_preset, default="CoRE-v0", help="preset id")
    pt.add_argument("--seeds", type=_whole(1), default=5, help="number of seeds")
    pt.add_argument("--seed-offset", type=_whole(0), default=1000, help="the first seed")
    pt.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    ck = command("checkpoints", "MARA checkpoints (and LARA) on the same seeds")
    ck.add_argument("checkpoints", nargs="+", help="MARA checkpoint files (a.pt,b.pt: an "
                    "ensemble); the first is the reference of the paired differences")
    ck.add_argument("--preset", type=_preset, default="CoRE-v0", help="preset id")
    ck.add_argument("--seeds", type=_whole(2), default=48, help="number of seeds")
    ck.add_argument("--seed-offset", type=_whole(0), default=100, help="the first seed")
    ck.add_argument("--workers", type=_whole(1), default=2, help="local processes")
    ck.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    lv = command("live", "policies on real training jobs (live mode) beside the replayed "
                         "simulator: the sim-to-real gap")
    lv.add_argument("--preset", choices=("Live-Small-v0", "Live-v0"), default="Live-Small-v0",
                    help="live preset id")
    lv.add_argument("--policies", nargs="+", type=_policy, default=None,
                    help="policies (built-in names or package.module:Factory specs; default: "
                         "lara edf mara on Live-v0, lara edf successive_halving on "
                         "Live-Small-v0, whose layout the shipped MARA cannot run)")
    lv.add_argument("--seeds", type=_whole(1), default=10, help="number of seeds")
    lv.add_argument("--seed-offset", type=_whole(0), default=0, help="the first seed")
    lv.add_argument("--reference", type=_policy, default="lara",
                    help="the policy the others are paired against")
    lv.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="the runtime: worker processes here, or Ray actors")
    lv.add_argument("--ray-address", default=None,
                    help="with --backend ray: the cluster to join (default: a local Ray)")
    lv.add_argument("--slot-seconds", type=_positive, default=None,
                    help="the wall clock: each slot is this many seconds of training "
                         "(default: the work clock, one work unit per node and slot)")
    lv.add_argument("--out", type=Path, default=Path("results/live"),
                    help="results folder; rerun to resume")
    from benchmarks import marl
    from mara_agents.marl import ALGORITHMS

    ml = command("marl", "train MaskablePPO, MAPPO, IPPO and RLlib PPO for the same env-step "
                         "budget, then run them paired with LARA and MARA")
    ml.add_argument("--presets", nargs="+", type=_preset, default=list(marl.PRESETS),
                    help="presets to train and evaluate on")
    ml.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS),
                    help="the algorithms")
    ml.add_argument("--env-steps", type=_whole(1), default=marl.ENV_STEPS,
                    help="training budget of every algorithm (env steps)")
    ml.add_argument("--seeds", type=_whole(2), default=marl.SEEDS, help="evaluation seeds 0..n-1")
    ml.add_argument("--workers", type=_whole(1), default=2,
                    help="training runs and episodes at a time")
    ml.add_argument("--rllib-python", type=Path, default=marl.RLLIB_PYTHON,
                    help="the Python of RLlib's own environment (make .venv-rllib/.installed)")
    ml.add_argument("--out", type=Path, default=marl.MODELS_DIR.parent,
                    help="results folder (models in <out>/models); rerun to resume")
    soak = command("soak", "1M env steps + 100k batched steps: memory and errors")
    soak.add_argument("--preset", type=_preset, default="CoRE-v0", help="preset id")
    soak.add_argument("--env-steps", type=_whole(1), default=1_000_000,
                      help="PettingZoo env steps")
    soak.add_argument("--batched-steps", type=_whole(1), default=100_000,
                      help="batched steps")
    soak.add_argument("--num-envs", type=_whole(1), default=256, help="batch size B")
    soak.add_argument("--seed", type=_whole(0), default=0, help="seed")
    soak.add_argument("--out", type=Path, default=Path("results/soak"), help="results folder")
    return parser


def _write_json(out: Path | None, res: object) -> None:
    """Write a suite's result as JSON to ``out`` (``--out``), if one was given."""
    if out is not None:
        from benchmarks.store import write_atomic

        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, json.dumps(res, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        _check(args)
        return _run(args)
    except ValueError as e:  # bad input found while starting (a name, a file): no traceback
        parser.exit(2, f"mara-bench {args.suite}: error: {e}\n")


def _check(args: argparse.Namespace) -> None:
    """The checks argparse cannot do alone (raise ``ValueError``)."""
    if args.suite in SUITE_HELP and args.suite != "demo":
        from benchmarks.suites import check_suite_args

        check_suite_args(args.suite, args.policies, args.presets, args.seeds,
                         args.seed_offset, args.workers, args.backend, args.reference)
    elif args.suite == "policy-time" and len(args.policies) < 2:
        raise ValueError(f"--policies: expected at least two (the last is the baseline), got "
                         f"{args.policies}")
    elif args.suite == "checkpoints":
        from mara_agents.mat.checkpoint import load_checkpoint

        for name in args.checkpoints:  # a clear error here, not in a worker
            for member in name.split(","):
                load_checkpoint(member)


def _run(args: argparse.Namespace) -> int:
    """Run the parsed subcommand."""
    res: Any
    if args.suite == "demo":
        from benchmarks import demo
        print(demo.main())
    elif args.suite in SUITE_HELP:
        from benchmarks.suites import run_suite
        out = args.out or Path("results") / args.suite
        print(run_suite(args.suite, out, args.policies, args.presets, args.seeds,
                        args.seed_offset, args.workers, args.backend, args.ray_address,
                        reference=args.reference))
        print(f"results in {out}/")
    elif args.suite == "live":
        from benchmarks import live
        rows = live.run(args.preset, args.policies or live.DEFAULT_POLICIES[args.preset],
                        range(args.seed_offset, args.seed_offset + args.seeds), args.out,
                        backend=args.backend, ray_address=args.ray_address,
                        slot_seconds=args.slot_seconds)
        print(live.write(rows, args.out, args.reference))
        print(f"results in {args.out}/")
    elif args.suite == "forecast":
        from benchmarks import forecast as fc_suite
        res = fc_suite.run(args.cases, args.seed, include_fm=not args.no_fm,
                           fm_checkpoints=args.fm_checkpoint)
        fc_suite.write(res, args.out)
        print(fc_suite.format_table(res))
        print(f"results in {args.out}/")
    elif args.suite == "speed":
        from benchmarks import speed as sp
        res = sp.run(args.preset, args.runs, args.seconds, tuple(args.backends),
                     tuple(args.batch_sizes), tuple(args.sizes), seed=args.seed,
                     first=not args.no_first_call, progress=True)
        print(sp.format_table(res))
        _write_json(args.out, res)
    elif args.suite == "policy-time":
        from benchmarks import policy_time
        res = policy_time.run(args.policies, args.preset, args.seeds, args.seed_offset,
                              progress=True)
        print(policy_time.format_table(res))
        _write_json(args.out, res)
    elif args.suite == "checkpoints":
        from benchmarks import checkpoints as ck_suite
        res = ck_suite.run(args.checkpoints, args.preset, args.seeds, args.seed_offset,
                           args.workers, progress=True)
        print(ck_suite.format_table(res))
        _write_json(args.out, res)
    elif args.suite == "marl":
        from benchmarks import marl
        print(marl.run(args.out, args.presets, args.algorithms, args.env_steps,
                       args.seeds, args.workers, args.rllib_python))
        print(f"results in {args.out}/ (training.md, curve_<algorithm>.png)")
    elif args.suite == "soak":
        from benchmarks import soak as soak_suite
        res = soak_suite.run(args.preset, args.env_steps, args.batched_steps, args.num_envs,
                             args.seed, progress=True)
        soak_suite.write(res, args.out)
        print(soak_suite.format_table(res))
        print(f"results in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
