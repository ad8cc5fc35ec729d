"""The batched simulator: B environments stepped together by the same dynamics code.

``make_batched("CoRE-v0", num_envs=256, seed=0)`` returns a :class:`BatchedCoreEnv` with
``reset() -> (obs[B, N, D], mask[B, N, K+1])`` and
``step(actions[B, N]) -> (obs, mask, reward[B], done[B], info)``. Finished environments are
reset automatically inside ``step`` (the returned observation is the new episode's first);
their episode statistics are reported in ``info["episode"]``.

Environment b draws its workloads from its own generator: ``reset(seed=[s_0, ..., s_{B-1}])``
makes environment b follow exactly the episodes of ``CoreSchedulerEnv.reset(seed=s_b)``
followed by ``reset()`` calls; ``reset(seed=s)`` spawns the B seeds from ``s``. Next-episode
workloads are drawn ahead of time for many environments at once (vectorised curve
tabulation); since each generator is consumed in episode order this changes no result.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from core_env import dynamics
from core_env.config import CoreConfig, check_seed
from core_env.dynamics import EPISODE_KEYS
from core_env.layout import Layout
from core_env.observe import ObsBlocks, Observer
from core_env.presets import make_config
from core_env.state import FUTURE, SUCCEEDED, BatchState, allocate, load_workload
from core_env.utils.checks import check_int
from core_env.workload import Workload, generate_workloads

OBSERVATIONS = ("full", "blocks")
"""Observation formats of :class:`BatchedCoreEnv` (its ``observations`` argument)."""


class BatchedCoreEnv:
    """B CoRE environments with auto-reset, as arrays.

    Args:
        config: the configuration shared by all environments.
        num_envs: B.
        seed: default seed for the first :meth:`reset` (int or B ints).
        copy: if True (default) ``reset``/``step`` return fresh arrays; if False they return
            internal buffers that the next call overwrites (faster; copy what you keep).
        backend: ``"numba"``, ``"numpy"`` or ``None`` (numba when installed); see
            :data:`core_env.dynamics.BACKENDS`.
        observations: ``"full"`` (default): ``obs`` is float32[B, N, D], every node's flat
            observation; ``"blocks"``: ``obs`` is an :class:`~core_env.observe.ObsBlocks`
            of the blocks those are made of (globals [B, G], nodes [B, N, NF], the task
            table [B, K, F], which every node shares), without the N copies of the table;
            :func:`core_env.observe.assemble` turns it into the full array.
    """

    def __init__(self, config: CoreConfig, num_envs: int, seed: int | Sequence[int] | None = None,
                 copy: bool = True, backend: str | None = None,
                 observations: str = "full") -> None:
        num_envs = check_int("num_envs", num_envs, 1, 65536)
        self.config = config
        if observations not in OBSERVATIONS:
            raise ValueError(f"observations: expected one of {OBSERVATIONS}, got "
                             f"{observations!r}")
        self.num_envs = num_envs
        self.copy = copy
        self.observations = observations
        self.params = dynamics.StepParams.from_config(config, backend)
        self.sim: BatchState = allocate(config, num_envs)
        self._observer = Observer(config, num_envs, self.params.backend)
        self.layout: Layout = self._observer.obs_layout
        self.n_nodes = config.cluster.n_nodes
        self.n_actions = config.cluster.max_visible_tasks + 1
        self._seed = seed
        self._rngs: list[np.random.Generator] = []
        self._next: list[Workload | None] = []  # prefetched next-episode workloads
        self.n_tenants = config.workload.n_tenants

    def reset(self, seed: int | Sequence[int] | None = None
              ) -> tuple[np.ndarray | ObsBlocks, np.ndarray]:
        """Start a new episode in every environment; returns ``(obs, mask)``."""
        seed = self._seed if seed is None else seed
        if seed is None or isinstance(seed, numbers.Integral):
            children = np.random.SeedSequence(check_seed("seed", seed)).spawn(self.num_envs)
            self._rngs = [np.random.default_rng(c) for c in children]
        else:
            if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence | np.ndarray):
                raise ValueError(f"seed: expected None, an integer >= 0 or {self.num_envs} "
                                 f"of them, got {seed!r}")
            seeds = [check_seed(f"seed[{b}]", s) for b, s in enumerate(seed)]
            if len(seeds) != self.num_envs:
                raise ValueError(f"seed: expected {self.num_envs} seeds, got {len(seeds)}")
            if any(s is None for s in seeds):
                raise ValueError("seed: expected integers >= 0 in a list of seeds, got None")
            self._rngs = [np.random.default_rng(s) for s in seeds]
        for b, wl in enumerate(generate_workloads(self.config, self._rngs)):
            load_workload(self.sim, b, wl)
        self._next = [None] * self.num_envs
        self._prefetch()
        dynamics.arrive(self.sim, backend=self.params.backend)
        return self._observe()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray | ObsBlocks, np.ndarray, np.ndarray,
                                                  np.ndarray, dict[str, Any]]:
        """Advance every environment one slot.

        Args:
            actions: int[B, N] in [0, K].

        Returns:
            ``(obs, mask, reward, done, info)``: float32[B, N, D] (an
            :class:`~core_env.observe.ObsBlocks` with ``observations="blocks"``), int8[B, N, K+1],
            float64[B], bool[B], and a dict with bool[B] ``terminated``/``truncated``,
            int64[B] ``successes``, and ``episode``: a dict of arrays over the finished
            environments (``env`` = their indices, then every key of the PettingZoo
            ``info["episode"]``), empty arrays if none finished. With tenants
            (``config.workload.n_tenants`` = G > 0) also int64[B, G] ``tenant_successes``
            (this step's successes by tenant) and, in ``episode``, int64[F, G]
            ``tenant_arrived`` and ``tenant_completed`` (the finished episodes' counts by
            tenant, as ``info["episode"]["groups"]["tenant"]`` of the PettingZoo env).
        """
        if not self._rngs:
            raise RuntimeError("call reset() before step()")
        actions = self._check(actions)
        before = self._tenant_counts()[1] if self.n_tenants else None
        res = dynamics.step(self.sim, actions, self.params)
        done = res.terminated | res.truncated
        finished = np.flatnonzero(done)
        stats = [dynamics.episode_stats(self.sim, int(b)) for b in finished]
        episode = {"env": finished}
        for key in EPISODE_KEYS:
            dtype = np.float64 if key in ("completion_rate", "utilization", "return") \
                else np.int64
            episode[key] = (np.fromiter((st[key] for st in stats), dtype, len(stats))
                            if stats else np.empty(0, dtype))
        tenants = {}
        if before is not None:
            arrived, won = self._tenant_counts()
            tenants["tenant_successes"] = won - before
            episode["tenant_arrived"] = arrived[finished]
            episode["tenant_completed"] = won[finished]
        if finished.size:
            if any(self._next[b] is None for b in finished):
                self._prefetch()
            for b in finished:
                wl = self._next[b]
                assert wl is not None  # _prefetch() drew it
                load_workload(self.sim, int(b), wl)
                self._next[b] = None
            dynamics.arrive(self.sim, rows=done, backend=self.params.backend)
        obs, mask = self._observe()
        info = {"terminated": res.terminated, "truncated": res.truncated,
                "successes": res.successes, "episode": episode, **tenants}
        return obs, mask, res.reward, done, info

    def _tenant_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """int64[B, G] tasks arrived and tasks succeeded so far, by tenant."""
        s, g = self.sim, self.n_tenants
        key = np.arange(self.num_envs)[:, None] * g + s.w_tenant
        size = self.num_envs * g
        arrived = np.bincount(key[s.status != FUTURE], minlength=size)
        won = np.bincount(key[s.status == SUCCEEDED], minlength=size)
        return arrived.reshape(-1, g), won.reshape(-1, g)

    def _prefetch(self) -> None:
        """Draw the next workload of every environment that has none waiting, in one
        vectorised pass. Each environment's generator is used in episode order, so when this
        happens does not change any result; it only batches the curve tabulation."""
        need = [b for b, wl in enumerate(self._next) if wl is None]
        for b, wl in zip(need, generate_workloads(self.config, [self._rngs[b] for b in need]), strict=False):
            self._next[b] = wl

    def _check(self, actions: Any) -> np.ndarray:
        a = np.asarray(actions)
        shape = (self.num_envs, self.n_nodes)
        if a.shape != shape:
            raise ValueError(f"actions: expected shape {shape}, got {a.shape}")
        if not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"actions: expected an integer array, got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() >= self.n_actions):
            bad = (a < 0) | (a >= self.n_actions)
            b, n = np.argwhere(bad)[0]
            raise ValueError(f"actions[{b}, {n}] (env {b}, node_{n}): expected an int in "
                             f"[0, {self.n_actions - 1}], got {a[b, n]}")
        return a

    def _observe(self) -> tuple[np.ndarray | ObsBlocks, np.ndarray]:
        ob = self._observer
        if self.observations == "full":
            obs, mask = ob.observe(self.sim)
            return (obs.copy(), mask.copy()) if self.copy else (obs, mask)
        ob.compute(self.sim)
        mask = ob.write_mask(self.sim, ob.mask)
        blocks = ObsBlocks(ob.globals, ob.nodes, ob.table)
        if self.copy:
            return ObsBlocks(*(a.copy() for a in blocks)), mask.copy()
        return blocks, mask

    def states(self) -> np.ndarray:
        """Global states float32[B, S] of the current step (for centralised critics)."""
        ob = self._observer
        b = self.num_envs
        return np.concatenate([ob.globals, ob.nodes.reshape(b, -1), ob.table.reshape(b, -1)],
                              axis=1)


def make_batched(env_id: str = "CoRE-v0", num_envs: int = 64,
                 seed: int | Sequence[int] | None = None,
                 copy: bool = True, backend: str | None = None, observations: str = "full",
                 **overrides: Any) -> BatchedCoreEnv:
    """A :class:`BatchedCoreEnv` of a preset (``"CoRE-v0"`` or ``"core_env/CoRE-v0"``)."""
    if not isinstance(env_id, str):
        raise ValueError(f"env_id: expected a preset id such as 'CoRE-v0', got {env_id!r}")
    preset = env_id.split("/", 1)[1] if env_id.startswith("core_env/") else env_id
    return BatchedCoreEnv(make_config(preset, **overrides), num_envs, seed=seed, copy=copy,
                          backend=backend, observations=observations)
