"""Runtime overhead of live mode's local backend with and without its dispatch cap.

Alternates, per seed, episodes of one policy on a live preset with ``LocalRuntime``'s
default (every node's job sent at once) and with at most as many jobs at once as CPUs, the
longest expected first (``max_running = cpu_count()``), and
prints each episode's overhead fraction (1 - training makespan / slot wall time), its
wall time (and the slots' part of it, the driver's CPU time: env, runtime and policy,
and the workers' seconds saving and restoring states) and its completion, then the
medians. The two modes give the same losses (work
units, seeded), so their completions must agree.

    python -m experiments.scripts.live_dispatch --preset Live-v0 --policy lara --seeds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

from core_env.live import LiveSchedulerEnv, LocalRuntime, live_config
from core_env.utils.system import cpu_count


def episode(preset: str, policy_name: str, seed: int, runtime: LocalRuntime) -> dict:
    from mara_agents.policy import make_policy, run_episode

    live_env = LiveSchedulerEnv(preset=preset, runtime=runtime)
    env, policy = make_policy(policy_name, live_env)
    t0, c0 = time.perf_counter(), time.process_time()
    stats = run_episode(env, policy, seed)
    timing = live_env.episode_timing()
    return {"overhead": timing["overhead_fraction"], "seconds": time.perf_counter() - t0,
            "completion": stats["completion_rate"], "slot": timing["slot"],
            "driver_cpu": time.process_time() - c0,
            "serialise": timing["save"] + timing["restore"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="Live-v0")
    ap.add_argument("--policy", default="lara")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    n = live_config(args.preset).cluster.n_nodes
    rows: dict[str, list[dict]] = {"capped": [], "all at once": []}
    with (LocalRuntime(n, 120.0, max_running=cpu_count()) as capped,
          LocalRuntime(n, 120.0) as flat):
        for seed in range(args.seeds):
            for mode, rt in (("capped", capped), ("all at once", flat)):
                r = episode(args.preset, args.policy, seed, rt)
                rows[mode].append(r)
                print(f"seed {seed} {mode:12s} overhead {r['overhead']:.1%} "
                      f"{r['seconds']:.1f} s (slots {r['slot']:.1f} s, driver CPU "
                      f"{r['driver_cpu']:.1f} s, save + restore {r['serialise']:.1f} s) "
                      f"completion {r['completion']:.3f}", flush=True)
    for mode, rs in rows.items():
        print(f"{mode:12s} median overhead "
              f"{statistics.median(r['overhead'] for r in rs):.1%}, median episode "
              f"{statistics.median(r['seconds'] for r in rs):.1f} s")


if __name__ == "__main__":
    main()
