"""Completion rate of the baselines over seeds and presets (the table in docs/baselines.md).

    python -m mara_agents.baselines.evaluate          # every policy, 4 presets, seeds 0..19
    python -m mara_agents.baselines.evaluate --policies lara edf --presets CoRE-v0 --seeds 5
    python -m mara_agents.baselines.evaluate --lara explore_obs=4 safety=1.2 --policies lara

Every (policy, preset, seed) episode is independent; they run on ``--workers`` processes.
The result is printed as a Markdown table (mean completion rate +- standard error over the
seeds, mean utilization) and, with ``--out``, written as JSON with every episode's
statistics, the seeds and the LARA parameters.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import numpy as np

from core_env.processes import worker_pool

DEFAULT_PRESETS = ("CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0")


FORECAST_POLICIES = ("least_laxity", "shortest_predicted", "lara", "oracle_greedy")


def run_one(job: tuple[str, str, int, dict[str, Any]]) -> dict[str, Any]:
    """One episode: ``(policy name, preset, seed, policy kwargs)`` -> its statistics.

    The kwargs go to :func:`~mara_agents.policy.make_policy`, except ``forecaster``:
    ``"oracle"`` wraps the env with ``OracleForecaster.for_env`` (a diagnostic: the rule
    with perfect remaining-work forecasts).
    """
    import core_env
    from core_env.forecast import OracleForecaster
    from mara_agents.policy import make_policy, run_episode

    name, preset, seed, kwargs = job
    kwargs = dict(kwargs)
    base = core_env.parallel_env(preset=preset)
    if kwargs.pop("forecaster", None) == "oracle":
        kwargs["forecaster"] = OracleForecaster.for_env(base)
    env, policy = make_policy(name, base, **kwargs)
    stats = run_episode(env, policy, seed=seed)
    return {"policy": name, "preset": preset, "seed": seed, **stats}


def evaluate(policies: list[str], presets: list[str], seeds: list[int],
             lara: dict[str, Any] | None = None, workers: int = 2,
             oracle_forecasts: bool = False) -> list[dict[str, Any]]:
    """Run every (policy, preset, seed) episode; returns one statistics dict per episode.

    Args:
        policies: names of :data:`mara_agents.policy.POLICY_NAMES`.
        presets: environment preset ids.
        seeds: episode seeds (the same seeds for every policy: paired comparisons).
        lara: :class:`~mara_agents.baselines.LARAParams` overrides for ``lara``.
        workers: processes (1 = run here).
        oracle_forecasts: give the forecast-reading policies true remaining work.
    """
    def kwargs(p: str) -> dict[str, Any]:
        kw: dict[str, Any] = dict(lara or {}) if p == "lara" else {}
        if oracle_forecasts and p in FORECAST_POLICIES and p != "oracle_greedy":
            kw["forecaster"] = "oracle"
        return kw

    jobs = [(p, pr, s, kwargs(p)) for pr in presets for p in policies for s in seeds]
    if workers <= 1:
        return [run_one(j) for j in jobs]
    with worker_pool(workers) as pool:
        return list(pool.map(run_one, jobs, chunksize=4))


def summarise(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, float]]:
    """(policy, preset) -> mean and standard error of the completion rate, mean utilization."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    keys = sorted({(r["policy"], r["preset"]) for r in rows})
    for key in keys:
        rate = np.array([r["completion_rate"] for r in rows if (r["policy"], r["preset"]) == key])
        util = np.array([r["utilization"] for r in rows if (r["policy"], r["preset"]) == key])
        se = float(rate.std(ddof=1) / math.sqrt(rate.size)) if rate.size > 1 else 0.0
        out[key] = {"mean": float(rate.mean()), "se": se, "utilization": float(util.mean()),
                    "episodes": int(rate.size)}
    return out


def markdown(summary: dict[tuple[str, str], dict[str, float]], policies: list[str],
             presets: list[str]) -> str:
    """Markdown table: policies as rows, presets as columns, ``mean ± se (util)``."""
    head = "| policy | " + " | ".join(f"`{p}`" for p in presets) + " |"
    lines = [head, "|---|" + "---|" * len(presets)]
    for pol in policies:
        cells = []
        for pre in presets:
            s = summary.get((pol, pre))
            cells.append("-" if s is None else f"{100 * s['mean']:.1f} ± {100 * s['se']:.1f} "
                                               f"({100 * s['utilization']:.0f})")
        lines.append(f"| `{pol}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paired(rows: list[dict[str, Any]], policy: str, other: str, preset: str
           ) -> tuple[float, float] | None:
    """Mean and standard error of ``policy - other`` completion rates, paired by seed."""
    a = {r["seed"]: r["completion_rate"] for r in rows
         if r["policy"] == policy and r["preset"] == preset}
    b = {r["seed"]: r["completion_rate"] for r in rows
         if r["policy"] == other and r["preset"] == preset}
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return None
    d = np.array([a[s] - b[s] for s in seeds])
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))


def paired_markdown(rows: list[dict[str, Any]], policy: str, policies: list[str],
                    presets: list[str]) -> str:
    """Markdown table of ``policy - other`` (points, paired by seed) for every other policy."""
    lines = [f"| `{policy}` minus | " + " | ".join(f"`{p}`" for p in presets) + " |",
             "|---|" + "---|" * len(presets)]
    for other in policies:
        if other == policy:
            continue
        cells = []
        for pre in presets:
            d = paired(rows, policy, other, pre)
            cells.append("-" if d is None else f"{100 * d[0]:+.1f} ± {100 * d[1]:.1f}")
        lines.append(f"| `{other}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def main(argv: list[str] | None = None) -> None:
    from mara_agents.policy import POLICY_NAMES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policies", nargs="+", default=list(POLICY_NAMES), choices=POLICY_NAMES)
    ap.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS))
    ap.add_argument("--seeds", type=int, default=20, help="seeds 0 .. SEEDS - 1")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--lara", nargs="*", default=[], metavar="KEY=VALUE",
                    help="LARAParams overrides, e.g. explore_obs=4 column=fc_q90")
    ap.add_argument("--oracle-forecasts", action="store_true",
                    help="diagnostic: least_laxity, shortest_predicted and lara read true "
                         "remaining work (OracleForecaster) instead of WLS forecasts")
    ap.add_argument("--out", default=None, help="write the per-episode results as JSON here")
    args = ap.parse_args(argv)
    lara = {}
    for item in args.lara:
        if "=" not in item:
            ap.error(f"--lara: expected KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        lara[key] = _parse_value(value)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    t0 = time.time()
    rows = evaluate(args.policies, args.presets, seeds, lara, args.workers,
                    args.oracle_forecasts)
    summary = summarise(rows)
    print(markdown(summary, args.policies, args.presets))
    print(f"\ncompletion rate % (mean ± standard error over seeds {seeds[0]}..{seeds[-1]}), "
          f"mean utilization % in brackets; {len(rows)} episodes in {time.time() - t0:.0f} s")
    if "lara" in args.policies and len(args.policies) > 1:
        print("\n" + paired_markdown(rows, "lara", args.policies, args.presets))
        print("\npoints of completion rate, mean ± standard error of the per-seed difference")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"seeds": seeds, "lara": lara,
                       "oracle_forecasts": args.oracle_forecasts, "episodes": rows,
                       "summary": [{"policy": k[0], "preset": k[1], **v}
                                   for k, v in summary.items()]}, fh, indent=1)


if __name__ == "__main__":
    main()
