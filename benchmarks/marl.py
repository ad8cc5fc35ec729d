"""``mara-bench marl``: the standard MARL algorithms trained on the benchmark for a ladder of
env-step budgets, then run paired with random, EDF, LARA and MARA on the same seeds.

1. **Train** every (budget, preset, algorithm, training seed; :data:`TRAIN_SEEDS` seeds)
   that has no model yet, at most ``workers`` at a time, each in its own process on one
   thread (``python -m mara_agents.marl train ...``; ``rllib_ppo`` with RLlib's own
   environment's Python, ``.venv-rllib/bin/python``). The largest budget's models go to
   ``<out>/models`` (what the plain policy names run: seed 0's), each smaller budget's to
   ``<out>/models-<budget>``. A model already there is kept if it was trained with the same
   budget and seed, and refused otherwise.
2. **Evaluate** the references (:data:`REFERENCES`, MARA on the presets it runs on) and
   every trained model on seeds ``seed_offset .. seed_offset + seeds - 1`` (default 0-49) of
   each preset, with the clairvoyant bound of each seed (the episode store of the other
   suites: resumable, paired).
3. **Report** into ``<out>``: ``table.md`` (the suites' table against LARA; the reference
   scores over the training seeds, :mod:`benchmarks.scores`: IQM of the completion rate,
   of the normalised score and of the bound share with stratified-bootstrap intervals; then
   :func:`learning_table`: per budget, seed 0's model's completion and paired differences
   to the references, training env steps per second and wall time), ``training.md`` (env
   steps, wall time, library, update statistics and command per model),
   ``curve_<algorithm>.png`` (the training episodes' completion rate against env steps,
   one line per preset and budget), and the other suites' ``results.json`` / ``results.csv``.

    mara-bench marl --presets CoRE-v0 --algorithms ippo mappo --env-steps 200000 2000000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.flags import Command, add_out, add_presets, add_seeds, add_workers, integer
from benchmarks.plots import plot_curves, plot_updates
from benchmarks.report import markdown_table, summarise, write_report
from benchmarks.runner import EpisodeSpec, run_episodes
from benchmarks.store import write_atomic
from core_env.utils.checks import check_int, fail
from mara_agents.marl import ALGORITHMS, MODELS_DIR, PORTABLE_TORCH, model_file

PRESETS = ("CoRE-Small-v0", "CoRE-v0")
"""The presets the algorithms are trained and evaluated on."""

ENV_STEPS = (200_000, 2_000_000)
"""The budget ladder: each algorithm trains once per budget, in env steps (slots of the
whole cluster)."""

DEFAULT_ALGORITHMS = ("maskable_ppo", "mappo", "ippo")
"""The algorithms the suite trains unless told otherwise: those that train on the batched
simulator (:mod:`mara_agents.marl.vector`). ``rllib_ppo`` steps one env at a time through
RLlib's own multi-agent runner (docs/integrations.md says why) and is added by name."""

REFERENCES = ("random", "random_sequential", "edf", "lara", "mara")
"""The policies every trained model is compared with, paired (MARA where it runs): the naive
``random`` (each node on its own mask, as a simultaneous learner starts) and the
capacity-aware ``random_sequential``."""

SEEDS = 50
"""Evaluation seeds: 50 (0..49 with the default offset 0, the schedule suite's)."""

TRAIN_SEEDS = 3
"""Training seeds per (budget, preset, algorithm): models ``<algorithm>-seed<s>.pt``, s = 0,
1, 2; the plain policy names run seed 0's, the reference scores pool them all
(:mod:`benchmarks.scores`)."""

RLLIB_PYTHON = Path(".venv-rllib/bin/python")
"""RLlib's own environment (``make .venv-rllib/.installed``)."""


def train_command(python: str | Path, algorithm: str, preset: str, env_steps: int, seed: int,
                  out: Path) -> list[str]:
    """The command that trains one model."""
    return [str(python), "-m", "mara_agents.marl", "train", algorithm, "--preset", preset,
            "--env-steps", str(env_steps), "--seed", str(seed), "--out", str(out)]


def check_model(path: Path, algorithm: str, preset: str, env_steps: int, seed: int) -> dict:
    """The model file at ``path`` if it was trained as asked.

    Raises:
        ValueError: it is unreadable, or trained with another budget, seed or preset.
    """
    from mara_agents.marl.common import load_model

    blob = load_model(path, algorithm)
    got = {k: blob[k] for k in ("preset", "env_steps", "seed")}
    want = {"preset": preset, "env_steps": env_steps, "seed": seed}
    if got != want:
        raise ValueError(f"{path}: trained with {got}, this run asks for {want}; use another "
                         f"--out or remove it")
    return blob


def train_missing(jobs: Sequence[tuple[str, str, Path]], env_steps: int, seed: int,
                  workers: int, rllib_python: Path, progress: bool = True) -> None:
    """Train the ``(algorithm, preset, path)`` jobs whose file is missing, ``workers`` at a
    time (each process on one thread); its output goes to ``<path>.log``.

    Raises:
        RuntimeError: a training process failed (naming its log).
    """
    todo = [j for j in jobs if not j[2].is_file()]
    running: list[tuple[subprocess.Popen, tuple[str, str, Path], float]] = []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **PORTABLE_TORCH}
    while todo or running:
        while todo and len(running) < workers:
            algo, preset, path = job = todo.pop(0)
            path.parent.mkdir(parents=True, exist_ok=True)
            python = rllib_python if algo == "rllib_ppo" else Path(sys.executable)
            log = open(path.with_suffix(".log"), "w")  # noqa: SIM115 (closed by the child)
            proc = subprocess.Popen(train_command(python, algo, preset, env_steps, seed, path),
                                    stdout=log, stderr=subprocess.STDOUT, env=env)
            log.close()
            running.append((proc, job, time.perf_counter()))
            if progress:
                print(f"training {algo} on {preset} ({env_steps} env steps) -> {path}",
                      flush=True)
        time.sleep(1.0)
        for item in list(running):
            proc, (algo, preset, path), start = item
            if proc.poll() is None:
                continue
            running.remove(item)
            if proc.returncode != 0:
                for p, _, _ in running:
                    p.kill()
                raise RuntimeError(f"training {algo} on {preset} failed (exit status "
                                   f"{proc.returncode}); see {path.with_suffix('.log')}")
            if progress:
                print(f"trained {algo} on {preset} in {time.perf_counter() - start:.0f} s",
                      flush=True)


def policy_name(algorithm: str, models: Path) -> str:
    """The policy spec of an algorithm's models in ``models``."""
    return algorithm if models == MODELS_DIR else f"{algorithm}@{models}"


def models_dir(out: Path, budget: int, budgets: Sequence[int]) -> Path:
    """Where a budget's models go: ``<out>/models`` for the largest of ``budgets``, else
    ``<out>/models-<budget>``."""
    return out / "models" if budget == max(budgets) else out / f"models-{budget}"


def run(out: Path = Path("results/marl"), presets: Sequence[str] = PRESETS,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        env_steps: Sequence[int] = ENV_STEPS,
        seeds: int = SEEDS,
        workers: int = 2, rllib_python: Path = RLLIB_PYTHON,
        progress: bool = True, seed_offset: int = 0, train: bool = True,
        train_seeds: int = TRAIN_SEEDS, bound: bool = True) -> str:
    """Train what is missing, evaluate on seeds ``seed_offset .. seed_offset + seeds - 1``,
    and write the report; returns ``table.md``'s text. Every (budget, preset, algorithm)
    trains ``train_seeds`` models; ``bound``: the clairvoyant bound of every evaluation seed
    joins the report (the reference scores' bound share). ``train=False``: train nothing and
    evaluate the models already there, leaving out (and naming) the combinations that have
    none, e.g. a rung too long for some algorithm.

    Raises:
        ValueError: a bad argument, a model trained otherwise, or ``rllib_ppo`` asked for
            without RLlib's environment, before anything runs.
    """
    import core_env

    if isinstance(env_steps, int):
        env_steps = (env_steps,)
    if not env_steps or len(set(env_steps)) != len(env_steps):
        fail("env_steps", list(env_steps), "one or more distinct budgets")
    for budget in env_steps:
        check_int("env_steps", budget, 1)
    for name, value, low in (("seeds", seeds, 1), ("train_seeds", train_seeds, 1),
                             ("seed_offset", seed_offset, 0), ("workers", workers, 1)):
        check_int(name, value, low)
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if bad or not algorithms or len(set(algorithms)) != len(algorithms):
        fail("algorithms", list(algorithms), f"distinct names among {ALGORITHMS}")
    bad = [p for p in presets if p not in core_env.PRESETS]
    if bad or not presets:
        fail("presets", list(presets), f"some of {sorted(core_env.PRESETS)}")
    return _run(out, presets, algorithms, env_steps, seeds, seed_offset, workers,
                rllib_python, progress, train, train_seeds, bound)


def _run(out: Path, presets: Sequence[str], algorithms: Sequence[str],
         env_steps: Sequence[int], seeds: int, seed_offset: int, workers: int,
         rllib_python: Path, progress: bool, train: bool = True,
         train_seeds: int = TRAIN_SEEDS, bound: bool = True) -> str:
    """:func:`run` on checked arguments (a stored model or RLlib's Python checked here)."""
    from benchmarks.scores import score_rows, score_table
    from benchmarks.suites import BOUND_POLICY, run_spec

    budgets = sorted(env_steps)
    jobs = [(b, a, p, s, model_file(models_dir(out, b, budgets), p, a, s))
            for b in budgets for s in range(train_seeds) for p in presets for a in algorithms]
    if not train:
        missing = [(b, a, p, s) for b, a, p, s, path in jobs if not path.is_file()]
        jobs = [j for j in jobs if j[4].is_file()]
        if not jobs:
            raise ValueError(f"no trained models in {out} for these presets, algorithms and "
                             f"budgets: run without --no-train to train them")
        if missing and progress:
            print("no model, left out (--no-train): " + ", ".join(
                f"{a} on {p} at {b:,}" + (f" (seed {s})" if s else "")
                for b, a, p, s in missing), flush=True)
    blobs: dict[tuple[int, str, str, int], dict] = {}
    for budget, algo, preset, seed, path in jobs:
        if path.is_file():
            blobs[(budget, algo, preset, seed)] = check_model(path, algo, preset, budget, seed)
        elif algo == "rllib_ppo" and not Path(rllib_python).is_file():
            raise ValueError(f"rllib_ppo needs RLlib's own environment ({rllib_python} is "
                             f"missing): run `make .venv-rllib/.installed`, or leave "
                             f"rllib_ppo out of --algorithms")
    for budget in budgets if train else ():
        for seed in range(train_seeds):
            train_missing([(a, p, path) for b, a, p, s, path in jobs
                           if b == budget and s == seed], budget, seed, workers,
                          Path(rllib_python), progress)
    blobs = {(b, a, p, s): blobs.get((b, a, p, s)) or check_model(path, a, p, b, s)
             for b, a, p, s, path in jobs}  # the models trained now are checked here
    names = {(b, a): policy_name(a, models_dir(out, b, budgets)) for b, a, *_ in jobs}
    # seed 0 runs under the plain names (the largest budget's under the algorithm's own),
    # the other seeds as model files
    runs = {(b, a, p, s): names[(b, a)] if s == 0 else f"{a}@{path}"
            for b, a, p, s, path in jobs}
    from mara_agents.policy import policy_fingerprint

    evaluated = range(seed_offset, seed_offset + seeds)
    trained = {p: [runs[k] for k in runs if k[2] == p] for p in presets}
    specs = [EpisodeSpec(p, pol, s) for p in presets
             for pol in [*(r for r in REFERENCES if _fits(r, [p])), *trained[p]]
             for s in evaluated]
    policies = list(dict.fromkeys(spec.policy for spec in specs))
    if bound:
        specs += [EpisodeSpec(p, BOUND_POLICY, s) for p in presets for s in evaluated]
    results = run_episodes(specs, out, episode_fn=run_spec, workers=workers,
                           progress=progress,
                           policy_hashes={p: policy_fingerprint(p) for p in policies})
    meta = {"suite": "marl", "policies": policies, "presets": list(presets),
            "seeds": list(evaluated), "env_steps": budgets,
            "train_seeds": list(range(train_seeds)), "reference": "lara"}
    table = write_report(results, out, meta)
    groups: dict[tuple[str, int, str], list[str]] = {}
    for (b, a, p, _), name in runs.items():
        groups.setdefault((p, b, a), []).append(name)
    table += "\n" + score_table(score_rows(results, dict(sorted(groups.items())),
                                            references=REFERENCES))
    seed0 = {(b, a, p): blob for (b, a, p, s), blob in blobs.items() if s == 0}
    table += "\n" + learning_table(results, names, seed0)
    write_atomic(out / "table.md", table)
    write_atomic(out / "training.md", training_table(blobs, out, budgets))
    plot_curves(seed0, out)
    plot_updates(seed0, out)
    return table


def learning_table(results: Sequence[dict[str, Any]], names: dict[tuple[int, str], str],
                   blobs: dict[tuple[int, str, str], dict]) -> str:
    """Markdown, one row per (preset, budget, algorithm): completion, the paired difference
    to each of :data:`REFERENCES` that ran on the preset, the training env steps per second
    (env steps taken / wall seconds) and the wall time."""
    by_ref = {ref: {(r["preset"], r["policy"]): r for r in summarise(results, ref)}
              for ref in REFERENCES}
    rows = []
    for (budget, algo, preset), blob in sorted(blobs.items(), key=lambda kv: (
            kv[0][2], kv[0][0], ALGORITHMS.index(kv[0][1]))):
        name = names[(budget, algo)]
        own = by_ref["lara"].get((preset, name))
        if own is None:
            continue
        cells = [preset, f"{budget:,}", algo, f"{100 * own['completion_rate']:.1f}%"]
        for ref in REFERENCES:
            r = by_ref[ref].get((preset, name))
            cells.append(_pts(r) if r is not None and "diff_vs_ref" in r else "-")
        wall = blob["wall_seconds"]
        cells += [f"{blob['curve']['steps'] / max(wall, 1e-9):,.0f}", f"{wall / 60:.1f}"]
        rows.append(cells)
    return markdown_table(["preset", "budget (env steps)", "algorithm", "completion",
                           *(f"vs {r}, paired (95% CI)" for r in REFERENCES),
                           "training env steps/s", "wall min"], rows,
                          title="What learns: each trained model against the references")


def _fits(policy: str, presets: Sequence[str]) -> bool:
    """Whether ``policy`` builds on every preset (the shipped MARA needs 8-64 nodes and 16-64
    slots)."""
    from benchmarks.suites import check_policies_fit

    try:
        check_policies_fit([policy], presets)
    except ValueError:
        return False
    return True


def _pts(r: dict[str, Any]) -> str:
    return (f"{100 * r['diff_vs_ref']:+.1f} pts ({100 * r['diff_ci_low']:+.1f}, "
            f"{100 * r['diff_ci_high']:+.1f})")


def training_table(blobs: dict[tuple[int, str, str, int], dict], out: Path,
                   budgets: Sequence[int]) -> str:
    """Markdown: one row per model (budget, wall time, library, last training episodes, and
    from the PPO updates' statistics where the model file has them: the per-node entropy at
    the first and last update, and the critic's explained variance at the last)."""
    rows = []
    for (budget, algo, preset, _), b in blobs.items():
        rates = b["curve"]["completion_rate"][-20:]
        last = f"{100 * sum(rates) / len(rates):.1f}%" if rates else "-"
        up = b["curve"].get("updates") or {}
        entropy = (f"{up['entropy'][0]:.2f} → {up['entropy'][-1]:.2f}"
                   if up.get("entropy") else "-")
        explained = f"{up['explained_variance'][-1]:.2f}" if up.get("entropy") else "-"
        command = train_command("python", algo, preset, b["env_steps"], b["seed"],
                                model_file(models_dir(out, budget, budgets), preset, algo,
                                           b["seed"]))
        rows.append([algo, preset, b["seed"], f"{b['curve']['steps']:,}", f"{b['wall_seconds'] / 60:.1f}",
                     f"{b['library']['name']} {b['library']['version']}", last, entropy,
                     explained, f"`{' '.join(command)}`"])
    return markdown_table(["algorithm", "preset", "training seed", "env steps taken", "wall min", "library",
                           "last 20 training episodes", "entropy per node, first → last update",
                           "explained variance, last update", "command"], rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import core_env

    # plain ids: the trained models are stored per preset (no overrides)
    add_presets(parser, PRESETS, choices=tuple(core_env.PRESETS),
                help="presets to train and evaluate on")
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS,
                        default=list(DEFAULT_ALGORITHMS),
                        help="the algorithms (rllib_ppo: add it by name; it needs RLlib's own "
                             "environment)")
    parser.add_argument("--env-steps", type=integer(1), nargs="+", default=list(ENV_STEPS),
                        help="the budget ladder: every algorithm trains once per budget "
                             "(env steps)")
    add_seeds(parser, seeds=SEEDS)
    parser.add_argument("--train-seeds", type=integer(1), default=TRAIN_SEEDS, metavar="N",
                        help="training seeds per budget, preset and algorithm (the reference "
                             "scores pool them)")
    parser.add_argument("--no-bound", dest="bound", action="store_false",
                        help="leave out the clairvoyant bound (and the bound share)")
    add_workers(parser, help="training runs and episodes at a time")
    parser.add_argument("--rllib-python", type=Path, default=RLLIB_PYTHON,
                        help="the Python of RLlib's own environment (make "
                             ".venv-rllib/.installed)")
    parser.add_argument("--no-train", dest="train", action="store_false",
                        help="train nothing: evaluate the models already in <out>, leaving "
                             "out (and naming) the combinations without one")
    add_out(parser, MODELS_DIR.parent,
            "results folder (the largest budget's models in <out>/models, the others' in "
            "<out>/models-<budget>); rerun to resume")


def run_command(args: argparse.Namespace) -> int:
    """``mara-bench marl``: the values checked by argparse; the algorithms once more only
    for repeats, and the stored models and RLlib's Python in :func:`_run`."""
    if len(set(args.algorithms)) != len(args.algorithms):
        fail("algorithms", args.algorithms, "each at most once")
    if len(set(args.env_steps)) != len(args.env_steps):
        fail("env_steps", args.env_steps, "each budget at most once")
    print(_run(args.out, args.presets, args.algorithms, args.env_steps, args.seeds,
               args.seed_offset, args.workers, args.rllib_python, progress=True,
               train=args.train, train_seeds=args.train_seeds, bound=args.bound))
    print(f"results in {args.out}/ (training.md, curve_<algorithm>.png)")
    return 0


COMMAND = Command("marl", "train MaskablePPO, MAPPO, IPPO and RLlib PPO for a ladder of "
                          "env-step budgets, then run them paired with random, EDF, LARA "
                          "and MARA",
                  add_arguments, run_command)
