"""MARA, LARA and successive halving on CoRE-v0 at scalar restore costs, paired with LARA
(issue 59; docs/experiments.md, 2026-12-06).

    python experiments/scripts/cost_sweep.py FIRST_SEED END_SEED [MARA_CHECKPOINT]

With a checkpoint, a fourth policy ``v2`` runs MARA on it."""
from __future__ import annotations

import sys

import numpy as np
from scipy import stats

import core_env
from mara_agents.policy import make_policy, run_episode


def main(argv: list[str]) -> None:
    if len(argv) not in (3, 4):
        raise SystemExit(__doc__)
    seeds = range(int(argv[1]), int(argv[2]))
    ckpt = argv[3] if len(argv) > 3 else None
    for c in (0.0, 0.1, 0.3):
        res = {}
        for name in ("lara", "successive_halving", "mara") + (("v2",) if ckpt else ()):
            kw = {"checkpoint": ckpt} if name == "v2" else {}
            env, pol = make_policy("mara" if name == "v2" else name,
                                   core_env.parallel_env(preset="CoRE-v0", switch_cost=c), **kw)
            res[name] = [run_episode(env, pol, seed=s) for s in seeds]
        lara = np.array([r["completion_rate"] for r in res["lara"]])
        for name, rs in res.items():
            rate = np.array([r["completion_rate"] for r in rs])
            d = 100 * (rate - lara)
            lo, hi = (stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
                      if d.std() > 0 else (0.0, 0.0))
            restores = np.mean([r["restores"] for r in rs])
            switches = np.mean([r["switches"] for r in rs])
            print(f"c={c} {name:20s} {100 * rate.mean():5.1f}%  vs LARA {d.mean():+5.1f} "
                  f"({lo:+.1f}, {hi:+.1f})  restores {restores:7.1f}  switches {switches:7.1f}",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv)
