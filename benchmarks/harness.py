"""The scheduling benchmark harness: episodes in parallel, crash-safe results, tables, plots.

A run is a list of :class:`EpisodeSpec` (preset, policy, seed). Each finished episode is
written at once to ``<out>/episodes/<preset>__<policy>__<seed>.json`` (write to a temporary
file, then rename: a file is either complete or absent), so an interrupted run resumes
without recomputing finished episodes. The summary files (``results.json``, ``results.csv``,
``table.md``, ``completion_vs_load.png``) are rewritten atomically from all episode files.

Episodes run on local processes (``backend="local"``, ``workers`` processes; 1 = in this
process) or as Ray tasks (``backend="ray"``, optional extra ``[ray]``); every episode is a
pure function of its spec, so both give identical results.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

from benchmarks.stats import mean_ci
from core_env.processes import worker_pool

REFERENCE_POLICY = "lara"
"""Policy that paired differences are taken against."""

EPISODE_FIELDS = ("arrived", "completed", "expired", "completion_rate", "utilization",
                  "illegal_actions", "capacity_conflicts", "switches", "length", "return")


@dataclasses.dataclass(frozen=True)
class EpisodeSpec:
    """One benchmark episode: a policy on a preset with a seed."""

    preset: str
    policy: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.preset}__{self.policy}__{self.seed}"


def run_episode_spec(spec: EpisodeSpec) -> dict[str, Any]:
    """Run one episode and return its statistics (the default episode function)."""
    import core_env
    from mara_agents.policy import make_policy, run_episode

    base = core_env.parallel_env(preset=spec.preset)
    env, policy = make_policy(spec.policy, base)
    stats = run_episode(env, policy, spec.seed)
    return {"preset": spec.preset, "policy": spec.policy, "seed": spec.seed,
            **{k: stats[k] for k in EPISODE_FIELDS}}


def config_record(preset: str) -> dict[str, Any]:
    """A preset's full configuration and its hash (recorded with every result)."""
    import core_env

    cfg = dataclasses.asdict(core_env.make_config(preset))
    blob = json.dumps(cfg, sort_keys=True, default=str)
    return {"config": cfg, "config_hash": hashlib.sha256(blob.encode()).hexdigest()[:16]}


def code_version() -> str:
    """Which code produced a result: ``<git describe --always --dirty>+src.<hash>``.

    The first part is the package version where git is unavailable. The hash (12 hex
    digits of SHA-256) covers the path and bytes of every ``.py`` file of ``core_env``,
    ``mara_agents`` and ``benchmarks`` and the shipped checkpoints, so two runs with the
    same string ran the same code even on a dirty tree (where ``git describe`` alone says
    only "dirty").
    """
    root = Path(__file__).resolve().parent.parent
    head = None
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                             text=True, cwd=root, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            head = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    if head is None:
        import core_env

        head = core_env.__version__
    digest = hashlib.sha256()
    for pkg in ("core_env", "mara_agents", "benchmarks"):
        files = [p for pattern in ("*.py", "checkpoints/*.pt", "checkpoints/*.json")
                 for p in (root / pkg).rglob(pattern)]
        for f in sorted(files):
            digest.update(f.relative_to(root).as_posix().encode() + b"\0")
            digest.update(f.read_bytes() + b"\0")
    return f"{head}+src.{digest.hexdigest()[:12]}"


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that ``path`` is either its old self or complete, never partial.

    The text goes to a hidden temporary file next to ``path`` (``.<name>.<pid>.tmp``),
    is flushed and fsynced, then renamed over ``path`` (atomic on POSIX) and the directory
    entry is fsynced, so a crash or a kill at any point (SIGINT, SIGKILL, power loss after
    the rename) leaves no truncated ``path``. A leftover temporary file is removed by the
    next :func:`run_episodes` on the folder.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


MANIFEST = "manifest.json"
"""Run manifest in a results folder: each preset's config hash and the code versions that
contributed episodes (see :func:`run_episodes`)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's live process
        return True
    return True


_COUNTS = ("arrived", "completed", "expired", "illegal_actions", "capacity_conflicts",
           "switches", "length")


def check_record(record: Any, key: str, config_hash: str | None) -> str | None:
    """What is wrong with a stored result, or None.

    A stored result must be what its file name says it is: a dict whose ``preset``,
    ``policy`` and ``seed`` make its key ``<preset>__<policy>__<seed>`` and whose
    ``config_hash`` is the preset's current one. An episode's statistics must be whole
    counts >= 0 with completed + expired <= arrived, ``completion_rate`` =
    completed / arrived exactly, utilization in [0, 1] and a finite return; a bound record
    needs 0 <= bound <= n_tasks.
    """
    import math

    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    preset, policy, seed = record.get("preset"), record.get("policy"), record.get("seed")
    if not (isinstance(preset, str) and isinstance(policy, str) and isinstance(seed, int)
            and not isinstance(seed, bool)):
        return "preset, policy and seed missing or of the wrong type"
    if f"{preset}__{policy}__{seed}" != key:
        return f"it holds {preset}__{policy}__{seed}, not {key}"
    if record.get("config_hash") != config_hash:
        return (f"config hash {record.get('config_hash')!r}, but {preset} has "
                f"{config_hash!r} now")
    if "bound" in record:
        b, n = record.get("bound"), record.get("n_tasks")
        if not (isinstance(b, int) and isinstance(n, int) and 0 <= b <= n):
            return f"bound {b!r} of {n!r} tasks: expected whole numbers with 0 <= bound <= n"
        return None
    if not any(k in record for k in EPISODE_FIELDS):
        return None  # the record of a custom episode function
    missing = [k for k in EPISODE_FIELDS if k not in record]
    if missing:
        return f"episode statistics missing: {missing}"
    bad = [k for k in _COUNTS if not (isinstance(record[k], int)
                                      and not isinstance(record[k], bool) and record[k] >= 0)]
    if bad:
        return f"counts {bad} are not whole numbers >= 0"
    if record["completed"] + record["expired"] > record["arrived"]:
        return "completed + expired exceeds arrived"
    rate = record["completion_rate"]
    if not isinstance(rate, float) or rate != record["completed"] / max(record["arrived"], 1):
        return (f"completion_rate {rate!r} is not completed / arrived = "
                f"{record['completed']} / {record['arrived']}")
    util, ret = record["utilization"], record["return"]
    if not (isinstance(util, (int, float)) and 0.0 <= util <= 1.0):
        return f"utilization {util!r} outside [0, 1]"
    if not (isinstance(ret, (int, float)) and math.isfinite(ret)):
        return f"return {ret!r} is not a finite number"
    return None


def _clean_store(store: Path, hashes: dict[str, str | None]) -> None:
    """Remove temporary files left by killed writers (their pid is gone) and move aside, as
    ``*.corrupt``, every episode file that does not parse or does not pass
    :func:`check_record` (so it is recomputed), with a warning naming each."""
    for tmp in store.glob(".*.tmp"):
        pid = tmp.name.rsplit(".", 2)[-2]
        if not pid.isdigit() or not _pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
    moved = []
    for f in sorted(store.glob("*.json")):
        try:
            record = json.loads(f.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            problem = f"unreadable ({type(e).__name__})"
        else:
            preset = record.get("preset") if isinstance(record, dict) else None
            problem = check_record(record, f.stem, hashes.get(preset, _config_hash(preset)))
        if problem is not None:
            os.replace(f, f.with_name(f.name + ".corrupt"))
            moved.append(f"{f.name}: {problem}")
    if moved:
        warnings.warn(f"{store}: {len(moved)} stored results were invalid, moved aside as "
                      f"*.corrupt and will be recomputed:\n  " + "\n  ".join(moved),
                      stacklevel=3)


def _config_hash(preset: Any) -> str | None:
    """The config hash of a preset of core_env (None for anything else)."""
    try:
        return config_record(preset)["config_hash"] if isinstance(preset, str) else None
    except ValueError:  # not a preset of core_env (a custom episode function)
        return None


def _update_manifest(out: Path, presets: Sequence[str]) -> None:
    """Record (or check) the config hash of every preset of the run and the code version.

    Raises:
        ValueError: if the folder holds episodes of a preset whose configuration has
            changed since (its config hash differs), or an unreadable manifest.
    """
    path = out / MANIFEST
    old: dict[str, Any] = {"config_hashes": {}, "code_versions": []}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: unreadable run manifest ({e}); delete it to accept "
                             f"the episodes in {out} as they are") from e
        if not (isinstance(old, dict) and isinstance(old.get("config_hashes"), dict)
                and isinstance(old.get("code_versions"), list)):
            raise ValueError(f"{path}: expected a run manifest with config_hashes and "
                             f"code_versions; delete it to accept the episodes in {out}")
    hashes = dict(old["config_hashes"])
    for preset in sorted(set(presets)):
        h = _config_hash(preset)
        if preset in hashes and hashes[preset] != h:
            raise ValueError(
                f"{out}: preset {preset!r} has changed since its episodes there were run "
                f"(config hash {hashes[preset]} then, {h} now); use a new --out folder or "
                f"delete {out / 'episodes'} to recompute")
        hashes[preset] = h
    version = code_version()
    versions = list(old["code_versions"]) + ([version] if version not in old["code_versions"]
                                             else [])
    _write_atomic(path, json.dumps({"config_hashes": hashes, "code_versions": versions},
                                   indent=2, sort_keys=True))


EPISODE_THREADS = 1
"""torch / OpenMP intra-op threads while episodes run. The outputs of torch models (the FM
forecaster) differ in the last bits with the thread count (measured: 1 and 2 threads give
different forecasts), so without a fixed count results would depend on the machine's cores
and the backend (Ray workers default to 1 thread, pool workers to all cores)."""


def _pin_threads() -> None:
    """Use :data:`EPISODE_THREADS` threads in this process, for torch imported now or later."""
    os.environ["OMP_NUM_THREADS"] = str(EPISODE_THREADS)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != EPISODE_THREADS:
        torch.set_num_threads(EPISODE_THREADS)


def _pinned_episode(episode_fn: Callable[[EpisodeSpec], dict[str, Any]],
                    spec: EpisodeSpec) -> dict[str, Any]:
    """``episode_fn(spec)`` with the thread count pinned (what every backend runs)."""
    _pin_threads()
    return episode_fn(spec)


def run_episodes(specs: Sequence[EpisodeSpec], out: Path,
                 episode_fn: Callable[[EpisodeSpec], dict[str, Any]] = run_episode_spec,
                 backend: str = "local", workers: int = 2, ray_address: str | None = None,
                 progress: bool = True) -> list[dict[str, Any]]:
    """Run the specs that have no result file yet; return every spec's result, in order.

    Crash safety: every finished episode is written atomically (:func:`_write_atomic`) as
    soon as it is done, so killing the run at any moment (Ctrl-C, SIGKILL) loses at most
    the episodes in flight, and rerunning resumes where it stopped with the same final
    results. On start, temporary files of killed writers are removed, unparsable episode
    files are renamed ``*.corrupt`` and recomputed, and ``<out>/manifest.json`` records
    each preset's config hash and the code versions: resuming into a folder whose episodes
    were run with a different configuration of a preset raises ``ValueError``.

    Determinism: every backend runs episodes with torch/OpenMP pinned to
    :data:`EPISODE_THREADS` threads (serially, this process's setting is restored after the
    run if torch was already imported; if an episode imports torch, it keeps 1 thread).
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend: expected 'local' or 'ray', got {backend!r}")
    if workers < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    store = out / "episodes"
    store.mkdir(parents=True, exist_ok=True)
    _update_manifest(out, [s.preset for s in specs])
    hashes = {p: _config_hash(p) for p in {s.preset for s in specs}}
    _clean_store(store, hashes)
    todo = [s for s in specs if not (store / f"{s.key}.json").exists()]
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="episodes", unit="ep")

    def save(spec: EpisodeSpec, result: dict[str, Any]) -> None:
        record = {**result, "config_hash": hashes[spec.preset]}
        problem = check_record(record, spec.key, hashes[spec.preset])
        if problem is not None:
            raise RuntimeError(f"episode {spec.key}: the episode function returned an "
                               f"invalid result ({problem})")
        _write_atomic(store / f"{spec.key}.json", json.dumps(record))
        if bar is not None:
            bar.update(1)

    saved_env = os.environ.get("OMP_NUM_THREADS")
    torch = sys.modules.get("torch")
    saved_threads = torch.get_num_threads() if torch is not None else None
    try:
        if todo and backend == "ray":
            _run_ray(todo, episode_fn, save, ray_address)
        elif todo and workers == 1:
            for spec in todo:
                save(spec, _pinned_episode(episode_fn, spec))
        elif todo:
            pool = worker_pool(workers)
            try:
                futures = {pool.submit(_pinned_episode, episode_fn, spec): spec
                           for spec in todo}
                for fut in as_completed(futures):
                    save(futures[fut], fut.result())
            except BaseException:  # Ctrl-C or a failed episode: drop the queued ones
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
    finally:
        if bar is not None:
            bar.close()
        if saved_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved_env
        if saved_threads is not None:
            torch.set_num_threads(saved_threads)
    results = []
    for spec in specs:
        path = store / f"{spec.key}.json"
        record = json.loads(path.read_text())
        problem = check_record(record, spec.key, hashes[spec.preset])
        if problem is not None:  # changed by someone else while this run went on
            raise RuntimeError(f"{path}: changed during the run ({problem}); rerun to "
                               f"recompute it")
        results.append({k: v for k, v in record.items() if k != "config_hash"})
    return results


def _run_ray(todo, episode_fn, save, ray_address):
    try:
        import ray
    except ImportError as err:  # pragma: no cover - depends on the optional extra
        raise RuntimeError("backend 'ray' needs the optional extra: pip install 'core-env[ray]'"
                           ) from err
    started = not ray.is_initialized()
    if started:
        ray.init(address=ray_address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(_pinned_episode)
        pending = {remote.remote(episode_fn, spec): spec for spec in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                save(pending.pop(ref), ray.get(ref))
    finally:
        if started:
            ray.shutdown()


def summarise(results: Sequence[dict[str, Any]], reference: str = REFERENCE_POLICY
              ) -> list[dict[str, Any]]:
    """One row per (preset, policy): mean completion rate with its 95% CI, mean utilization,
    and the paired difference to the ``reference`` policy on the seeds both have.

    Records with a ``bound`` key are clairvoyant bounds (one per preset and seed, see
    :func:`benchmarks.suites.bound_record`), not episodes. When there are any, every policy
    row also gets ``of_bound`` (mean of completed / bound over the seeds with a positive
    bound, with its 95% CI, ``bound_paired`` seeds), and each preset gets a row for the
    bound itself: its completion-rate bound (bound / arrived) with CI, the paired headroom
    over the reference policy, and the solves (methods used, seconds, largest MILP gap).
    Rows are sorted by (preset, policy).
    """
    bounds = {(r["preset"], r["seed"]): r for r in results if "bound" in r}
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in results:
        if "bound" not in r:
            by.setdefault((r["preset"], r["policy"]), {})[r["seed"]] = r
    rows = []
    for (preset, policy), eps in sorted(by.items()):
        rates = [eps[s]["completion_rate"] for s in sorted(eps)]
        mean, lo, hi = mean_ci(rates)
        row = {"preset": preset, "policy": policy, "episodes": len(rates),
               "completion_rate": mean, "ci_low": lo, "ci_high": hi,
               "utilization": sum(e["utilization"] for e in eps.values()) / len(eps)}
        ref = by.get((preset, reference))
        if ref is not None and policy != reference:
            common = sorted(set(eps) & set(ref))
            if common:
                diffs = [eps[s]["completion_rate"] - ref[s]["completion_rate"] for s in common]
                d, dlo, dhi = mean_ci(diffs)
                row.update(diff_vs_ref=d, diff_ci_low=dlo, diff_ci_high=dhi, paired=len(common))
        with_bound = [s for s in sorted(eps) if bounds.get((preset, s), {}).get("bound", 0) > 0]
        if with_bound:
            ratios = [eps[s]["completed"] / bounds[(preset, s)]["bound"] for s in with_bound]
            m, mlo, mhi = mean_ci(ratios)
            row.update(of_bound=m, of_bound_ci_low=mlo, of_bound_ci_high=mhi,
                       bound_paired=len(with_bound))
        rows.append(row)
    for preset in sorted({p for p, _ in bounds}):
        recs = [bounds[k] for k in sorted(bounds) if k[0] == preset]
        mean, lo, hi = mean_ci([r["bound"] / max(r["n_tasks"], 1) for r in recs])
        seconds = [r["lp_seconds"] + r["milp_seconds"] for r in recs]
        methods: dict[str, int] = {}
        for r in recs:
            methods[r["method"]] = methods.get(r["method"], 0) + 1
        gaps = [r["milp_gap"] for r in recs if r.get("milp_gap") is not None]
        row = {"preset": preset, "policy": recs[0]["policy"], "episodes": len(recs),
               "completion_rate": mean, "ci_low": lo, "ci_high": hi, "utilization": None,
               "is_bound": True, "bound_mean": sum(r["bound"] for r in recs) / len(recs),
               "scaling": recs[0].get("scaling"), "methods": methods,
               "solve_seconds_mean": sum(seconds) / len(seconds),
               "solve_seconds_max": max(seconds),
               "milp_gap_max": max(gaps) if gaps else None}
        ref = by.get((preset, reference), {})
        common = sorted({seed for p, seed in bounds if p == preset} & set(ref))
        if common:
            d, dlo, dhi = mean_ci([bounds[(preset, s)]["bound"] / max(bounds[(preset, s)]
                                   ["n_tasks"], 1) - ref[s]["completion_rate"] for s in common])
            row.update(diff_vs_ref=d, diff_ci_low=dlo, diff_ci_high=dhi, paired=len(common))
        rows.append(row)
    rows.sort(key=lambda r: (r["preset"], not r.get("is_bound", False), r["policy"]))
    return rows


def format_table(rows: Sequence[dict[str, Any]], reference: str = REFERENCE_POLICY) -> str:
    """Markdown table: completion rate (95% CI) and the paired difference to the reference
    policy (LARA unless the suite says otherwise).

    With clairvoyant bounds in ``rows``, a column gives each policy's completions as a share
    of the bound (mean of per-seed ratios, 95% CI), the bound's own row shows the
    completion-rate bound, and a second table describes the solves.
    """
    has_bound = any(r.get("is_bound") for r in rows)
    ref_name = "LARA" if reference == "lara" else reference
    head = (f"| preset | policy | episodes | completion rate (95% CI) | vs {ref_name}, paired "
            f"(95% CI) | utilization |")
    lines = [head + (" of bound (95% CI) |" if has_bound else ""),
             "|---|---|---|---|---|---|" + ("---|" if has_bound else "")]
    for r in rows:
        diff = (f"{100 * r['diff_vs_ref']:+.1f} pts ({100 * r['diff_ci_low']:+.1f}, "
                f"{100 * r['diff_ci_high']:+.1f})" if "diff_vs_ref" in r else "-")
        util = "-" if r["utilization"] is None else f"{r['utilization']:.3f}"
        name = f"**{r['policy']}** (clairvoyant)" if r.get("is_bound") else r["policy"]
        line = (f"| {r['preset']} | {name} | {r['episodes']} | "
                f"{100 * r['completion_rate']:.1f}% ({100 * r['ci_low']:.1f}, "
                f"{100 * r['ci_high']:.1f}) | {diff} | {util} |")
        if has_bound:
            line += (f" {100 * r['of_bound']:.1f}% ({100 * r['of_bound_ci_low']:.1f}, "
                     f"{100 * r['of_bound_ci_high']:.1f}) |" if "of_bound" in r else " - |")
        lines.append(line)
    if has_bound:
        lines += ["", "Clairvoyant bound solves (see docs/bound.md):", "",
                  "| preset | seeds | scaling | mean bound (tasks) | proven by | "
                  "solve s, mean (max) | largest MILP gap |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            if r.get("is_bound"):
                how = ", ".join(f"{k} {v}" for k, v in sorted(r["methods"].items()))
                gap = "-" if r["milp_gap_max"] is None else f"{100 * r['milp_gap_max']:.1f}%"
                lines.append(f"| {r['preset']} | {r['episodes']} | {r['scaling']} | "
                             f"{r['bound_mean']:.1f} | {how} | {r['solve_seconds_mean']:.2f} "
                             f"({r['solve_seconds_max']:.2f}) | {gap} |")
    return "\n".join(lines) + "\n"


def write_report(results: Sequence[dict[str, Any]], out: Path, meta: dict[str, Any]) -> str:
    """results.json / results.csv / table.md / completion_vs_load.png; returns the table.

    ``meta["reference"]`` names the policy of the paired differences (default LARA).

    Clairvoyant-bound records (with a ``bound`` key) go to ``bounds.csv`` and to the
    ``bounds`` list of ``results.json``; ``results.csv`` and ``episodes`` hold the episodes.
    """
    out.mkdir(parents=True, exist_ok=True)
    reference = meta.get("reference", REFERENCE_POLICY)
    rows = summarise(results, reference)
    episodes = [r for r in results if "bound" not in r]
    bounds = [r for r in results if "bound" in r]
    presets = sorted({r["preset"] for r in results})
    payload = {**meta, "code_version": code_version(),
               "presets": {p: config_record(p) for p in presets},
               "summary": rows, "episodes": episodes}
    if bounds:
        payload["bounds"] = bounds
    _write_atomic(out / "results.json", json.dumps(payload, indent=2, default=str))
    tables = [("results.csv", ["preset", "policy", "seed", *EPISODE_FIELDS], episodes)]
    if bounds:
        tables.append(("bounds.csv", list(bounds[0]), bounds))
    for name, fields, recs in tables:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in recs:
            w.writerow({k: r.get(k) for k in fields})
        _write_atomic(out / name, buf.getvalue())
    table = format_table(rows, reference)
    _write_atomic(out / "table.md", table)
    _plot_vs_load(rows, out / "completion_vs_load.png")
    return table


def _plot_vs_load(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import core_env

    # presets that differ only in their load (e.g. CoRE-v0/-Heavy/-Extreme, not CoRE-Small-v0)
    groups: dict[Any, dict[str, float]] = {}
    for p in sorted({r["preset"] for r in rows}):
        cfg = core_env.make_config(p)
        groups.setdefault(cfg.replace(load=1.0), {})[p] = cfg.workload.load
    loads = max(groups.values(), key=lambda g: (len(set(g.values())), "CoRE-v0" in g))
    if len(set(loads.values())) < 2:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in sorted({r["policy"] for r in rows}):
        pts = sorted(((loads[r["preset"]], r) for r in rows
                      if r["policy"] == policy and r["preset"] in loads), key=lambda p: p[0])
        x = [p for p, _ in pts]
        y = [100 * r["completion_rate"] for _, r in pts]
        err = [[100 * (r["completion_rate"] - r["ci_low"]) for _, r in pts],
               [100 * (r["ci_high"] - r["completion_rate"]) for _, r in pts]]
        if pts and pts[0][1].get("is_bound"):  # the clairvoyant bound: no policy reaches it
            ax.errorbar(x, y, yerr=err, marker="s", capsize=3, color="black", linestyle="--",
                        label=f"{policy} (clairvoyant)")
        else:
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=policy)
    ax.set_xlabel("load (arrival-rate multiplier)")
    ax.set_ylabel("completion rate (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp.png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)
