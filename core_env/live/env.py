"""The live PettingZoo env: the simulator's contract over real training jobs (SPEC §8).

:class:`LiveSchedulerEnv` is :class:`~core_env.env.CoreSchedulerEnv` with one thing changed:
where a task's observed loss comes from. Every slot, each task that nodes picked runs one slot
of real training on a worker of the runtime (one work unit per node, k nodes = synchronous
data parallelism with a k-times larger batch) and its real validation loss is what the policy
sees. Arrivals, deadlines, caps, masks, rewards and the shaping identity, ``info["episode"]``
and the observation layout are the simulator's (the same :func:`core_env.dynamics.step`
runs, with a ``loss_hook``), so any policy runs on it unchanged.

**Work.** The observation's work column is the simulator's *model* of progress: k nodes add
``k**alpha`` single-node units per slot, alpha the job variant's fitted exponent (its pilot
runs, :mod:`core_env.live.pilots`); the job itself trains k units of samples. Whether real
progress follows that model is what the replayed simulator measures (:mod:`core_env.live.
record`). Live presets charge no switching cost in work (the work clock: a slot ends when
every task has done its work); moving a job's state costs seconds, which are measured.

**Faults.** A worker that dies loses only its slot in flight (no progress, no observation,
the job's last end-of-slot state is kept); its node is masked to idle for the next slot and
its worker restarted at that slot's end. A job that raises, returns a non-finite loss or
overruns ``time_limit`` is *failed*: it leaves its slot, counts as expired, and its error is
kept in :attr:`LiveSchedulerEnv.failures`.

**What it reports.** ``info["episode"]`` has the simulator's keys plus ``failed``,
``lost_slots``, ``worker_deaths``, ``migrations`` (slots in which a job ran on another
worker than in its previous slot) and ``migration_bytes``: deterministic for a seed on one
machine, like everything in the observations, rewards and infos (PettingZoo's seed test
passes). Wall-clock measurements are kept out of the infos: :attr:`LiveSchedulerEnv.
slot_timing` (the last slot) and :meth:`LiveSchedulerEnv.episode_timing` (the episode so far;
also in the record's statistics) give, in seconds summed over slots: ``slot`` (wall time
inside :meth:`step`), ``job`` (restore + train + save on the workers, wall time summed over
jobs), ``restore``, ``save``, ``train_cpu`` (CPU time inside the jobs' ``train``) and
``train_makespan`` (per slot, the least wall time that training could take on this machine's
CPUs: the longest job's train CPU time, or all of it spread over the CPUs if that is longer)
and ``train_ideal`` (per slot, the wall time the jobs' train CPU times take with the runtime's
dispatch and no overhead at all, one process per job: :func:`~core_env.live.runtime.
shared_makespan`); ``overhead_fraction`` = 1 - train_ideal / slot, the share of the slots'
wall time the runtime itself costs (the driver, serialisation, transfer, restarts), and
``packing_fraction`` = (train_ideal - train_makespan) / slot, the share lost because a job is
one process (a k-node job cannot be spread over idle CPUs; zero with a CPU per node).
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from core_env import dynamics, pmath
from core_env.config import CoreConfig
from core_env.env import CoreSchedulerEnv
from core_env.live.jobs import JobSpec
from core_env.live.live_workload import LiveWorkload, generate_live_workload
from core_env.live.pilots import PILOTS, Pilots, load_pilots
from core_env.live.record import LiveRecord
from core_env.live.runtime import LocalRuntime, Runtime, SlotTask, shared_makespan
from core_env.utils.system import cpu_count
from core_env.workload import Workload, validate_workload

SLOT_TIMES = ("job", "train_cpu", "train_makespan", "train_ideal", "restore", "save")
"""The seconds measured per slot besides the slot's own wall time (module docstring)."""

RUNTIME_BACKENDS = ("local", "ray")
"""The runtimes live mode can start: :class:`LocalRuntime` and
:class:`~core_env.live.ray_runtime.RayRuntime`."""


def make_runtime(backend: str, n_nodes: int, time_limit: float = 600.0,
                 ray_address: str | None = None, max_running: int | None = None) -> Runtime:
    """A runtime of ``n_nodes`` workers: ``"local"`` processes or ``"ray"`` actors (joining
    the cluster at ``ray_address``; ``None``: a local Ray). ``max_running``: at most that
    many jobs train at once on the local backend (:class:`LocalRuntime`; a machine with fewer
    CPUs than nodes); Ray places each actor on a CPU of its own.

    Raises:
        ValueError: an unknown backend, or ``max_running`` with ``backend="ray"``.
    """
    if backend == "local":
        return LocalRuntime(n_nodes, time_limit, max_running=max_running)
    if backend == "ray":
        if max_running is not None:
            raise ValueError("max_running: only the local backend shares CPUs between "
                             "nodes; a Ray actor reserves a CPU of its own")
        from core_env.live.ray_runtime import RayRuntime  # needs the ray extra
        return RayRuntime(n_nodes, time_limit, address=ray_address)
    raise ValueError(f"backend: expected one of {RUNTIME_BACKENDS}, got {backend!r}")


CLOCKS = ("work", "wall")
"""The live env's clocks (see :class:`LiveSchedulerEnv`)."""

LIVE_KEYS = ("failed", "lost_slots", "worker_deaths", "migrations", "migration_bytes")
"""The keys live mode adds to ``info["episode"]``."""


class LiveSchedulerEnv(CoreSchedulerEnv):
    """The scheduler over real training jobs (see the module docstring).

    Args:
        config: a :class:`CoreConfig` (or ``preset`` and flat ``overrides`` as for
            :class:`CoreSchedulerEnv`; the default preset is ``Live-Small-v0``).
        pilots: the pilot set the tasks come from: a :class:`Pilots`, a pilot file (a path
            ending in ``.npz``, e.g. written by :meth:`Pilots.save`) or the name of a
            shipped set. A set whose curves are shorter than the preset's largest required
            work clips the tasks' required work to its length, with a warning.
        runtime: a runtime to use (an object with ``run_slot``, ``alive``, ``restart`` and
            ``close``, e.g. a :class:`LocalRuntime` or a
            :class:`~core_env.live.ray_runtime.RayRuntime` shared by several envs);
            ``None``: the env starts one of ``n_nodes`` workers at its first reset, of
            ``backend``, and closes it in :meth:`close`.
        backend: the runtime the env starts: ``"local"`` (a process per node) or ``"ray"``
            (a Ray actor per node; ``ray_address`` = the cluster to join, ``None`` = a local
            Ray).
        time_limit: seconds one job's slot may take (for the runtime the env starts).
        clock: ``"work"`` (default): a slot ends when every task has trained its one work
            unit per slot; deterministic losses for a seed on the local backend. ``"wall"``:
            a slot is ``slot_seconds`` on each task's worker; each task trains whole work
            units while its time lasts (at least one; a unit that has begun finishes), so a
            task's work is what its worker managed: stragglers, a loaded machine and a moved
            job's restore (counted in the slot) cost progress. The
            work column then adds the model's per-slot gain (``k**alpha``) once per unit
            trained, and the record holds that work. Not deterministic.
        slot_seconds: the wall clock's slot length in seconds (``0 < slot_seconds <
            time_limit``); only with ``clock="wall"``.
    """

    metadata = {"name": "core_env_live_v0", "render_modes": ["ansi"],
                "is_parallelizable": True}

    def __init__(self, config: CoreConfig | None = None, *, preset: str | None = None,
                 pilots: Pilots | str | Path | None = PILOTS, runtime: Any = None,
                 backend: str = "local", ray_address: str | None = None,
                 time_limit: float = 60.0, clock: str = "work",
                 slot_seconds: float | None = None, render_mode: str | None = None,
                 **overrides: Any) -> None:
        if config is None:
            from core_env.live.live_presets import live_config

            config = live_config("Live-Small-v0" if preset is None else preset, **overrides)
            preset, overrides = None, {}
        super().__init__(config, preset=preset, render_mode=render_mode, **overrides)
        self.pilots = self._load_pilots(pilots)
        if not (isinstance(time_limit, (int, float)) and time_limit > 0):
            raise ValueError(f"time_limit: expected seconds > 0, got {time_limit!r}")
        self.time_limit = float(time_limit)
        if clock not in CLOCKS:
            raise ValueError(f"clock: expected one of {CLOCKS}, got {clock!r}")
        if clock == "wall":
            if isinstance(slot_seconds, bool) or not isinstance(slot_seconds, (int, float)) \
                    or not 0 < slot_seconds < self.time_limit:
                raise ValueError(f"slot_seconds: expected seconds in (0, time_limit = "
                                 f"{self.time_limit:g}) with clock='wall', got "
                                 f"{slot_seconds!r}")
            slot_seconds = float(slot_seconds)
        elif slot_seconds is not None:
            raise ValueError(f"slot_seconds: only with clock='wall', got {slot_seconds!r}")
        self.clock, self.slot_seconds = clock, slot_seconds
        if backend not in RUNTIME_BACKENDS:
            raise ValueError(f"backend: expected one of {RUNTIME_BACKENDS}, got {backend!r}")
        self.backend, self.ray_address = backend, ray_address
        if runtime is not None and len(getattr(runtime, "alive", ())) != \
                config.cluster.n_nodes:
            raise ValueError(f"runtime: expected one worker per node "
                             f"({config.cluster.n_nodes}), got a runtime of "
                             f"{len(getattr(runtime, 'alive', ()))}")
        self._own_runtime = runtime is None
        self._warmed: set[str] = set()
        self.runtime = runtime
        self.live: LiveWorkload | None = None
        self.record: LiveRecord | None = None
        self.failures: dict[int, str] = {}
        self._reset_counters()

    def _load_pilots(self, pilots: Pilots | str | Path | None) -> Pilots | None:
        """The ``pilots`` argument as a checked :class:`Pilots` set (see the class)."""
        pilots = load_pilots(pilots) if isinstance(pilots, (str, Path)) else pilots
        if not isinstance(pilots, Pilots):
            raise ValueError(f"pilots: expected a Pilots set, a pilot file or a shipped "
                             f"set's name, got {type(pilots).__name__}")
        most = self.config.workload.required_work[1]
        if pilots.units < most:
            warnings.warn(f"pilots: the curves cover {pilots.units} work units, and this "
                          f"preset's tasks need up to {most:g}: their required work is "
                          f"clipped to {pilots.units} (record longer pilots: "
                          f"make_pilots(..., units={math.ceil(most)}))", stacklevel=3)
        return pilots

    # ----- episode -----
    def _reset_counters(self) -> None:
        self._states: dict[int, bytes] = {}
        self._last_node: dict[int, int] = {}
        self._dead: set[int] = set()  # nodes whose worker died, idle until restarted
        self.counts = dict.fromkeys(LIVE_KEYS, 0)
        self.timing = dict.fromkeys(("slot",) + SLOT_TIMES, 0.0)
        self._slot_timing: dict[str, float] = {}

    def _episode_workload(self, seed: int | None, options: dict) -> Workload:
        """Draw (or, with ``options["live_workload"]``, replay) the live workload, start the
        runtime if needed, restart any dead worker and start the episode's record."""
        live = self._live_workload(options)
        if self.runtime is None:
            self.runtime = make_runtime(self.backend, self.config.cluster.n_nodes,
                                        self.time_limit, self.ray_address)
        self._warm(live.jobs)
        for node, alive in enumerate(self.runtime.alive):
            if not alive:
                self.runtime.restart(node)
        self.live = live
        self.failures = {}
        self._reset_counters()
        self.record = LiveRecord.start(self.config, seed, live, self.pilots, self.clock,
                                        self.slot_seconds)
        return live.workload

    def _warm(self, jobs: tuple[JobSpec, ...]) -> None:
        """Warm the runtime with one job of each kind not warmed yet (its imports and data,
        off the clock; a RuntimeError names a job that cannot be built)."""
        kinds: dict[str, JobSpec] = {}
        for job in jobs:
            if job.kind not in self._warmed:
                kinds.setdefault(job.kind, job)
        if kinds and hasattr(self.runtime, "warm"):
            self.runtime.warm(list(kinds.values()))
            self._warmed |= set(kinds)

    def _live_workload(self, options: dict) -> LiveWorkload:
        """The episode's live workload: drawn, or ``options["live_workload"]`` checked."""
        if options.get("workload") is not None:
            raise ValueError("options['workload']: a live episode needs jobs; pass "
                             "options['live_workload'] (a LiveWorkload) instead")
        live = options.get("live_workload")
        if live is None:
            # reset() seeded the generator; only LiveSessionEnv (its own _live_workload) has
            # no pilots
            assert self._rng is not None and self.pilots is not None
            live = generate_live_workload(self.config, self._rng, self.pilots)
        elif not isinstance(live, LiveWorkload):
            raise ValueError(f"options['live_workload']: expected a LiveWorkload, got "
                             f"{type(live).__name__}")
        live = live._replace(workload=validate_workload(live.workload, self.config))
        if len(live.jobs) != live.workload.n_tasks:
            raise ValueError(f"options['live_workload']: {len(live.jobs)} jobs for "
                             f"{live.workload.n_tasks} tasks")
        return live

    def _advance(self, joint: np.ndarray) -> dynamics.StepResult:
        """One slot: really train every task the nodes picked (see the module docstring)."""
        t0 = time.perf_counter()
        dead = sorted(self._dead)
        if dead:  # a dead node runs as idle; a non-idle action on it is counted
            self.sim.illegal[0] += int((joint[dead] != 0).sum())
            joint[dead] = 0
        self._slot_timing = dict.fromkeys(SLOT_TIMES, 0.0)
        res = dynamics.step(self.sim, joint[None, :], self.params, loss_hook=self._run_slot)
        for node in dead:  # dead for a whole slot: restart its worker
            self.runtime.restart(node)
            self._dead.discard(node)
        for node, alive in enumerate(self.runtime.alive):
            if not alive and node not in self._dead:
                self._dead.add(node)
                self.counts["worker_deaths"] += 1
        self._slot_timing["slot"] = time.perf_counter() - t0
        for k, v in self._slot_timing.items():
            self.timing[k] += v
        return res

    def _episode_stats(self) -> dict[str, Any]:
        stats = {**super()._episode_stats(), **self.counts}
        assert self.record is not None  # reset() started it
        self.record.finish({**stats, "timing": self.episode_timing()}, self.failures)
        return stats

    @property
    def slot_timing(self) -> dict[str, float]:
        """Measured seconds of the last slot (see the module docstring)."""
        return dict(self._slot_timing)

    def episode_timing(self) -> dict[str, float]:
        """Measured seconds of the episode so far, with its ``overhead_fraction`` and
        ``packing_fraction`` (see the module docstring)."""
        timing = dict(self.timing)
        slot = timing["slot"]
        timing["overhead_fraction"] = 1.0 - timing["train_ideal"] / slot if slot > 0 else 0.0
        timing["packing_fraction"] = ((timing["train_ideal"] - timing["train_makespan"]) / slot
                                      if slot > 0 else 0.0)
        return timing

    # ----- one slot of real training (the dynamics' loss hook) -----
    def _run_slot(self, trained: dynamics.TrainedSlots
                  ) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
        assert self.live is not None and self.record is not None
        t = int(self.sim.t[0])
        acts = trained.actions[0]
        tasks = {}
        for i in range(trained.tasks.shape[0]):
            m = int(trained.tasks[i])
            nodes = tuple(int(n) for n in np.flatnonzero(acts == trained.slots[i] + 1))
            tasks[m] = SlotTask(self.live.jobs[m], self._states.get(m), 1, nodes,
                                self.slot_seconds)
        results = self.runtime.run_slot(tasks) if tasks else {}
        cpus: list[float] = []
        work = trained.work.copy()
        if self.clock == "wall":  # the model's gain once per unit trained
            before = self.sim.slot_work[0, trained.slots].astype(np.float64)
            units = np.array([max(results[m].units, 1) for m in tasks], dtype=np.float64)
            work = (before + (trained.work - before) * units).astype(np.float32)
        ll = np.zeros(trained.tasks.shape[0])
        outcome = np.full(trained.tasks.shape[0], dynamics.OBSERVED, dtype=np.int8)
        for i, (m, task) in enumerate(tasks.items()):
            r = results[m]
            self._slot_timing["job"] += r.seconds
            self._slot_timing["train_cpu"] += r.train_cpu_seconds
            cpus.append(r.train_cpu_seconds)
            self._slot_timing["restore"] += r.restore_seconds
            self._slot_timing["save"] += r.save_seconds
            if r.error is None:
                if m in self._last_node and self._last_node[m] != r.node:
                    self.counts["migrations"] += 1
                    self.counts["migration_bytes"] += len(task.state or b"")
                self._last_node[m] = r.node
                self._states[m] = r.state
                ll[i] = pmath.log(r.loss)
                self.record.observe(m, t, len(task.nodes), float(work[i]), r.loss,
                                   max(int(r.units), 1))
            elif r.error == "worker died":
                outcome[i] = dynamics.LOST
                self.counts["lost_slots"] += 1
            else:
                outcome[i] = dynamics.FAILED
                self.counts["failed"] += 1
                self.failures[m] = r.error
                self._states.pop(m, None)
        # the least wall time the training alone could take on this machine's CPUs, and what
        # it takes with one process per job and the runtime's dispatch, at no overhead
        if cpus:
            self._slot_timing["train_makespan"] = max(max(cpus), sum(cpus) / cpu_count())
            self._slot_timing["train_ideal"] = shared_makespan(
                cpus, cpu_count(), getattr(self.runtime, "max_running", len(cpus)))
        return (ll, outcome, work) if self.clock == "wall" else (ll, outcome)

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        obs = super()._observations()
        for node in self._dead:  # a dead node may only idle
            obs[self.possible_agents[node]]["action_mask"][1:] = 0
        return obs

    def close(self) -> None:
        """Stop the runtime's workers (if the env started them)."""
        if self._own_runtime and self.runtime is not None:
            self.runtime.close()
            self.runtime = None
