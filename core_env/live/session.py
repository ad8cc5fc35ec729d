"""Live sessions: your own jobs, submitted while the scheduler runs (SPEC §8).

:class:`LiveSessionEnv` (:mod:`core_env.live.session_env`, re-exported here) is the live env
with an open-ended episode: it starts with no task, and each
:class:`~core_env.live.submissions.Submission` becomes a task that arrives at the next slot
boundary; the episode ends only after :meth:`LiveSessionEnv.close_submissions`, once no task
is left.

:class:`LiveSession` drives a session: a policy (any object with ``reset(seed)`` and
``act(observations)``, e.g. from :func:`mara_agents.make_policy`) acts every slot, jobs
come from :meth:`LiveSession.submit` and from polled sources (a JSON-lines file, a folder),
a view shows the jobs while it runs (:mod:`core_env.live.status`), and
:meth:`LiveSession.report` gives every job's outcome::

    env, policy = make_policy("lara", LiveSessionEnv(preset="Live-Small-v0"))
    with LiveSession(env, policy) as session:
        session.submit(Submission(JobSpec("mymodule:MyJob"), target=0.3, deadline=40,
                                  max_nodes=4))
        session.run(until_idle=True)
        print(session.report()["jobs"])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from core_env.live.session_env import (  # noqa: F401 (re-exported)
    DEFAULT_ALPHA,
    OPEN,
    STATUSES,
    LiveSessionEnv,
)
from core_env.live.submissions import Submission

Source = Any
"""A submission source: an object whose ``poll()`` returns ``(where, Submission or
ValueError)`` pairs (:mod:`core_env.live.submissions`)."""


class LiveSession:
    """A policy scheduling submitted jobs on a :class:`LiveSessionEnv`, slot by slot (see
    the module docstring).

    Args:
        env: a :class:`LiveSessionEnv`, or a wrapper of one (e.g. the env
            :func:`mara_agents.make_policy` returns); it is reset here.
        policy: an object with ``reset(seed)`` and ``act(observations) -> actions``.
        seed: the session's seed (node speeds where drawn; the policy's).
        view: a status view (:func:`core_env.live.status.make_view`) or ``None``.

    Attributes:
        events: ``(slot, task id or None, text)`` of every arrival, completion, miss,
            failure and refused submission, in order.
        rejected: ``(where, error)`` of every refused submission.
    """

    def __init__(self, env: Any, policy: Any, *, seed: int | None = 0,
                 view: Any = None) -> None:
        base = getattr(env, "unwrapped", env)
        if not isinstance(base, LiveSessionEnv):
            raise ValueError(f"env: expected a LiveSessionEnv (or a wrapper of one), got "
                             f"{type(base).__name__}")
        if not (callable(getattr(policy, "reset", None))
                and callable(getattr(policy, "act", None))):
            raise ValueError(f"policy: expected an object with reset(seed) and "
                             f"act(observations), got {type(policy).__name__}")
        self.env, self.base, self.policy, self.view = env, base, policy, view
        self.events: list[tuple[int, int | None, str]] = []
        self.rejected: list[tuple[str, str]] = []
        self._stop = False
        self._status: list[str] = []
        self.observations, _ = env.reset(seed=seed)
        policy.reset(seed)
        self.started = time.perf_counter()

    # ----- submissions -----
    def submit(self, sub: Submission) -> int:
        """Submit a job (see :meth:`LiveSessionEnv.submit`); returns its task id."""
        m = self.base.submit(sub)
        self._status.append("waiting")
        info = self.base.task_info[m]
        self.note(f"submitted {info['name']} (alpha {info['alpha']:g}, "
                  f"{info['alpha_source']})", m)
        return m

    def poll(self, sources: Iterable[Source]) -> int:
        """Submit what each source has new; a refused one is recorded in :attr:`rejected`
        and :attr:`events`, and the session goes on. Returns the jobs submitted."""
        count = 0
        for source in sources:
            for where, item in source.poll():
                try:
                    if isinstance(item, Exception):
                        raise item
                    self.submit(item)
                    count += 1
                except ValueError as e:
                    self.rejected.append((where, str(e)))
                    self.note(f"refused {where}: {e}")
        return count

    def close_submissions(self) -> None:
        """Take no more jobs; :meth:`run` returns once every job has finished."""
        self.base.close_submissions()

    def stop(self) -> None:
        """Make :meth:`run` return at the next slot boundary (jobs stay as they are)."""
        self._stop = True

    # ----- running -----
    @property
    def slot(self) -> int:
        """The current slot (the next one to run)."""
        return int(self.base.sim.t[0])

    @property
    def finished(self) -> bool:
        """True once the episode has ended (submissions closed and every job done)."""
        return not self.env.agents

    def step(self) -> None:
        """One slot: the policy acts and the picked jobs train."""
        if self.finished:
            raise RuntimeError("step: the session has ended")
        actions = self.policy.act(self.observations)
        self.observations, _, _, _, _ = self.env.step(actions)
        self._note_changes()

    def run(self, sources: Iterable[Source] = (), *, until_idle: bool = False,
            max_slots: int | None = None, poll_seconds: float = 0.2,
            on_slot: Callable[[LiveSession], None] | None = None) -> None:
        """Schedule until told to stop: poll ``sources`` at every slot boundary, step while
        any job is pending (the slot clock pauses while none is), and return when the
        session has ended, :meth:`stop` was called (e.g. from ``on_slot``, called after
        every slot), ``max_slots`` slots have run, or, with ``until_idle``, no job is
        pending and the sources had nothing new."""
        sources = list(sources)
        slots, self._stop = 0, False
        while not self.finished and not self._stop:
            new = self.poll(sources)
            if self.base.pending() or self.base.closed:
                self.step()
                slots += 1
                if on_slot is not None:
                    on_slot(self)
            elif until_idle and not new:
                break
            else:
                time.sleep(poll_seconds)
            if self.view is not None:
                self.view.update(self)
            if max_slots is not None and slots >= max_slots:
                break

    def note(self, text: str, task: int | None = None) -> None:
        """Add an event (shown by the view, kept in :attr:`events` and the report)."""
        t = int(self.base.sim.t[0])
        self.events.append((t, task, text))
        if self.view is not None:
            self.view.event(t, text)

    def _note_changes(self) -> None:
        for m in range(len(self._status)):
            now = self.base.job_status(m)
            if now != self._status[m]:
                name = self.base.task_info[m]["name"]
                if now in ("completed", "expired", "failed") or self._status[m] == "waiting":
                    what = {"queued": "arrived, queued", "running": "arrived"}.get(now, now)
                    if now == "failed":
                        what = f"failed: {self.base.failures.get(m)}"
                    self.note(f"{name} {what}", m)
                self._status[m] = now

    def report(self) -> dict[str, Any]:
        """:meth:`LiveSessionEnv.report` with the session's wall time, the refused
        submissions and the events."""
        return {**self.base.report(), "wall_seconds": time.perf_counter() - self.started,
                "rejected": [{"where": w, "error": e} for w, e in self.rejected],
                "events": [{"slot": t, "id": m, "text": x} for t, m, x in self.events]}

    def close(self) -> None:
        """Stop the env's workers (if it started them) and the view."""
        if self.view is not None:
            self.view.close()
        self.env.close()

    def __enter__(self) -> LiveSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["DEFAULT_ALPHA", "STATUSES", "LiveSession", "LiveSessionEnv"]
