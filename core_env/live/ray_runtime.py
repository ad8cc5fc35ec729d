"""The live runtime's Ray backend: one Ray actor per node (SPEC §8).

:class:`RayRuntime` is :class:`~core_env.live.runtime.LocalRuntime` with Ray actors for worker
processes, so live mode runs on a real cluster: ``RayRuntime(16, address="auto")`` joins the
cluster this machine belongs to (``ray start --head`` / ``ray start --address=...``) and
places the 16 node actors with Ray's ``SPREAD`` strategy, one CPU each (``num_cpus``), as
evenly over the cluster's machines as their resources allow; ``address=None`` starts a local
Ray instance with enough logical CPUs for every actor. Everything else is the local
backend's: the actors run the same :func:`~core_env.live.runtime.run_job`, keep the same
resident jobs, and the driver keeps every end-of-slot state, so a task that changes nodes is
restored from it and an actor that dies (killed, its machine lost) loses at most the slot in
flight: it is reported as ``error="worker died"``, its node stays dead
(:attr:`~core_env.live.runtime.Runtime.alive`) until :meth:`restart` starts a new actor.
A slot that overruns ``time_limit`` kills and restarts its actor.

Needs the ``ray`` extra (``pip install 'core-env[ray]'``); :mod:`core_env.live` does not import
Ray unless this backend is used.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

from core_env.live.jobs import JobSpec
from core_env.live.runtime import (
    STARTUP_SECONDS,
    THREAD_VARS,
    Runtime,
    SlotResult,
    SlotTask,
    run_job,
    warm_jobs,
)


class _NodeActor:  # pragma: no cover - runs in a Ray worker process
    """One node: the jobs it holds and the slot it runs (:func:`run_job`)."""

    def __init__(self) -> None:
        self.resident: OrderedDict[Any, Any] = OrderedDict()

    def where(self) -> tuple[int, str]:
        import ray
        return os.getpid(), ray.get_runtime_context().get_node_id()

    def warm(self, specs) -> str | None:
        return warm_jobs(specs)

    def run(self, key, spec, state, units, nodes, reuse, seconds=None) -> tuple:
        return run_job(self.resident, key, spec, state, units, nodes, reuse, seconds)


def _ray():
    try:
        import ray
    except ImportError as e:
        raise RuntimeError("the Ray live backend needs the optional extra: "
                           "pip install 'core-env[ray]'") from e
    return ray


class RayRuntime(Runtime):
    """N Ray actors, one per node, driven slot by slot (see the module docstring).

    Args:
        n_nodes: actors to start (>= 1).
        time_limit: seconds a task's slot may take before its actor is killed (> 0).
        address: a Ray cluster to join (``"auto"``, ``"ray://host:10001"``, ...) if Ray is
            not initialised yet; ``None`` starts a local Ray (shut down by :meth:`close`).
        num_cpus: CPUs each node's actor reserves (> 0; Ray sets its thread count to it).
        scheduling_strategy: Ray's placement of the actors (``"SPREAD"``: over machines).

    Attributes:
        node_ids: the Ray node (machine) each actor runs on.
    """

    def __init__(self, n_nodes: int, time_limit: float = 600.0, address: str | None = None,
                 num_cpus: float = 1.0, scheduling_strategy: Any = "SPREAD") -> None:
        super().__init__(n_nodes, time_limit)
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) \
                or not num_cpus > 0:
            raise ValueError(f"num_cpus: expected a number > 0, got {num_cpus!r}")
        ray = _ray()
        self._own_ray = not ray.is_initialized()
        if self._own_ray:
            logical = None if address is not None else max(
                int(n_nodes * num_cpus + 0.999), os.cpu_count() or 1)
            ray.init(address=address, num_cpus=logical, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        self._cls = ray.remote(_NodeActor).options(
            num_cpus=num_cpus, scheduling_strategy=scheduling_strategy, max_restarts=0,
            runtime_env={"env_vars": {k: "1" for k in THREAD_VARS}})
        self._actors: list[Any] = [None] * n_nodes
        self._pids: list[int | None] = [None] * n_nodes
        self.node_ids: list[str | None] = [None] * n_nodes
        for i in range(n_nodes):  # create them all, then wait: start-ups overlap
            self._actors[i] = self._cls.remote()
        for i in range(n_nodes):
            self._await_ready(i)

    def _await_ready(self, i: int) -> None:
        ray = _ray()
        try:
            self._pids[i], self.node_ids[i] = ray.get(self._actors[i].where.remote(),
                                                      timeout=STARTUP_SECONDS)
        except Exception as e:
            self._stop(i)
            raise RuntimeError(f"node {i}: its Ray actor did not start within "
                               f"{STARTUP_SECONDS:g} s ({type(e).__name__})") from e
        self.alive[i] = True

    def _start(self, i: int) -> None:
        self._actors[i] = self._cls.remote()
        self._await_ready(i)

    def _stop(self, node: int) -> None:
        actor = self._actors[node]
        if actor is not None:
            try:
                _ray().kill(actor, no_restart=True)
            except Exception:  # already dead
                pass
        self._actors[node] = None
        self.alive[node] = False
        self._resident[node].clear()

    def _warm_nodes(self, nodes: list[int], specs: tuple[JobSpec, ...]) -> None:
        ray = _ray()
        refs = [self._actors[i].warm.remote(specs) for i in nodes]
        try:
            errors = ray.get(refs, timeout=STARTUP_SECONDS)
        except ray.exceptions.GetTimeoutError as e:
            raise RuntimeError(f"nodes {nodes}: their actors did not warm up within "
                               f"{STARTUP_SECONDS:g} s") from e
        except ray.exceptions.RayActorError:
            return  # a dead actor shows in its next slot
        for node, error in zip(nodes, errors, strict=False):
            if error is not None:
                raise RuntimeError(f"node {node}: {error}")

    def pid(self, node: int) -> int:
        """The process id of ``node``'s actor (on the machine of ``node_ids[node]``)."""
        pid = self._pids[node]
        if pid is None:
            raise RuntimeError(f"node {node}: its actor has not started")
        return int(pid)

    def run_slot(self, tasks: dict[Any, SlotTask]) -> dict[Any, SlotResult]:
        """Run one slot of every task in ``tasks`` (task id -> :class:`SlotTask`) in
        parallel; returns task id -> :class:`SlotResult` (the local backend's contract)."""
        ray = _ray()
        leaders = self._check_tasks(tasks)
        refs = {key: self._actors[node].run.remote(*self._message(key, tasks[key], node))
                for key, node in leaders.items()}
        _, late = ray.wait(list(refs.values()), num_returns=len(refs),
                           timeout=self.time_limit)
        late = set(late)
        results: dict[Any, SlotResult] = {}
        for key, ref in refs.items():
            node, task = leaders[key], tasks[key]
            if ref in late:  # time limit: kill and restart the actor
                self.restart(node)
                results[key] = self._failed(task, node,
                                            f"time limit {self.time_limit:g} s exceeded")
                continue
            try:
                results[key] = self._result(key, task, node, ray.get(ref))
            except ray.exceptions.RayActorError:
                self.alive[node] = False
                self._resident[node].clear()
                results[key] = self._failed(task, node, "worker died")
        return results

    def close(self) -> None:
        """Stop every actor (and the local Ray instance this runtime started)."""
        if not hasattr(self, "_actors"):
            return
        for i in range(self.n_nodes):
            self._stop(i)
        if self._own_ray:
            ray = _ray()
            if ray.is_initialized():
                ray.shutdown()
            self._own_ray = False
