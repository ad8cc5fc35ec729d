"""Episodes in parallel, crash-safe: one interface over local processes and Ray.

A run is a list of :class:`EpisodeSpec` (preset, policy, seed). :func:`run_episodes` runs
the specs that have no stored result yet, writes each result as soon as it is done
(:mod:`benchmarks.store`), and returns every spec's result in order, so an interrupted run
resumes without recomputing finished episodes. Episodes run in this process
(``workers=1``), on a local pool of ``workers`` processes that die with this one
(:func:`benchmarks.processes.worker_pool`), or as Ray tasks (``backend="ray"``, the ``ray``
extra); every episode is a pure function of its spec, so all three give identical results::

    specs = [EpisodeSpec("CoRE-Small-v0", "lara", seed) for seed in range(3)]
    results = run_episodes(specs, Path("results/mine"), workers=2)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

from benchmarks import store
from benchmarks.processes import worker_pool

BACKENDS = ("local", "ray")
"""Where episodes run."""


@dataclasses.dataclass(frozen=True)
class EpisodeSpec:
    """One benchmark episode: a policy (a name or ``module:Factory`` spec) on a preset with a
    seed. ``parsed`` is the policy's :class:`~mara_agents.policy_spec.PolicySpec` when the
    caller has parsed it already (the workers then build from it)."""

    preset: str
    policy: str
    seed: int
    parsed: Any = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """The name of its result file (:func:`benchmarks.store.file_key`)."""
        return store.file_key(self.preset, self.policy, self.seed)


class EpisodeError(RuntimeError):
    """An episode failed: ``policy <spec> on <preset>, seed <s>: <the original message>``,
    raised from the original exception (through a process pool, its traceback is the
    cause's text). ``origin`` says where it was raised (``"ValueError in act, mysched.py,
    line 12"``)."""

    def __init__(self, message: str, origin: str = "") -> None:
        super().__init__(message, origin)
        self.origin = origin

    def __str__(self) -> str:
        return str(self.args[0])

    @classmethod
    def wrap(cls, error: BaseException, policy: str, preset: str,
             seed: int | None = None) -> EpisodeError:
        """The error naming the policy, the preset and the seed (None: while building)."""
        import traceback

        where = ""
        frames = traceback.extract_tb(error.__traceback__)
        if frames:
            last = frames[-1]
            where = f" in {last.name}, {last.filename}, line {last.lineno}"
        at = "" if seed is None else f", seed {seed}"
        return cls(f"policy {policy} on {preset}{at}: {error}",
                   f"{type(error).__name__}{where}")


def run_episode_spec(spec: EpisodeSpec) -> dict[str, Any]:
    """Run one episode and return its statistics (the default episode function), with its
    group counts (``groups``, :mod:`core_env.audit`).

    Raises:
        EpisodeError: whatever building or running the policy raised, naming the policy,
            the preset and the seed.
    """
    import core_env
    from mara_agents.policy import make_policy, run_episode

    try:
        base = core_env.parallel_env(preset=spec.preset)
        env, policy = make_policy(spec.parsed or spec.policy, base, preset=spec.preset)
        stats = run_episode(env, policy, spec.seed)
    except Exception as e:
        raise EpisodeError.wrap(e, spec.policy, spec.preset, spec.seed) from e
    return {"preset": spec.preset, "policy": spec.policy, "seed": spec.seed,
            **{k: stats[k] for k in store.EPISODE_FIELDS}, "groups": stats["groups"]}


EPISODE_THREADS = 1
"""torch / OpenMP intra-op threads while episodes run. The outputs of torch models (the FM
forecaster) differ in the last bits with the thread count (measured: 1 and 2 threads give
different forecasts), so without a fixed count results would depend on the machine's cores
and the backend (Ray workers default to 1 thread, pool workers to all cores)."""


def pin_threads() -> None:
    """Use :data:`EPISODE_THREADS` threads in this process, for torch imported now or later."""
    os.environ["OMP_NUM_THREADS"] = str(EPISODE_THREADS)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != EPISODE_THREADS:
        torch.set_num_threads(EPISODE_THREADS)


def pinned_episode(episode_fn: Callable[[Any], Any], spec: Any) -> Any:
    """``episode_fn(spec)`` with the thread count pinned (what every backend runs)."""
    pin_threads()
    return episode_fn(spec)


@contextlib.contextmanager
def _progress(total: int, label: str | None) -> Iterator[Callable[[], None]]:
    """A function advancing a tqdm bar labelled ``label`` (a no-op without a label)."""
    if not label or not total:
        yield lambda: None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=label, unit="ep")
    try:
        yield lambda: bar.update(1)
    finally:
        bar.close()


@contextlib.contextmanager
def _threads_restored() -> Iterator[None]:
    """Restore this process's ``OMP_NUM_THREADS`` and (if torch was already imported) its
    torch thread count afterwards; an episode that imports torch keeps 1 thread."""
    saved_env = os.environ.get("OMP_NUM_THREADS")
    torch = sys.modules.get("torch")
    saved_threads = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        if saved_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved_env
        if torch is not None and saved_threads is not None:
            torch.set_num_threads(saved_threads)


def _dispatch(fn: Callable[[Any], Any], items: Sequence[Any], workers: int,
              done: Callable[[int, Any], None]) -> None:
    """``done(i, fn(items[i]))`` for every item, threads pinned: in this process
    (``workers=1``, its thread settings restored afterwards) or on a local pool."""
    if workers > 1:
        _on_pool(workers, fn, items, done)
        return
    with _threads_restored():
        for i, x in enumerate(items):
            done(i, pinned_episode(fn, x))


def map_pinned(fn: Callable[[Any], Any], items: Sequence[Any], workers: int,
               progress: str | None = None) -> list[Any]:
    """``[fn(x) for x in items]`` with threads pinned, on ``workers`` local processes (1: in
    this process), in order; with a tqdm bar labelled ``progress`` if given."""
    out: list[Any] = [None] * len(items)
    with _progress(len(items), progress) as tick:
        def done(i: int, result: Any) -> None:
            out[i] = result
            tick()

        _dispatch(fn, items, workers, done)
    return out


def _on_pool(workers: int, fn: Callable[[Any], Any], items: Sequence[Any],
             done: Callable[[int, Any], None]) -> None:
    """``done(i, fn(items[i]))`` for every item as it finishes on ``workers`` local processes
    (``fn`` must be picklable: a module-level function). On an error or Ctrl-C the queued
    items are cancelled and the pool is not waited for."""
    pool = worker_pool(workers)
    try:
        futures = {pool.submit(pinned_episode, fn, x): i for i, x in enumerate(items)}
        for fut in as_completed(futures):
            done(futures[fut], fut.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def run_episodes(specs: Sequence[EpisodeSpec], out: Path,
                 episode_fn: Callable[[EpisodeSpec], dict[str, Any]] = run_episode_spec,
                 backend: str = "local", workers: int = 2, ray_address: str | None = None,
                 progress: bool = True, policy_hashes: dict[str, str | None] | None = None,
                 fresh: bool = False) -> list[dict[str, Any]]:
    """Run the specs that have no result file yet (``fresh``: every spec); return every
    spec's result, in order.

    Crash safety: every finished episode is written atomically as soon as it is done, so
    killing the run at any moment (Ctrl-C, SIGKILL) loses at most the episodes in flight,
    and rerunning resumes where it stopped with the same final results. On start, temporary
    files of killed writers are removed, invalid stored results are moved aside and
    recomputed (:func:`benchmarks.store.clean`), and ``<out>/manifest.json`` records each
    preset's config hash and the code versions: resuming into a folder whose episodes were
    run with a different configuration of a preset raises ``ValueError``. ``policy_hashes``
    (policy name -> fingerprint of its weights, or None) is stored with every episode of
    those policies; a stored episode of another fingerprint (other weights, an edited
    ``module:Factory`` source) is recomputed. With ``progress``, reusing stored episodes
    says so on stderr (how many of each policy, and the key they were stored under).

    Determinism: every backend runs episodes with torch/OpenMP pinned to
    :data:`EPISODE_THREADS` threads (serially, this process's setting is restored after the
    run if torch was already imported; if an episode imports torch, it keeps 1 thread).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected an integer >= 1, got {workers!r}")
    episodes = out / "episodes"
    episodes.mkdir(parents=True, exist_ok=True)
    store.update_manifest(out, [s.preset for s in specs])
    hashes = {p: store.config_hash(p) for p in {s.preset for s in specs}}
    known: dict[str, str] = {k: v for k, v in (policy_hashes or {}).items() if v is not None}
    store.clean(episodes, hashes, known)
    todo = [s for s in specs if fresh or not (episodes / f"{s.key}.json").exists()]
    if progress and len(todo) < len(specs):
        print(reuse_message(specs, todo, known, hashes), file=sys.stderr, flush=True)

    def save(spec: EpisodeSpec, result: dict[str, Any]) -> None:
        record = {**result, "config_hash": hashes[spec.preset]}
        if spec.policy in known:
            record["policy_hash"] = known[spec.policy]
        problem = store.check_record(record, spec.key, hashes[spec.preset],
                                     known.get(spec.policy))
        if problem is not None:
            raise RuntimeError(f"episode {spec.key}: the episode function returned an "
                               f"invalid result ({problem})")
        store.write_atomic(episodes / f"{spec.key}.json", json.dumps(record))
        tick()

    with _progress(len(todo), "episodes" if progress else None) as tick:
        if todo and backend == "ray":
            with _threads_restored():
                _run_ray(todo, episode_fn, save, ray_address)
        elif todo:
            _dispatch(episode_fn, todo, workers, lambda i, result: save(todo[i], result))
    return [_read(episodes / f"{spec.key}.json", spec, hashes, known) for spec in specs]


def reuse_message(specs: Sequence[EpisodeSpec], todo: Sequence[EpisodeSpec],
                  policy_hashes: dict[str, str], config_hashes: dict[str, str | None]) -> str:
    """``reusing N stored episodes (key ...)``: per policy, how many stored episodes a run
    reuses and what they are keyed by (the policy's fingerprint, else the preset's config
    hash alone)."""
    again = set(todo)
    reused: dict[str, list[EpisodeSpec]] = {}
    for s in specs:
        if s not in again:
            reused.setdefault(s.policy, []).append(s)
    lines = []
    for policy, items in reused.items():
        configs = ", ".join(sorted({str(config_hashes.get(s.preset)) for s in items}))
        key = (f"policy {policy_hashes[policy]}, config {configs}" if policy in policy_hashes
               else f"config {configs}, code shipped with the package")
        lines.append(f"  {policy}: reusing {len(items)} stored episodes (key {key})")
    total = sum(len(v) for v in reused.values())
    return (f"reusing {total} stored episodes (--fresh recomputes them):\n"
            + "\n".join(lines))


def _read(path: Path, spec: EpisodeSpec, hashes: dict[str, str | None],
          policy_hashes: dict[str, str]) -> dict[str, Any]:
    record = json.loads(path.read_text())
    problem = store.check_record(record, spec.key, hashes[spec.preset],
                                 policy_hashes.get(spec.policy))
    if problem is not None:  # changed by someone else while this run went on
        raise RuntimeError(f"{path}: changed during the run ({problem}); rerun to recompute it")
    return {k: v for k, v in record.items() if k not in ("config_hash", "policy_hash")}


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
        remote = ray.remote(pinned_episode)
        pending = {remote.remote(episode_fn, spec): spec for spec in todo}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                save(pending.pop(ref), ray.get(ref))
    finally:
        if started:
            ray.shutdown()
