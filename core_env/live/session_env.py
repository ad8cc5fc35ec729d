"""The live session env: your own jobs, submitted while the scheduler runs (SPEC §8).

:class:`LiveSessionEnv` is the live env with an open-ended episode: it starts with no task,
and each :class:`~core_env.live.submissions.Submission` becomes a task that arrives at the
next slot boundary, with the submission's target loss, deadline and node cap. Everything
else is the live env's: a policy sees the same observation, masks and rewards, each slot
trains the picked jobs for real on the runtime's workers (local processes or a Ray
cluster), failed jobs and dead workers are handled as in :class:`~core_env.live.env.
LiveSchedulerEnv`, and the episode's record and ``info["episode"]`` are kept. The episode
ends only after :meth:`LiveSessionEnv.close_submissions`, once no task is left.

**What the policy sees.** ``arrivals_open`` is 1 until submissions are closed; ``time`` is
the slot over the preset's episode length, capped at 1 (a session has no length). A
submitted job that was never piloted has no reference curve: its observations are its real
losses, as for every live task; what the session must assume is its scaling exponent alpha
(the work column adds ``k**alpha`` per slot on k nodes), taken in this order
(:meth:`LiveSessionEnv.prior_alpha`): the submission's ``alpha``; the pilot set's fitted
alpha of the same kind and variant; the median of the pilot set's alphas of the same kind;
the job class's ``ALPHA`` attribute (a kind's default); :data:`DEFAULT_ALPHA`.

:class:`core_env.live.session.LiveSession` drives one (and re-exports these names).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from core_env import dynamics, pmath
from core_env.config import CoreConfig
from core_env.curves import LOG_WORK_GRID
from core_env.live.env import LiveSchedulerEnv
from core_env.live.jobs import JobSpec, job_class
from core_env.live.live_workload import LiveWorkload, reference_table
from core_env.live.pilots import PILOTS, Pilots
from core_env.live.submissions import Submission, deadline_slots
from core_env.state import ACTIVE, EXPIRED, FUTURE, NEVER, QUEUED, SUCCEEDED, allocate
from core_env.utils.checks import check_int, fail
from core_env.workload import Workload, node_speeds

DEFAULT_ALPHA = 0.5
"""The scaling exponent assumed for a job nothing else informs: k nodes add ``k**0.5`` work
units per slot (about the shipped pilots' fit for ``mlp-digits`` with the learning rate
scaled by sqrt(k), 0.47; between keeping the learning rate, 0.05, and scaling it with k,
0.87)."""

OPEN = NEVER
"""``arrival_slots`` and the step limit of a session whose submissions are open."""

STATUSES = ("waiting", "queued", "running", "completed", "expired", "failed")
"""A job's status in a session: submitted but not yet arrived (it arrives at the next slot
boundary), waiting for a visible slot, visible (trainable), done, missed, failed."""


class LiveSessionEnv(LiveSchedulerEnv):
    """An open-ended live episode whose tasks are submitted jobs (see the module docstring).

    Args:
        config: the layout (nodes, visible slots K, longest deadline ``window[1]``, node
            speeds) as for :class:`LiveSchedulerEnv`, or ``preset`` (default
            ``Live-Small-v0``) with flat overrides; its arrival settings are not used.
        preset: a live preset id (see ``config``).
        pilots: a pilot set (:class:`Pilots`, a pilot file or a shipped set's name; default
            the shipped one) whose fitted alphas are the priors of jobs of its kinds, or
            ``None``.
        capacity: the most jobs one session takes (the task table's rows).
        **kwargs: the flat overrides, and ``runtime``, ``backend``, ``ray_address``,
            ``time_limit``, ``clock``, ``slot_seconds`` and ``render_mode`` as for
            :class:`LiveSchedulerEnv`.
    """

    metadata = {"name": "core_env_live_session_v0", "render_modes": ["ansi"],
                "is_parallelizable": True}

    def __init__(self, config: CoreConfig | None = None, *, preset: str | None = None,
                 pilots: Pilots | str | Path | None = PILOTS, capacity: int = 256,
                 **kwargs: Any) -> None:
        super().__init__(config, preset=preset, pilots=pilots, **kwargs)
        self.capacity = check_int("capacity", capacity, 1, 100_000)
        self.sim = allocate(self.config, 1, max_tasks=self.capacity)
        self.submissions: list[Submission] = []
        self.task_info: list[dict[str, Any]] = []
        self.failed_slot: dict[int, int] = {}
        self.closed = False

    def _load_pilots(self, pilots: Pilots | str | Path | None) -> Pilots | None:
        return None if pilots is None else super()._load_pilots(pilots)

    # ----- episode -----
    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an empty session (``seed`` draws node speeds where the preset draws them
        and seeds the policy's episode; ``options`` are not accepted)."""
        if options:
            raise ValueError(f"options: a session takes its tasks from submit(), got "
                             f"{sorted(options)}")
        self._open()
        self.submissions, self.task_info, self.failed_slot = [], [], {}
        return super().reset(seed=seed)

    def _advance(self, joint: np.ndarray):
        t, failed = int(self.sim.t[0]), set(self.failures)
        res = super()._advance(joint)
        for m in set(self.failures) - failed:
            self.failed_slot[m] = t + 1  # it left at the end of slot t
        return res

    def _open(self, open_: bool = True) -> None:
        t = OPEN if open_ else int(self.sim.t[0])
        self.closed = not open_
        self.params = dataclasses.replace(self.params, arrival_slots=t, max_steps=OPEN)
        self._observer.arrival_slots = t

    def _live_workload(self, options: dict) -> LiveWorkload:
        m, g = 0, LOG_WORK_GRID.shape[0]
        assert self._rng is not None  # reset() seeded it
        empty = Workload(arrival=np.zeros(m, np.int64), deadline=np.zeros(m, np.int64),
                         log_target=np.zeros(m), cap=np.ones(m, np.int64),
                         alpha=np.ones(m), family=np.zeros(m, np.int8),
                         log_loss=np.zeros((m, g), np.float32),
                         true_log_loss=np.zeros((m, g), np.float32),
                         speeds=node_speeds(self.config, self._rng))
        return LiveWorkload(empty, (), np.zeros(0, np.int64))

    def close_submissions(self) -> None:
        """Take no more submissions: the episode terminates once every task has finished
        (``arrivals_open`` reads 0 from now on)."""
        self._open(False)

    # ----- submissions -----
    def prior_alpha(self, sub: Submission) -> tuple[float, str]:
        """The scaling exponent a submission's task gets, and where it comes from: one of
        ``"submitted"``, ``"pilots"`` (its variant's fit), ``"kind pilots"`` (the median
        of its kind's fits), ``"kind default"`` (its class's ``ALPHA``), ``"default"``
        (:data:`DEFAULT_ALPHA`)."""
        if sub.alpha is not None:
            return float(sub.alpha), "submitted"
        job = sub.job
        if self.pilots is not None:
            same = [v for v, (kind, variant) in enumerate(self.pilots.specs)
                    if kind == job.kind and variant == job.variant]
            if same:
                return float(self.pilots.alpha[same[0]]), "pilots"
            kind = [v for v, (k, _) in enumerate(self.pilots.specs) if k == job.kind]
            if kind:
                return float(np.median(self.pilots.alpha[kind])), "kind pilots"
        try:
            alpha = getattr(job_class(job.kind), "ALPHA", None)
        except (ImportError, ValueError):  # not importable here: the workers decide
            alpha = None
        if alpha is not None:
            return float(alpha), "kind default"
        return DEFAULT_ALPHA, "default"

    def submit(self, sub: Submission) -> int:
        """Add a job: it arrives at the next slot boundary. Builds it once on every worker
        first (imports, data), so a job that cannot be built is refused here.

        Returns:
            The job's task id (its row in the task table, the record and the report).

        Raises:
            RuntimeError: the session is not running (reset it first) or is closed.
            ValueError: not a :class:`Submission`; the session is full (``capacity``);
                ``max_nodes`` above the cluster's nodes; a deadline longer than the
                layout's ``window[1]`` or in seconds on the work clock; a job that cannot
                be built on the workers (the message names it and the error).
        """
        if not self.agents:
            raise RuntimeError("submit: the session is not running (call reset first)")
        if self.closed:
            raise RuntimeError("submit: submissions are closed")
        if not isinstance(sub, Submission):
            fail("submission", sub, "a Submission")
        m = int(self.sim.n_tasks[0])
        if m >= self.capacity:
            raise ValueError(f"submit: the session is full (capacity={self.capacity} jobs)")
        n = self.config.cluster.n_nodes
        if sub.max_nodes > n:
            fail("max_nodes", sub.max_nodes, f"at most the cluster's {n} nodes")
        slots = deadline_slots(sub, self.slot_seconds)
        most = self.config.workload.window[1]
        if slots > most:
            raise ValueError(f"deadline: expected at most the layout's window[1] = {most} "
                             f"slots, got {slots} (a longer one needs a larger window: "
                             f"LiveSessionEnv(window=(4, {slots})) in Python, --preset "
                             f"\"Live-Small-v0:window=(4,{slots})\" on the command line)")
        name = sub.name or f"{sub.job.kind.rpartition(':')[2]}-{m}"
        try:
            if hasattr(self.runtime, "warm"):
                self.runtime.warm([sub.job])
        except RuntimeError as e:
            raise ValueError(f"job {name!r}: refused, {e}") from e
        alpha, source = self.prior_alpha(sub)
        t = int(self.sim.t[0])
        s = self.sim
        s.w_arrival[0, m] = t + 1
        s.w_deadline[0, m] = t + 1 + slots
        log_target = float(pmath.log(np.float64(sub.target)))
        stored = np.float32(log_target)  # rounded up: a loss equal to the target reaches it
        s.w_log_target[0, m] = stored if float(stored) >= log_target else \
            np.nextafter(stored, np.float32(np.inf))
        s.w_cap[0, m] = sub.max_nodes
        s.w_alpha[0, m] = alpha
        s.n_tasks[0] = m + 1
        run = self._pilot_run(sub.job)
        live = self.live
        assert live is not None  # reset() set it
        self.live = live._replace(jobs=live.jobs + (sub.job,),
                                  pilot_run=np.append(live.pilot_run, run))
        self.submissions.append(sub)
        self.task_info.append({"name": name, "alpha": alpha, "alpha_source": source,
                               "submitted_slot": t, "submitted_at": time.time(),
                               "deadline_slots": slots})
        return m

    def _pilot_run(self, job: JobSpec) -> int:
        """The pilot run of exactly this job (kind, variant and seed), or -1."""
        if self.pilots is None:
            return -1
        for run in range(self.pilots.seed.shape[0]):
            if self.pilots.job(run) == job:
                return run
        return -1

    # ----- what is going on -----
    def pending(self) -> int:
        """Jobs submitted and not finished (waiting, queued or running)."""
        m = int(self.sim.n_tasks[0])
        return int(np.isin(self.sim.status[0, :m], (FUTURE, QUEUED, ACTIVE)).sum())

    def job_status(self, task: int) -> str:
        """One of :data:`STATUSES`."""
        code = int(self.sim.status[0, task])
        if code == EXPIRED and task in self.failures:
            return "failed"
        return {FUTURE: "waiting", QUEUED: "queued", ACTIVE: "running",
                SUCCEEDED: "completed", EXPIRED: "expired"}[code]

    def jobs(self) -> list[dict[str, Any]]:
        """One row per submitted job: its id, name, job, target, cap, alpha (and its
        source), status, slots (submitted, arrival, deadline, finished), observations,
        node-slots trained, last and best loss, error; a visible job also its nodes last
        slot, progress ``psi`` (the share of the way from its first loss to the target, in
        log loss) and ``eta``: the slots until its loss reaches the target at its cap,
        extrapolating the log-log slope of its last five losses (None without a falling
        slope), and whether that is before its deadline (``on_track``)."""
        s, t = self.sim, int(self.sim.t[0])
        seen: dict[int, list[tuple]] = {}
        for o in (self.record.obs if self.record is not None else ()):
            seen.setdefault(o[0], []).append(o)
        slot_of = {int(m): k for k, m in enumerate(s.slot_task[0]) if m >= 0}
        rows = []
        for m, (sub, info) in enumerate(zip(self.submissions, self.task_info, strict=False)):
            obs = seen.get(m, [])
            status = self.job_status(m)
            losses = [o[4] for o in obs]
            finished = None
            if status == "completed":
                finished = obs[-1][1] + 1
            elif status == "failed":
                finished = self.failed_slot.get(m)
            elif status == "expired":
                finished = int(s.w_deadline[0, m])
            row = {"id": m, "name": info["name"], "kind": sub.job.kind,
                   "variant": sub.job.variant, "seed": sub.job.seed, "target": sub.target,
                   "max_nodes": sub.max_nodes, "alpha": info["alpha"],
                   "alpha_source": info["alpha_source"], "status": status,
                   "submitted_slot": info["submitted_slot"],
                   "arrival": int(s.w_arrival[0, m]), "deadline": int(s.w_deadline[0, m]),
                   "finished_slot": finished, "observations": len(obs),
                   "node_slots": int(sum(o[2] for o in obs)),
                   "loss": losses[-1] if losses else None,
                   "best_loss": min(losses) if losses else None,
                   "error": self.failures.get(m)}
            k = slot_of.get(m)
            if k is not None:
                row["nodes"] = int(s.slot_nodes_last[0, k])
                row["psi"] = float(s.slot_psi[0, k])
                row["eta"] = self._eta(k)
                row["on_track"] = (None if row["eta"] is None
                                   else t + row["eta"] <= int(s.slot_deadline[0, k]))
            rows.append(row)
        return rows

    def _eta(self, k: int) -> int | None:
        s = self.sim
        slope = float(s.slot_slope[0, k])
        if s.slot_n_obs[0, k] < 2 or slope >= -1e-6:
            return None
        work = float(s.slot_work[0, k])
        gap = float(s.slot_log_target[0, k]) - float(s.slot_log_loss[0, k])  # < 0
        needed = math.exp(min(math.log(work) + gap / slope, 50.0)) - work
        return max(1, math.ceil(needed / float(s.slot_rate[0, k])))

    def report(self) -> dict[str, Any]:
        """The session so far: its settings, totals by status, the episode statistics and
        timing, and :meth:`jobs`."""
        jobs = self.jobs()
        totals = {status: sum(r["status"] == status for r in jobs) for status in STATUSES}
        return {"slots": int(self.sim.t[0]), "n_nodes": self.config.cluster.n_nodes,
                "clock": self.clock, "slot_seconds": self.slot_seconds,
                "submitted": len(jobs), **totals,
                "completion_rate": totals["completed"] / len(jobs) if jobs else 0.0,
                "episode": {**dynamics.episode_stats(self.sim, 0), **self.counts},
                "timing": self.episode_timing(), "jobs": jobs}

    def _episode_stats(self) -> dict[str, Any]:
        self._sync_record()
        return super()._episode_stats()

    def _sync_record(self) -> None:
        """Make the record a simulator episode of the submitted jobs: their arrivals,
        deadlines, targets, caps and alphas; reference curves where the pilot set ran the
        job, else flat at its first loss; ``LiveRecord.save`` and ``replay(record,
        curves="recorded")`` then work as for any live episode."""
        rec, s, m = self.record, self.sim, int(self.sim.n_tasks[0])
        live, workload, pilots = self.live, self.workload, self.pilots
        assert rec is not None and live is not None and workload is not None  # set by reset()
        first: dict[int, float] = {}
        for o in rec.obs:
            first.setdefault(o[0], o[4])
        run = np.asarray(live.pilot_run, dtype=np.int64)
        # a run >= 0 is one of the pilot set's (none without a set: _pilot_run)
        initial = np.array([float(pilots.initial[r]) if pilots is not None and r >= 0 else
                            first.get(i, self.submissions[i].target)
                            for i, r in enumerate(run)], dtype=np.float64)
        curves = np.stack([reference_table(initial[i], pilots.loss[r])
                           if pilots is not None and r >= 0 else
                           np.full(LOG_WORK_GRID.shape, pmath.log(initial[i]))
                           for i, r in enumerate(run)]).astype(np.float32) if m else \
            np.zeros((0, LOG_WORK_GRID.shape[0]), np.float32)
        arrival = s.w_arrival[0, :m].copy()
        slots = max(self.config.workload.arrival_slots, int(arrival.max(initial=0)) + 1)
        load = self.config.workload.load
        rate = min(max(self.config.workload.base_arrival_rate, m / (slots * load)),
                   64.0)
        rec.config = self.config.replace(arrival_slots=slots, base_arrival_rate=rate)
        rec.workload = Workload(arrival=arrival, deadline=s.w_deadline[0, :m].copy(),
                                log_target=s.w_log_target[0, :m].astype(np.float64),
                                cap=s.w_cap[0, :m].copy(),
                                alpha=s.w_alpha[0, :m].astype(np.float64),
                                family=np.zeros(m, np.int8), log_loss=curves,
                                true_log_loss=curves.copy(),
                                speeds=np.asarray(workload.speeds, np.float64))
        rec.jobs, rec.pilot_run, rec.initial = live.jobs, run, initial
        self.workload = rec.workload  # the session's tasks so far (for its group counts)

    def save_record(self, path: str | Path) -> Path:
        """Write the session's record so far (:class:`~core_env.live.record.LiveRecord`)."""
        self._sync_record()
        assert self.record is not None  # reset() started it
        return self.record.save(path)
