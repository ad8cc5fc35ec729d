"""Overall and per-tenant completion of one policy (a built-in name or a MARA checkpoint file)
on a preset and a range of seeds, pooled: how MARA-fair's variants were compared on the
selection seeds (docs/experiments.md, "Issue 61, part 2").

    python experiments/scripts/fair_selection.py runs/fair-0.8/last.pt CoRE-Tenants-v0 100 112
    python experiments/scripts/fair_selection.py mara CoRE-Tenants-v0 100 112
"""

from __future__ import annotations

import sys

import numpy as np

import core_env
from core_env.audit import by_group, pool
from mara_agents.policy import POLICY_NAMES, make_policy, run_episode


def main(policy: str, preset: str, first: int, end: int) -> None:
    episodes = []
    for seed in range(first, end):
        base = core_env.parallel_env(preset=preset)
        env, pol = (make_policy(policy, base) if policy in POLICY_NAMES
                    else make_policy("mara", base, checkpoint=policy))
        episodes.append(run_episode(env, pol, seed=seed))
    rates = by_group(pool(e["groups"] for e in episodes))["tenant"]
    overall = float(np.mean([e["completion_rate"] for e in episodes]))
    print(f"{policy} on {preset}, seeds {first}-{end - 1}: overall {overall:.3f}, "
          + ", ".join(f"{k} {v:.3f}" for k, v in rates.items())
          + f", worst / overall {min(rates.values()) / overall:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
