"""Golden episodes: fingerprints of workloads and episodes that must be the same on every
machine (docs/reliability.md, "Portable results").

For a fixed set of cases (every preset, heterogeneous node speeds, a switching cost) and
seeds, :func:`compute` records

* the sha256 of each episode's workload (every array: arrivals, deadlines, caps, alpha,
  families, targets, the true and the observed log-loss tables, node speeds);
* for each of the policies random_sequential, EDF, LARA and oracle greedy, the episode's statistics
  (``info["episode"]``, floats exact) and the sha256 of its trajectory (node 0's observation
  and every node's action at every step, and every reward), and the same for the peer
  schedulers (LAS, successive halving, Optimus, SLAQ, LaiRA) on CoRE-v0 and CoRE-Small-v0;
* for the batched simulator at batch sizes 1, 7 and 64, each environment's first episode
  under random legal actions drawn from that environment's own generator (statistics and
  trajectory hash), which must not depend on the batch size, and the workloads of
  :func:`core_env.workload.generate_workloads` for those batches, which must equal the
  one-by-one :func:`core_env.workload.generate_workload`.

``tests/reliability/golden_fingerprints.json`` holds the expected values (and, for information,
the machine that wrote them); the tests compare
a fresh computation with it in this process and in subprocesses with numpy's SIMD dispatch
turned down (``NPY_DISABLE_CPU_FEATURES``). When a change of numbers is deliberate, rewrite
the file and review the diff::

    python -m tests.reliability.golden --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

import core_env
from core_env.presets import make_config
from core_env.workload import Workload, generate_workload, generate_workloads

FILE = Path(__file__).with_name("golden_fingerprints.json")
"""The checked-in fingerprints."""

FORMAT = 1
"""Version of the fingerprint layout (bump it when the layout, not the numbers, changes)."""


class Case(NamedTuple):
    """One configuration of the golden episodes."""

    name: str
    preset: str
    overrides: dict[str, Any]
    seeds: tuple[int, ...]


CASES = (
    Case("CoRE-v0", "CoRE-v0", {}, (0, 1)),
    Case("CoRE-Heavy-v0", "CoRE-Heavy-v0", {}, (0,)),
    Case("CoRE-Extreme-v0", "CoRE-Extreme-v0", {}, (0,)),
    Case("CoRE-HeldOut-v0", "CoRE-HeldOut-v0", {}, (0,)),
    Case("CoRE-Real-v0", "CoRE-Real-v0", {}, (0,)),
    Case("CoRE-RealTrace-v0", "CoRE-RealTrace-v0", {}, (0,)),
    Case("CoRE-Small-v0", "CoRE-Small-v0", {}, (0, 1, 2)),
    Case("hetero-speeds", "CoRE-v0", {"speed_choices": (0.5, 1.0, 1.5)}, (0,)),
    Case("switch-cost", "CoRE-v0", {"switch_cost": 0.25}, (0,)),
    Case("CoRE-8-v0", "CoRE-8-v0", {}, (0,)),
    Case("CoRE-64-v0", "CoRE-64-v0", {"arrival_slots": 40}, (0,)),
    Case("CoRE-256-v0", "CoRE-256-v0", {"arrival_slots": 10}, (0,)),
    Case("CoRE-1024-v0", "CoRE-1024-v0", {"arrival_slots": 5, "max_steps": 40}, (0,)),
    Case("CoRE-Switch-v0", "CoRE-Switch-v0", {}, (0,)),
    Case("CoRE-Cluster-v0", "CoRE-Cluster-v0", {}, (0,)),
    Case("CoRE-SwitchMix-v0", "CoRE-SwitchMix-v0", {"arrival_slots": 60}, (0, 1)),
    Case("CoRE-Tenants-v0", "CoRE-Tenants-v0", {"arrival_slots": 60}, (0,)),
)
"""Every preset, plus heterogeneous node speeds and a switching cost (whole episodes; the
clusters of 64, 256 and 1,024 nodes with arrivals in their first 40, 10 and 5 slots only, and
the 1,024-node episode cut at 40 slots, when about 80% of its completions have happened, to
keep them short)."""

POLICIES = ("random_sequential", "edf", "lara", "oracle_greedy")
"""The policies whose episodes are fingerprinted (numpy-only: no torch, no BLAS)."""

PEERS = ("las", "successive_halving", "optimus", "slaq", "laira")
"""The peer schedulers, fingerprinted on :data:`PEER_CASES` too (their curve fits and filters
decide their actions)."""

PEER_CASES = ("CoRE-v0", "CoRE-Small-v0")
"""The cases whose episodes are also fingerprinted with :data:`PEERS`."""

BATCH_SIZES = (1, 7, 64)
BATCH_CASE = Case("batched", "CoRE-v0", {"arrival_slots": 60}, tuple(range(64)))
"""The batched simulator's case (shorter episodes: 60 arrival slots): environment b has seed
``seeds[b]``."""


def _sha(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def workload_hash(wl: Workload) -> str:
    """sha256 of every array of a workload (dtypes and shapes included; the tenants only
    where there are any, so a workload without them hashes as before they existed)."""
    return _sha(*(wl if wl.tenant is not None else wl[:-1]))


def _episode(case: Case, policy_name: str, seed: int) -> dict[str, Any]:
    from mara_agents.policy import make_policy

    env, policy = make_policy(policy_name, core_env.parallel_env(preset=case.preset,
                                                                 **case.overrides))
    agents = list(env.possible_agents)
    h = hashlib.sha256()
    obs, infos = env.reset(seed=seed)
    policy.reset(seed)
    while env.agents:
        actions = policy.act(obs)
        h.update(np.asarray(obs[agents[0]]["observation"], dtype=np.float32).tobytes())
        h.update(np.asarray([actions[a] for a in agents], dtype=np.int64).tobytes())
        obs, rewards, _, _, infos = env.step(actions)
        h.update(np.float64(rewards[agents[0]]).tobytes())
    stats = dict(infos[agents[0]]["episode"])
    groups = stats.pop("groups")  # (exact counts: their digest, not the whole dict)
    stats["groups"] = hashlib.sha256(json.dumps(groups, sort_keys=True).encode()).hexdigest()
    return {"trajectory": h.hexdigest(), **stats}


def _batched(case: Case, batch_size: int) -> dict[str, Any]:
    """First episode of each of ``batch_size`` environments under random legal actions."""
    cfg = make_config(case.preset, **case.overrides)
    seeds = list(case.seeds[:batch_size])
    envs = core_env.batched.BatchedCoreEnv(cfg, batch_size, seed=seeds)
    obs, mask = envs.reset()
    rngs = [np.random.default_rng(10_000 + s) for s in seeds]
    hashes = [hashlib.sha256() for _ in seeds]
    out: dict[str, Any] = {}
    while len(out) < batch_size:
        live = [b for b in range(batch_size) if str(seeds[b]) not in out]
        actions = np.zeros(mask.shape[:2], dtype=np.int64)
        for b in live:
            legal = mask[b].astype(bool)
            actions[b] = [rngs[b].choice(np.flatnonzero(row)) for row in legal]
            hashes[b].update(obs[b, 0].tobytes())
            hashes[b].update(actions[b].tobytes())
        obs, mask, reward, done, info = envs.step(actions)
        for b in live:
            hashes[b].update(np.float64(reward[b]).tobytes())
        ep = info["episode"]
        for i, b in enumerate(ep["env"]):
            if str(seeds[b]) in out:
                continue
            out[str(seeds[b])] = {"trajectory": hashes[b].hexdigest(),
                                  **{k: ep[k][i].item() for k in ep if k != "env"}}
    return out


def compute() -> dict[str, Any]:
    """The fingerprints of this machine (see the module docstring)."""
    cases: dict[str, Any] = {}
    for case in CASES:
        cfg = make_config(case.preset, **case.overrides)
        for seed in case.seeds:
            entry: dict[str, Any] = {
                "workload": workload_hash(generate_workload(cfg, np.random.default_rng(seed)))}
            for name in POLICIES + (PEERS if case.name in PEER_CASES else ()):
                entry[name] = _episode(case, name, seed)
            cases[f"{case.name}/seed{seed}"] = entry
    cfg = make_config(BATCH_CASE.preset, **BATCH_CASE.overrides)
    batched: dict[str, Any] = {"one-by-one": [
        workload_hash(generate_workload(cfg, np.random.default_rng(s))) for s in BATCH_CASE.seeds]}
    for size in BATCH_SIZES:
        wls = generate_workloads(cfg, [np.random.default_rng(s) for s in BATCH_CASE.seeds[:size]])
        batched[f"B={size}"] = {"workloads": [workload_hash(w) for w in wls],
                                "episodes": _batched(BATCH_CASE, size)}
    return {"format": FORMAT, "cases": cases, "batched": batched}


def batch_mismatches(fp: dict[str, Any]) -> list[str]:
    """Where the batched results of one fingerprint depend on the batch size (empty if
    nowhere)."""
    bad = []
    one = fp["batched"]["one-by-one"]
    largest = fp["batched"][f"B={BATCH_SIZES[-1]}"]["episodes"]
    for size in BATCH_SIZES:
        entry = fp["batched"][f"B={size}"]
        if entry["workloads"] != one[:size]:
            bad.append(f"generate_workloads at B={size} differs from generate_workload")
        bad.extend(f"seed {seed}: the episode at B={size} differs from B={BATCH_SIZES[-1]}"
                   for seed, ep in entry["episodes"].items() if ep != largest[seed])
    return bad


def differences(got: dict[str, Any], want: dict[str, Any], path: str = "") -> list[str]:
    """Paths where two fingerprints differ, with both values (empty if equal)."""
    if isinstance(got, dict) and isinstance(want, dict):
        out = []
        for key in sorted(set(got) | set(want), key=str):
            if key not in got or key not in want:
                out.append(f"{path}/{key}: only in {'expected' if key in want else 'computed'}")
            else:
                out.extend(differences(got[key], want[key], f"{path}/{key}"))
        return out
    return [] if got == want else [f"{path}: computed {got!r}, expected {want!r}"]


def machine() -> dict[str, Any]:
    """What this process runs on: numpy's version and the SIMD targets it dispatches to."""
    import platform

    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy < 2
        from numpy.core import _multiarray_umath as umath
    from core_env import pmath

    on = [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]
    return {"numpy": np.__version__, "machine": platform.machine(),
            "baseline": list(umath.__cpu_baseline__), "dispatch_on": on,
            "pmath": pmath.BACKEND}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help=f"write the fingerprints of this machine to {FILE.name}")
    parser.add_argument("--out", type=Path, default=None,
                        help="write them to this file instead (JSON)")
    args = parser.parse_args(argv)
    text = json.dumps({"machine": machine(), "fingerprints": compute()}, indent=1,
                      sort_keys=True) + "\n"
    if args.write:
        FILE.write_text(text)
    elif args.out is not None:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
