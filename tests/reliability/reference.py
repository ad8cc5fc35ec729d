"""A slow, plain-Python reference simulator of one CoRE environment (SPEC §3, "one step").

Written from the specification with loops and one object per task, independently of the
vectorised :mod:`core_env.dynamics`; the tests in ``test_reference.py`` require the two to
produce the same trajectory, bit for bit, on many random seeds and configurations.

What is taken from ``core_env`` and what is not
    The reference consumes a :class:`core_env.Workload` (arrivals, deadlines, caps, alpha,
    targets and each task's tabulated observed log-loss path on
    :data:`core_env.curves.LOG_WORK_GRID`), the configuration, and nothing else: no state
    arrays, no masks, no dynamics. Workload generation is tested separately.

Numeric contract (what "bit for bit" means)
    The simulator stores its state in float32, computes in float64 and rounds once when it
    stores; elementary functions come from :mod:`core_env.pmath` (the same bits on every
    machine and for every array length, so a scalar call here equals the simulator's array
    call). Exact equality is only meaningful if the reference performs the same IEEE
    operations, so it uses these conventions, each stated here rather than copied:

    * node speeds, cumulative work, alpha, targets and the noise table are float32;
    * a task trained by k nodes gains ``(sum of delivered speeds, in float64 in node order)
      * pmath.pow(k, alpha - 1)`` in float64, added to its float32 work in float64 and
      rounded to float32; a node that restores a task (it does not hold the state of a task
      that has trained before) delivers ``f32(speed) * f32(1 - c_j)``;
    * ``ln work`` is ``pmath.log`` of that work rounded to float32; its grid position
      ``x = (ln w - g_0) / step`` is float64, clipped to [0, G - 1]; the observed log-loss is
      the float64 linear interpolation ``lo + (hi - lo) * (x - i0)`` between the float32
      table values lo and hi;
    * success compares that float64 log-loss with the float32 target (``<=``);
    * psi uses the float64 latest loss, the first observed loss (float32 once stored) and a
      denominator floored at ``f32(1e-6)``, and is stored as float32;
    * the slope feature is ``(ln y_n - ln y_m) / (ln w_n - ln w_m)`` between the new
      observation n and observation m = max(n - 4, 0) (0 if n = 0 or the work did not move);
    * the potential Phi is the float64 sum of the visible tasks' psi in slot order, left to
      right, so rewards and returns are compared bit for bit as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import GRID_SIZE, GRID_STEP, LOG_WORK_GRID
from core_env.workload import Workload

F32 = np.float32
SLOPE_LAG = 4
"""The slope feature spans the last SLOPE_LAG + 1 observations (SPEC: "recent slope")."""


@dataclass
class RefTask:
    """One task and everything the reference tracks about it."""

    row: int
    arrival: int
    deadline: int
    cap: int
    alpha: F32
    log_target: F32
    table: np.ndarray  # float32[G] observed log-loss path
    keep: F32 = F32(1.0)  # 1 - its restore cost c_j
    status: str = "future"  # future / queued / active / succeeded / expired
    slot: int = -1
    admitted: int = -1
    work: F32 = F32(0.0)
    first_log_loss: F32 = F32(0.0)
    log_loss: F32 = F32(0.0)
    psi: F32 = F32(0.0)
    slope: F32 = F32(0.0)
    nodes_last: int = 0
    history: list[tuple[F32, F32]] = field(default_factory=list)  # (ln work, ln loss)
    resolved_at: int = -1  # slot in which it succeeded (or the slot it expired at)


class RefStep(NamedTuple):
    """What one reference step returns."""

    reward: float
    successes: int
    terminated: bool
    truncated: bool


class ReferenceSim:
    """One environment, simulated with loops (see the module docstring)."""

    def __init__(self, cfg: CoreConfig, wl: Workload) -> None:
        self.cfg = cfg
        self.n = cfg.cluster.n_nodes
        self.k = cfg.cluster.max_visible_tasks
        costs = (wl.switch_cost if wl.switch_cost is not None
                 else [cfg.cluster.switch_cost] * wl.n_tasks)
        self.beta = cfg.reward.shaping_beta
        self.arrival_slots = cfg.workload.arrival_slots
        self.max_steps = cfg.max_steps
        self.speeds = [F32(v) for v in wl.speeds]
        self.tasks = [RefTask(row=j, arrival=int(wl.arrival[j]), deadline=int(wl.deadline[j]),
                              cap=int(wl.cap[j]), alpha=F32(wl.alpha[j]),
                              log_target=F32(wl.log_target[j]),
                              table=np.asarray(wl.log_loss[j], dtype=F32),
                              keep=F32(1.0 - float(costs[j])))
                      for j in range(wl.n_tasks)]
        self.slots: list[RefTask | None] = [None] * self.k
        self.queue: list[RefTask] = []  # FIFO, oldest first
        self.last_task = [-1] * self.n  # task row each node trained last slot
        self.held = [-1] * self.n  # task row whose state each node holds (its last trained)
        self.last_slot = [-1] * self.n
        self.t = 0
        self.counts = dict(arrived=0, completed=0, expired=0, illegal=0, conflicts=0,
                           switches=0, restores=0, busy=0)
        self.phi = 0.0
        self.ep_return = 0.0
        self._arrivals_and_admission()

    # ------------------------------------------------------------------ time advance
    def _arrivals_and_admission(self) -> None:
        """Steps 7-8 at slot ``self.t``: expire, queue new arrivals, fill free slots."""
        t = self.t
        for i, task in enumerate(self.slots):
            if task is not None and task.deadline <= t:
                task.status, task.resolved_at = "expired", t
                self.slots[i] = None
                self.counts["expired"] += 1
        still = []
        for task in self.queue:
            if task.deadline <= t:
                task.status, task.resolved_at = "expired", t
                self.counts["expired"] += 1
            else:
                still.append(task)
        self.queue = still
        for task in self.tasks:
            if task.arrival == t:
                task.status = "queued"
                self.queue.append(task)
                self.counts["arrived"] += 1
        for i in range(self.k):
            if self.slots[i] is None and self.queue:
                task = self.queue.pop(0)
                task.status, task.slot, task.admitted = "active", i, t
                self.slots[i] = task

    # ------------------------------------------------------------------ one slot
    def step(self, actions: list[int]) -> RefStep:
        """Advance one slot with one action per node (ints in [0, K])."""
        assert len(actions) == self.n
        chosen: list[RefTask | None] = [None] * self.n
        picks = [0] * self.k
        for i, a in enumerate(actions):
            if a == 0:
                continue
            task = self.slots[a - 1]
            if task is None:  # 1. masked: runs as idle
                self.counts["illegal"] += 1
                continue
            if picks[a - 1] >= task.cap:  # 2. cap reached by lower-numbered nodes
                self.counts["conflicts"] += 1
                continue
            picks[a - 1] += 1
            chosen[i] = task
        # 3.-4. delivered work per task, nodes in index order
        speed_sum: dict[int, float] = {}
        nodes: dict[int, int] = {}
        for i, task in enumerate(chosen):
            if task is None:
                continue
            delivered = self.speeds[i]
            if self.last_task[i] >= 0 and self.last_task[i] != task.row:
                self.counts["switches"] += 1
            if task.history and self.held[i] != task.row:  # it trained before: a restore
                self.counts["restores"] += 1
                delivered = F32(delivered * task.keep)
            self.held[i] = task.row
            speed_sum[task.row] = speed_sum.get(task.row, 0.0) + float(delivered)
            nodes[task.row] = nodes.get(task.row, 0) + 1
            self.counts["busy"] += 1
        trained = [self.tasks[row] for row in sorted(speed_sum, key=lambda r: self.tasks[r].slot)]
        successes = 0
        for task in self.slots:
            if task is not None:
                task.nodes_last = 0
        for task in trained:
            k = nodes[task.row]
            gain = speed_sum[task.row] * float(pmath.pow(float(k), float(task.alpha) - 1.0))
            task.work = F32(float(task.work) + gain)
            # 5. observed loss at the new cumulative work
            log_work = F32(pmath.log(float(task.work)))
            x = (float(log_work) - float(LOG_WORK_GRID[0])) * (1.0 / GRID_STEP)
            x = min(max(x, 0.0), GRID_SIZE - 1.0)
            i0 = min(int(x), GRID_SIZE - 2)
            lo, hi = float(task.table[i0]), float(task.table[i0 + 1])
            log_loss = lo + (hi - lo) * (x - i0)
            n_obs = len(task.history)
            first = log_loss if n_obs == 0 else float(task.first_log_loss)
            if n_obs == 0:
                task.first_log_loss = F32(log_loss)
            back_w, back_l = task.history[max(n_obs - SLOPE_LAG, 0)] if n_obs else (0, 0)
            dw = F32(log_work - back_w) if n_obs else F32(0.0)
            task.slope = F32((log_loss - float(back_l)) / float(dw)) if n_obs and dw > 1e-6 \
                else F32(0.0)
            task.history.append((log_work, F32(log_loss)))
            task.log_loss = F32(log_loss)
            gap = max(first - float(task.log_target), float(F32(1e-6)))
            task.psi = F32(min(max((first - log_loss) / gap, 0.0), 1.0))
            task.nodes_last = k
            # 6. success frees the slot
            if log_loss <= float(task.log_target):
                task.status, task.resolved_at = "succeeded", self.t
                self.slots[task.slot] = None
                successes += 1
        self.counts["completed"] += successes
        self.last_task = [task.row if task is not None else -1 for task in chosen]
        # 7.-8. time advances
        self.t += 1
        self._arrivals_and_admission()
        self.last_slot = [task.slot if task is not None and self.slots[task.slot] is task
                          else -1 for task in chosen]
        terminated = (self.t >= self.arrival_slots and not self.queue
                      and all(task is None for task in self.slots))
        truncated = not terminated and self.t >= self.max_steps
        phi = 0.0
        if not (terminated or truncated):
            for task in self.slots:  # in slot order, left to right
                if task is not None:
                    phi += float(task.psi)
        reward = successes + self.beta * (phi - self.phi)
        self.phi = phi
        self.ep_return += reward
        return RefStep(reward=reward, successes=successes, terminated=terminated,
                       truncated=truncated)

    # ------------------------------------------------------------------ views
    @property
    def n_queued(self) -> int:
        return len(self.queue)

    def episode_stats(self) -> dict[str, float | int]:
        """The ``info["episode"]`` statistics as the spec defines them."""
        c = self.counts
        return {"arrived": c["arrived"], "completed": c["completed"], "expired": c["expired"],
                "completion_rate": c["completed"] / max(c["arrived"], 1),
                "utilization": c["busy"] / max(self.t * self.n, 1),
                "illegal_actions": c["illegal"], "capacity_conflicts": c["conflicts"],
                "switches": c["switches"], "restores": c["restores"], "length": self.t}
