"""Tune the stickiness of LARA and the peer schedulers on the selection seeds.

    python -m experiments.scripts.tune_stickiness [--presets CoRE-Switch-v0 ...]
        [--policies lara las ...] [--thresholds 0 0.5 1 2 4 8] [--out results/tune_stickiness]
        [--seeds 48] [--workers 2]

For each preset and policy, runs the policy (at its tuned defaults) with every stickiness
threshold on seeds 100-147 (never the reported seeds), paired, through the benchmark store
(resumable: ``<out>/<preset>/<policy>`` is a results folder), and prints the completion rate
per threshold with the paired difference to stickiness 0 and the mean restores per episode;
the best threshold is the one with the highest mean completion rate (ties: the smallest).
The same approach as ``tune_peers`` (docs/baselines.md, "Stickiness").

Each configuration is a policy spec of this module, ``<policy>__stickiness_<value>`` (dots
spelled ``_``), e.g. ``experiments.scripts.tune_stickiness:las__stickiness_2_0``, so
``mara-bench baselines --policies`` runs any of them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mara_agents.policy import PEERS, make_policy

MODULE = "experiments.scripts.tune_stickiness"
"""This module's import name (also when it runs as ``__main__``)."""
SEED_OFFSET = 100
POLICIES = ("lara", *PEERS)
PRESETS = ("CoRE-Switch-v0", "CoRE-Cluster-v0")
THRESHOLDS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
_SEP = "__stickiness_"


def spec(policy: str, threshold: float) -> str:
    """The policy spec of ``policy`` with stickiness ``threshold``."""
    return f"{MODULE}:{policy}{_SEP}{str(float(threshold)).replace('.', '_')}"


def __getattr__(name: str) -> Any:
    """``<policy>__stickiness_<value>``: a factory of that policy with that stickiness."""
    policy, sep, word = name.partition(_SEP)
    if not sep or policy not in POLICIES:
        raise AttributeError(name)
    try:
        value = float(word.replace("_", "."))
    except ValueError:
        raise AttributeError(name) from None

    def factory(env: Any, **more: Any) -> Any:
        return make_policy(policy, env, stickiness=value, **more)

    factory.__doc__ = f"{policy} with stickiness {value}."
    return factory


def tune(preset: str, policy: str, thresholds: list[float], out: Path, seeds: int,
         workers: int) -> list[dict[str, Any]]:
    """Run one policy's thresholds on one preset; returns one row per threshold."""
    from benchmarks.suites import run_suite

    specs = [spec(policy, t) for t in thresholds]
    run_suite("baselines", out, policies=specs, presets=[preset], seeds=seeds,
              seed_offset=SEED_OFFSET, workers=workers, progress=False, reference=specs[0])
    result = json.loads((out / "results.json").read_text())
    rows = []
    for t, s in zip(thresholds, specs, strict=False):
        row = next(r for r in result["summary"] if r["policy"] == s)
        eps = [e for e in result["episodes"] if e["policy"] == s]
        rows.append({"threshold": t, "completion": row["completion_rate"],
                     "diff": row.get("diff_vs_ref", 0.0),
                     "lo": row.get("diff_ci_low", 0.0), "hi": row.get("diff_ci_high", 0.0),
                     "restores": sum(e["restores"] for e in eps) / max(len(eps), 1)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS))
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    ap.add_argument("--thresholds", nargs="+", type=float, default=list(THRESHOLDS))
    ap.add_argument("--out", type=Path, default=Path("results/tune_stickiness"))
    ap.add_argument("--seeds", type=int, default=48)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    thresholds = sorted(set(args.thresholds) | {0.0})  # 0 is the paired reference
    best = {}
    for preset in args.presets:
        for policy in args.policies:
            rows = tune(preset, policy, thresholds, args.out / preset / policy, args.seeds,
                        args.workers)
            top = max(rows, key=lambda r: (r["completion"], -r["threshold"]))
            best[preset, policy] = top["threshold"]
            print(f"\n{policy} on {preset}, seeds {SEED_OFFSET}-{SEED_OFFSET + args.seeds - 1}"
                  f": best stickiness {top['threshold']:g}")
            print("| stickiness | completion | vs 0, paired (95% CI) | restores / episode |\n"
                  "|---|---|---|---|")
            for r in rows:
                print(f"| {r['threshold']:g} | {100 * r['completion']:.1f}% | "
                      f"{100 * r['diff']:+.1f} ({100 * r['lo']:+.1f}, {100 * r['hi']:+.1f}) | "
                      f"{r['restores']:.1f} |")
    print("\n| preset | " + " | ".join(args.policies) + " |\n|---|"
          + "---|" * len(args.policies))
    for preset in args.presets:
        print(f"| {preset} | " + " | ".join(f"{best[preset, p]:g}" for p in args.policies)
              + " |")


if __name__ == "__main__":
    main()
