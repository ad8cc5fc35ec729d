"""The batched simulator's env steps per second in two source trees (project issue 62: "the
batched simulator at B=256 at least 2x the current make_batched"), measured in alternating
subprocesses so that a change in the machine's load hits both.

    git worktree add /tmp/base 7628988          # the tree before issue 62's speed-up
    OMP_NUM_THREADS=1 python experiments/scripts/batched_speedup.py /tmp/base . \\
        [--preset CoRE-v0] [--num-envs 256] [--steps 1500] [--runs 9] \\
        [--observations full blocks]

Each run builds ``make_batched(preset, num_envs, seed=0, copy=False)`` in a fresh process of
the tree, takes 30 warm-up steps, then times ``step`` only (auto-resets, and so workload
generation, included) over ``--steps`` steps of uniformly random legal actions (seeded).
Printed: every run's env steps per second, the medians and their ratio (new / old).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import core_env
preset, num_envs, mode, steps = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
env = core_env.make_batched(preset, num_envs, seed=0, copy=False, observations=mode)
rng = np.random.default_rng(0)

def act(mask):  # uniform over each node's legal actions
    return (rng.random(mask.shape, dtype=np.float32) * mask).argmax(axis=-1)

_, mask = env.reset()
for _ in range(30):
    _, mask, *_ = env.step(act(mask))
elapsed = 0.0
for _ in range(steps):
    a = act(mask)
    t0 = time.perf_counter()
    _, mask, *_ = env.step(a)
    elapsed += time.perf_counter() - t0
print(json.dumps({"rate": steps * num_envs / elapsed, "file": core_env.__file__}))
"""


def rate(tree: Path, preset: str, num_envs: int, mode: str, steps: int) -> float:
    """One run's env steps per second in ``tree`` (checked to be the tree imported)."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree), preset, str(num_envs), mode,
                          str(steps)], capture_output=True, text=True, check=True, cwd="/")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(got["file"]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"imported {got['file']}, not from {tree}")
    return got["rate"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="source tree of the baseline")
    parser.add_argument("new", type=Path, help="source tree to compare")
    parser.add_argument("--preset", default="CoRE-v0")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--observations", nargs="+", default=["blocks", "full"],
                        choices=["blocks", "full"])
    args = parser.parse_args(argv)
    for mode in args.observations:
        runs: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(args.runs):
            for name in runs:
                runs[name].append(rate(getattr(args, name), args.preset, args.num_envs, mode,
                                       args.steps))
        med = {k: statistics.median(v) for k, v in runs.items()}
        print(f"{args.preset}, B={args.num_envs}, observations={mode!r}: old "
              f"{med['old']:,.0f}, new {med['new']:,.0f} env steps/s (medians of {args.runs}; "
              f"runs old {[round(x) for x in runs['old']]}, new "
              f"{[round(x) for x in runs['new']]}): {med['new'] / med['old']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
