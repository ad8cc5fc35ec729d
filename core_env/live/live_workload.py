"""Live workloads: which real jobs arrive when, with which deadlines, caps and targets.

:func:`generate_live_workload` draws an episode exactly as the simulator draws one
(:mod:`core_env.workload`: node speeds, arrivals, then per task its required work s*,
parallelism cap and deadline slack), except that a task's curve is not drawn from a family:
it picks a pilot run of a :class:`~core_env.live.pilots.Pilots` set (a job variant and a
seed), runs that job at that seed, takes the variant's fitted scaling exponent as its alpha
(which sets its deadline window as in the simulator), and the target its reference curve
reaches by s* (:meth:`~core_env.live.pilots.Pilots.target`).

The result carries a simulator :class:`~core_env.workload.Workload` whose curves are the
tasks' reference curves on the simulator's grid (:func:`reference_table`): the simulator's
*model* of the episode. Running it in :class:`~core_env.env.CoreSchedulerEnv` (``reset(
options={"workload": w})``) is the prediction a live run is compared with.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import LOG_WORK_GRID
from core_env.live.jobs import JobSpec
from core_env.live.pilots import Pilots
from core_env.workload import Workload, deadline_windows, draw_arrivals, draw_tasks, node_speeds


class LiveWorkload(NamedTuple):
    """One live episode's tasks."""

    workload: Workload
    """The simulator's view: arrivals, deadlines, targets, caps, alpha, node speeds, and the
    reference curves as the tasks' curves (observed and noise-free alike)."""
    jobs: tuple[JobSpec, ...]
    """The job each task runs, in task order."""
    pilot_run: np.ndarray
    """int64[M]: the pilot run each task's target and reference curve come from."""


def reference_table(initial: float, loss: np.ndarray,
                    grid: np.ndarray = LOG_WORK_GRID) -> np.ndarray:
    """A reference curve (loss after units 1..W from ``initial`` at 0) on a log-work grid:
    linear in log work and log loss between units, linear in work from 0 to 1 unit, flat
    past W.

    Returns:
        float64[G] log-losses.
    """
    units = np.arange(1, loss.shape[0] + 1, dtype=np.float64)
    work = pmath.exp(np.asarray(grid, dtype=np.float64))
    log_loss = pmath.log(np.asarray(loss, dtype=np.float64))
    out = pmath.interp(pmath.log(np.maximum(work, 1.0)), pmath.log(units), log_loss)
    below = work < 1.0
    out[below] = pmath.log(initial) + work[below] * (log_loss[0] - pmath.log(initial))
    return out


def generate_live_workload(cfg: CoreConfig, rng: np.random.Generator,
                           pilots: Pilots) -> LiveWorkload:
    """Draw one live episode (see the module docstring).

    Order of draws: node speeds, arrivals, one block of uniforms giving each task's s*,
    cap, pilot run and deadline slack. s* is clipped to the pilot curves' length.
    """
    speeds = node_speeds(cfg, rng)
    arrival = draw_arrivals(cfg, rng)
    m = arrival.shape[0]
    u = rng.random((m, 4))
    s_star, cap, slack = draw_tasks(cfg, u)
    s_star = np.minimum(s_star, float(pilots.units))
    n_runs = pilots.seed.shape[0]
    run = np.minimum((u[:, 2] * n_runs).astype(np.int64), n_runs - 1)
    alpha = pilots.alpha[pilots.variant_of[run]]
    window = deadline_windows(cfg, s_star, cap, alpha, slack)
    log_target = pmath.log(np.array([pilots.target(int(r), float(s))
                                     for r, s in zip(run, s_star, strict=False)], dtype=np.float64))
    curves = np.stack([reference_table(float(pilots.initial[r]), pilots.loss[r]) for r in run]
                      ) if m else np.zeros((0, LOG_WORK_GRID.shape[0]))
    curves = curves.astype(np.float32)
    wl = Workload(arrival=arrival, deadline=arrival + window, log_target=log_target,
                  cap=cap, alpha=alpha.astype(np.float64),
                  family=np.zeros(m, dtype=np.int8), log_loss=curves,
                  true_log_loss=curves.copy(), speeds=speeds)
    return LiveWorkload(wl, tuple(pilots.job(int(r)) for r in run), run)
