"""Training throughput with sequential decoding against simultaneous (issue 70's target: at
least 0.8x): env steps per second of the same algorithm on the same batched envs, one torch
thread, the default settings but ``decoding``.

    OMP_NUM_THREADS=1 python experiments/scripts/sequential_throughput.py \\
        [--algorithms maskable_ppo mappo] [--preset CoRE-Small-v0] [--steps 65536] [--repeats 3]

Each run is a whole ``train(...)`` call; runs of the two decodings alternate (a load change
on the machine hits both) and the ratio of the medians is printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch


def one(algorithm: str, preset: str, steps: int, decoding: str, out: Path) -> float:
    """Env steps per second of one training run."""
    from mara_agents.marl import sb3, torchrl_ppo

    start = time.perf_counter()
    if algorithm == "maskable_ppo":
        sb3.train(preset, steps, 0, out, sb3.MaskablePPOConfig(decoding=decoding))
    else:
        torchrl_ppo.train(algorithm, preset, steps, 0, out,
                          torchrl_ppo.TorchRLPPOConfig(decoding=decoding))
    return steps / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algorithms", nargs="+", default=["maskable_ppo", "mappo"])
    ap.add_argument("--preset", default="CoRE-Small-v0")
    ap.add_argument("--steps", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        for algo in args.algorithms:
            rates: dict[str, list[float]] = {"simultaneous": [], "sequential": []}
            for _ in range(args.repeats):
                for decoding in rates:
                    rates[decoding].append(one(algo, args.preset, args.steps, decoding,
                                               Path(tmp) / f"{algo}.pt"))
            med = {k: statistics.median(v) for k, v in rates.items()}
            print(f"{algo} on {args.preset}: simultaneous {med['simultaneous']:,.0f}, "
                  f"sequential {med['sequential']:,.0f} env steps/s, ratio "
                  f"{med['sequential'] / med['simultaneous']:.2f} (medians of {args.repeats})",
                  flush=True)


if __name__ == "__main__":
    main()
