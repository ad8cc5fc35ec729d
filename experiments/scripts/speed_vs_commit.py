"""Env throughput of this checkout against an earlier commit, interleaved on one machine.

    python -m experiments.scripts.speed_vs_commit --base 537544f --runs 5

Checks ``--base`` out into a temporary git worktree and, in alternating fresh processes
(base, this checkout, base, ...), times the PettingZoo env on CoRE-v0 and the batched
simulator (B = 256, ``copy=False``) with a random legal policy through the public API only,
so that the same code measures both. Prints the medians and their ratios (docs/experiments.md,
"Simulator speed"). With ``--ppo-steps S`` it also times ``examples/sb3_maskable_ppo.py``'s
MaskablePPO training for S steps on CoRE-v0's centralised view, once in each checkout
(needs the ``sb3`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MEASURE = """
import json, sys, time
import numpy as np
import core_env
seconds = float(sys.argv[1])

def legal(rng, mask):
    return (rng.random(mask.shape, dtype=np.float32) * mask).argmax(axis=-1)

env = core_env.parallel_env(preset="CoRE-v0")
rng = np.random.default_rng(0)
obs, _ = env.reset(seed=0)
agents, el, steps = env.possible_agents, 0.0, -1
while el < seconds:
    if not env.agents:
        t0 = time.perf_counter(); obs, _ = env.reset(); el += time.perf_counter() - t0
    a = legal(rng, np.stack([obs[x]["action_mask"] for x in agents]))
    act = {x: int(v) for x, v in zip(agents, a)}
    t0 = time.perf_counter(); obs, *_ = env.step(act)
    if steps >= 0:
        el += time.perf_counter() - t0
    steps += 1
pz = steps / el
b = core_env.make_batched("CoRE-v0", num_envs=256, seed=0, copy=False)
obs, mask = b.reset()
el, steps = 0.0, -1
while el < seconds:
    a = legal(rng, mask)
    t0 = time.perf_counter(); obs, mask, *_ = b.step(a)
    if steps >= 0:
        el += time.perf_counter() - t0
    steps += 1
print(json.dumps({"pettingzoo_steps_per_s": pz, "batched256_env_steps_per_s": steps * 256 / el}))
"""


PPO = """
import json, sys, time
from examples.sb3_maskable_ppo import train
t0 = time.perf_counter()
train(timesteps=int(sys.argv[1]), seed=0, env_id="core_env:core_env/CoRE-v0")
print(json.dumps({"ppo_seconds": time.perf_counter() - t0}))
"""


def measure(cwd: Path, seconds: float, script: str = MEASURE) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", script, str(seconds)], cwd=cwd, check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit to compare with")
    ap.add_argument("--runs", type=int, default=5, help="alternating runs of each")
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per measure")
    ap.add_argument("--ppo-steps", type=int, default=0, help="also time MaskablePPO training")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=ROOT,
                       check=True, capture_output=True)
        try:
            runs: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
            for _ in range(args.runs):
                runs["base"].append(measure(base, args.seconds))
                runs["head"].append(measure(ROOT, args.seconds))
            if args.ppo_steps:
                for name, where in (("base", base), ("head", ROOT)):
                    ppo = measure(where, args.ppo_steps, PPO)["ppo_seconds"]
                    print(f"MaskablePPO {args.ppo_steps:,} steps on CoRE-v0, {name}: "
                          f"{ppo:.0f} s", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT,
                           check=True)
    for key in runs["base"][0]:
        b = statistics.median(r[key] for r in runs["base"])
        h = statistics.median(r[key] for r in runs["head"])
        print(f"{key}: base {b:,.0f}, this checkout {h:,.0f}, ratio {h / b:.1f}x "
              f"(runs: base {[round(r[key]) for r in runs['base']]}, "
              f"head {[round(r[key]) for r in runs['head']]})")


if __name__ == "__main__":
    main()
