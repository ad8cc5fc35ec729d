"""Policies scheduling never-piloted jobs submitted to a live session (issue 60).

Per seed, a stream of ``mlp-digits`` jobs whose variants are not in the shipped pilot set
(hidden width 32 or 96, learning rate 1.25e-4 or 2.5e-4, scaled by sqrt(k) or k) arrives
over 30 slots (Poisson, 0.8 a slot), each with a target loss (log-uniform in [0.35, 1.0]),
a deadline (10-40 slots) and a node cap (1, 2, 4 or 8), all drawn from the seed; every
policy gets the same submissions at the same slots, on an 8-node layout (the shipped
MARA's smallest) of local workers, two training at once, on the work clock (deterministic
losses on one machine). Prints one row per policy and seed and the paired mean difference
from LARA::

    python experiments/scripts/session_demo.py OUT.json [seeds] [policies ...]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

LAYOUT = {"preset": "Live-Small-v0", "n_nodes": 8, "max_visible_tasks": 16}


def submissions(seed: int) -> list[tuple[int, object]]:
    """``(slot, Submission)`` of one seed's stream."""
    from core_env.live import JobSpec, Submission

    rng = np.random.default_rng(seed)
    out = []
    for slot in range(30):
        for _ in range(rng.poisson(0.8)):
            variant = {"hidden": int(rng.choice([32, 96])),
                       "lr": float(rng.choice([1.25e-4, 2.5e-4])),
                       "lr_scaling": str(rng.choice(["sqrt", "linear"])),
                       "batch": 32, "unit_samples": 8192}
            target = float(np.exp(rng.uniform(np.log(0.35), np.log(1.0))))
            out.append((slot, Submission(
                JobSpec("mlp-digits", variant, int(rng.integers(0, 4))), round(target, 3),
                int(rng.integers(10, 41)), max_nodes=int(rng.choice([1, 2, 4, 8])),
                name=f"job-{len(out)}")))
    return out


def run(policy_name: str, seed: int) -> dict:
    from core_env.live import LiveSession, LiveSessionEnv, make_runtime
    from mara_agents import make_policy

    stream = submissions(seed)
    runtime = make_runtime("local", LAYOUT["n_nodes"], 120.0, max_running=2)
    try:
        env, policy = make_policy(policy_name, LiveSessionEnv(**LAYOUT, runtime=runtime))
        t0 = time.perf_counter()
        with LiveSession(env, policy, seed=seed) as session:
            todo = list(stream)
            while not session.finished:  # every slot steps, so all policies get the
                t = int(session.base.sim.t[0])  # same submissions at the same slots
                while todo and todo[0][0] <= t:
                    session.submit(todo.pop(0)[1])
                if not todo and not session.base.closed:
                    session.close_submissions()
                session.step()
            report = session.report()
    finally:
        runtime.close()
    return {"policy": policy_name, "seed": seed, "submitted": report["submitted"],
            "completed": report["completed"], "expired": report["expired"],
            "failed": report["failed"], "rate": report["completion_rate"],
            "slots": report["slots"], "wall_s": time.perf_counter() - t0,
            "overhead": report["timing"]["overhead_fraction"],
            "alpha_sources": sorted({j["alpha_source"] for j in report["jobs"]})}


def main(argv: list[str]) -> None:
    from scipy import stats

    out = argv[0]
    seeds = range(int(argv[1]) if len(argv) > 1 else 3)
    policies = argv[2:] or ["lara", "edf", "successive_halving", "mara"]
    rows = []
    for seed in seeds:
        for name in policies:
            rows.append(run(name, seed))
            print(json.dumps(rows[-1]), flush=True)
            with open(out, "w") as f:
                json.dump(rows, f, indent=1)
    rate = {(r["policy"], r["seed"]): r["rate"] for r in rows}
    for name in policies:
        mine = [100 * rate[name, s] for s in seeds]
        line = f"{name}: mean {np.mean(mine):.1f}%"
        if name != "lara" and len(seeds) > 1:
            d = np.array(mine) - [100 * rate["lara", s] for s in seeds]
            ci = stats.t.interval(0.95, len(d) - 1, d.mean(), stats.sem(d)) \
                if d.std() > 0 else (d.mean(), d.mean())
            line += f", vs LARA {d.mean():+.1f} ({ci[0]:+.1f}, {ci[1]:+.1f})"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
