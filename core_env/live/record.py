"""Records of live episodes, and their replay in the simulator (SPEC §8, "Records").

Every live episode keeps a :class:`LiveRecord`: the configuration and seed, every task's
arrival, deadline, cap, target, alpha and job, its reference curve (from its pilot run), every
real observation (task, slot, nodes, the model's cumulative work, the real loss), the failed
jobs and the episode statistics. ``record.save(path)`` writes it as one ``.npz``;
:meth:`LiveRecord.load` reads it back, checked.

:func:`replay` turns a record into a simulator episode (a config and a
:class:`~core_env.workload.Workload` for ``CoreSchedulerEnv.reset(options={"workload": w})``)
with the record's arrivals, deadlines, caps, targets and alpha, and per task either

* ``curves="reference"`` (default): its reference curve, the single-node pilot run of its job
  at its seed: the simulator's *prediction* of the live episode. The same policy on the live
  env and on this replay gives the sim-to-real gap: k**alpha scaling, a noise path that does
  not depend on the batch size and a free migration are the model's assumptions;
* ``curves="recorded"``: the losses the live episode really observed (linear in log work and
  log loss between observations, the reference curve before the first one, flat after the
  last): a policy that acts as it did live sees (up to the grid) the live losses again.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import LOG_WORK_GRID
from core_env.live.jobs import JobSpec
from core_env.live.workload import LiveWorkload, reference_table
from core_env.workload import Workload

FORMAT = "core_env.live.record/1"


def config_to_dict(cfg: CoreConfig) -> dict[str, Any]:
    """A configuration as flat override names (``CoreConfig().replace(**d)`` rebuilds it)."""
    return {f.name: getattr(sec, f.name) for sec in (getattr(cfg, s.name) for s in
                                                      dataclasses.fields(cfg))
            for f in dataclasses.fields(sec)}


@dataclass
class LiveRecord:
    """One live episode (see the module docstring)."""

    config: CoreConfig
    seed: int | None
    workload: Workload  # reference curves as the curves
    jobs: tuple[JobSpec, ...]
    pilot_run: np.ndarray
    initial: np.ndarray  # float64[M], each task's loss before training (its pilot's)
    obs: list[tuple[int, int, int, float, float]] = field(default_factory=list)
    """(task, slot, nodes, cumulative model work after the slot, real loss) per observation."""
    failures: dict[int, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, config: CoreConfig, seed: int | None, live: LiveWorkload,
              pilots: Any) -> LiveRecord:
        return cls(config, seed, live.workload, live.jobs, np.asarray(live.pilot_run),
                   np.asarray(pilots.initial)[np.asarray(live.pilot_run, dtype=np.int64)])

    def observe(self, task: int, slot: int, nodes: int, work: float, loss: float) -> None:
        self.obs.append((task, slot, nodes, work, loss))

    def finish(self, stats: dict[str, Any], failures: dict[int, str]) -> None:
        self.stats, self.failures = dict(stats), dict(failures)

    def curve(self, task: int) -> tuple[np.ndarray, np.ndarray]:
        """``(work, loss)`` of one task's real observations, in order."""
        rows = [(w, l) for m, _, _, w, l in self.obs if m == task]
        a = np.asarray(rows, dtype=np.float64).reshape(-1, 2)
        return a[:, 0], a[:, 1]

    # ----- files -----
    def save(self, path: str | Path) -> Path:
        """Write the record as one ``.npz`` (arrays, and the rest as JSON)."""
        path = Path(path)
        wl = self.workload
        meta = {"format": FORMAT, "config": config_to_dict(self.config), "seed": self.seed,
                "jobs": [{"kind": j.kind, "variant": j.variant, "seed": j.seed}
                         for j in self.jobs],
                "failures": {str(k): v for k, v in self.failures.items()},
                "stats": self.stats}
        obs = np.asarray(self.obs, dtype=np.float64).reshape(-1, 5)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, meta=np.asarray(json.dumps(meta)), obs=obs,
                 pilot_run=np.asarray(self.pilot_run, dtype=np.int64), initial=self.initial,
                 **{f"w_{k}": np.asarray(getattr(wl, k)) for k in Workload._fields})
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> LiveRecord:
        """Read a record written by :meth:`save`.

        Raises:
            ValueError: naming the file, if it is not a readable record of this format or
                its workload does not pass :func:`core_env.workload.validate_workload`.
        """
        from core_env.workload import validate_workload

        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                a = {k: z[k] for k in z.files}
            meta = json.loads(str(a["meta"]))
            if meta.get("format") != FORMAT:
                raise ValueError(f"format {meta.get('format')!r}, expected {FORMAT!r}")
            config = CoreConfig().replace(**meta["config"])
            wl = validate_workload(Workload(**{k: a[f"w_{k}"] for k in Workload._fields}),
                                   config)
            jobs = tuple(JobSpec(j["kind"], dict(j["variant"]), int(j["seed"]))
                         for j in meta["jobs"])
            obs = a["obs"]
            if len(jobs) != wl.n_tasks or obs.ndim != 2 or obs.shape[1] != 5:
                raise ValueError("jobs or observations do not match the workload")
            if obs.size and not (np.all(np.isfinite(obs)) and np.all(obs[:, 4] > 0)
                                 and obs[:, 0].min() >= 0 and obs[:, 0].max() < wl.n_tasks):
                raise ValueError("observations: expected finite rows of known tasks with "
                                 "losses > 0")
            initial = a["initial"].astype(np.float64)
            if initial.shape != (wl.n_tasks,) or not np.all(initial > 0):
                raise ValueError("initial: expected one loss > 0 per task")
        except FileNotFoundError:
            raise
        except (OSError, KeyError, TypeError, EOFError, zipfile.BadZipFile, ValueError) as e:
            raise ValueError(f"{path}: not a readable live record ({e})") from e
        rows = [(int(r[0]), int(r[1]), int(r[2]), float(r[3]), float(r[4])) for r in obs]
        return cls(config, meta["seed"], wl, jobs, a["pilot_run"].astype(np.int64), initial,
                   rows, {int(k): v for k, v in meta["failures"].items()}, meta["stats"])


def recorded_table(initial: float, reference: np.ndarray, work: np.ndarray,
                   loss: np.ndarray, grid: np.ndarray = LOG_WORK_GRID) -> np.ndarray:
    """A task's observed losses on the log-work grid: linear in log work and log loss
    between observations, the reference curve (log-loss on the grid) before the first, flat
    after the last. Without observations: the reference curve."""
    if work.size == 0:
        return np.asarray(reference, dtype=np.float64)
    order = np.argsort(work, kind="stable")
    x, y = pmath.log(work[order]), pmath.log(loss[order])
    grid = np.asarray(grid, dtype=np.float64)
    out = pmath.interp(grid, x, y) if x.size > 1 else np.full(grid.shape, float(y[0]))
    before = grid < x[0]
    out[before] = np.asarray(reference, dtype=np.float64)[before]
    return out


def replay(record: LiveRecord, curves: str = "reference") -> tuple[CoreConfig, Workload]:
    """The simulator episode of a live record (see the module docstring).

    Returns:
        ``(config, workload)``: ``CoreSchedulerEnv(config).reset(options={"workload":
        workload})`` runs it.

    Raises:
        ValueError: ``curves`` is not ``"reference"`` or ``"recorded"``.
    """
    if curves == "reference":
        return record.config, record.workload
    if curves != "recorded":
        raise ValueError(f"curves: expected 'reference' or 'recorded', got {curves!r}")
    wl = record.workload
    table = np.stack([recorded_table(float(record.initial[m]), wl.log_loss[m],
                                     *record.curve(m)) for m in range(wl.n_tasks)]
                     ).astype(np.float32) if wl.n_tasks else wl.log_loss
    return record.config, wl._replace(log_loss=table, true_log_loss=table.copy())


__all__ = ["LiveRecord", "recorded_table", "replay", "reference_table"]
