"""``python -m mara_agents.marl train ALGORITHM --preset P --env-steps S --seed K --out F``:
train one MARL baseline and write its model file (what ``mara-bench marl`` runs for each
missing model)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mara_agents.marl import ALGORITHMS, PORTABLE_TORCH, train


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mara_agents.marl",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train one algorithm and write its model file")
    tr.add_argument("algorithm", choices=ALGORITHMS)
    tr.add_argument("--preset", default="CoRE-v0", help="preset id")
    tr.add_argument("--env-steps", type=int, required=True, help="env steps (slots) to train")
    tr.add_argument("--seed", type=int, default=0, help="training seed")
    tr.add_argument("--out", type=Path, required=True, help="the model file to write")
    tr.add_argument("--threads", type=int, default=1, help="torch threads")
    tr.add_argument("--native", action="store_true",
                    help="use the CPU's own SIMD kernels (faster; the weights then differ "
                         "between machines) instead of the portable settings")
    args = parser.parse_args(argv)
    portable = all(os.environ.get(k) == v for k, v in PORTABLE_TORCH.items())
    if not args.native and not portable and "torch" not in sys.modules:
        # start again with the portable settings (they act only before torch loads)
        os.execve(sys.executable, [sys.executable, "-m", "mara_agents.marl",
                                   *(sys.argv[1:] if argv is None else argv)],
                  {**os.environ, **PORTABLE_TORCH})
    try:
        train(args.algorithm, args.preset, args.env_steps, args.seed, args.out, args.threads)
    except ValueError as e:
        parser.exit(2, f"python -m mara_agents.marl train: error: {e}\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
