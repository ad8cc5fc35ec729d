"""Records of live episodes, and their replay in the simulator (SPEC §8, "Records").

Every live episode keeps a :class:`LiveRecord`: the configuration and seed, every task's
arrival, deadline, cap, target, alpha and job, its reference curve (from its pilot run), every
real observation (task, slot, nodes, the model's cumulative work, the real loss, the work
units trained per node), the clock, the failed jobs and the episode statistics.
``record.save(path)`` writes it as one ``.npz``;
:meth:`LiveRecord.load` reads it back, checked.

:func:`replay` turns a record into a simulator episode (a config and a
:class:`~core_env.workload.Workload` for ``CoreSchedulerEnv.reset(options={"workload": w})``)
with the record's arrivals, deadlines, caps, targets and alpha, and per task a curve,
either

* ``curves="reference"`` (default): its reference curve, the single-node pilot run of its job
  at its seed: the simulator's *prediction* of the live episode. The same policy on the live
  env and on this replay gives the sim-to-real gap: k**alpha scaling, a noise path that does
  not depend on the batch size and a free migration are the model's assumptions;
* ``curves="recorded"``: the losses the live episode really observed (linear in log work and
  log loss between observations, the reference curve before the first one, flat after the
  last): a policy that acts as it did live sees (up to the grid) the live losses again;

and, with ``slot="measured"`` (default), the simulator's slot calibrated to the live one: on
the wall clock a slot trains as many work units as fit (``SlotResult.units``), against the
simulator's one per node, so each task's curve is compressed along the work axis by its
measured units per model unit u (:meth:`LiveRecord.units_per_slot`; its loss at simulated
work w is the curve's at u w: a shift by ln u on the log-work grid). On the work clock
every u is 1 and the curves are left as they are.
``slot="model"`` keeps the simulator's one unit per slot.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import LOG_WORK_GRID
from core_env.live.jobs import JobSpec
from core_env.live.live_workload import LiveWorkload, reference_table
from core_env.workload import Workload

FORMAT = "core_env.live.record/2"


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
    obs: list[tuple[int, int, int, float, float, int]] = field(default_factory=list)
    """(task, slot, nodes, cumulative model work after the slot, real loss, work units trained
    per node) per observation."""
    failures: dict[int, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    clock: str = "work"
    """The live env's clock (``"work"`` or ``"wall"``)."""
    slot_seconds: float | None = None
    """The wall clock's slot length (None on the work clock)."""

    @classmethod
    def start(cls, config: CoreConfig, seed: int | None, live: LiveWorkload,
              pilots: Any, clock: str = "work", slot_seconds: float | None = None
              ) -> LiveRecord:
        run = np.asarray(live.pilot_run, dtype=np.int64)
        initial = np.asarray(pilots.initial)[run] if run.size else np.zeros(0)
        return cls(config, seed, live.workload, live.jobs, run, initial,
                   clock=clock, slot_seconds=slot_seconds)

    def observe(self, task: int, slot: int, nodes: int, work: float, loss: float,
                units: int = 1) -> None:
        self.obs.append((task, slot, nodes, work, loss, units))

    def finish(self, stats: dict[str, Any], failures: dict[int, str]) -> None:
        self.stats, self.failures = dict(stats), dict(failures)

    def curve(self, task: int) -> tuple[np.ndarray, np.ndarray]:
        """``(work, loss)`` of one task's real observations, in order."""
        rows = [(o[3], o[4]) for o in self.obs if o[0] == task]
        a = np.asarray(rows, dtype=np.float64).reshape(-1, 2)
        return a[:, 0], a[:, 1]

    def units_per_slot(self) -> np.ndarray:
        """float64[M]: each task's work units per model unit, i.e. its live work over the
        work the simulator's one unit per node and slot would have given it on the same
        slots: ``sum(dw) / sum(dw / units)`` over its observations (``dw`` the work gained
        that slot). A task never observed takes the ratio over all tasks; 1 without any."""
        n = self.workload.n_tasks
        live, model = np.zeros(n), np.zeros(n)
        last: dict[int, float] = {}
        for m, _, _, w, _, u in self.obs:
            dw = w - last.get(m, 0.0)
            last[m] = w
            live[m] += dw
            model[m] += dw / u
        seen = model > 0
        out = np.full(n, float(live.sum() / model.sum()) if seen.any() else 1.0)
        out[seen] = live[seen] / model[seen]
        return out

    # ----- files -----
    def save(self, path: str | Path) -> Path:
        """Write the record as one ``.npz`` (arrays, and the rest as JSON)."""
        path = Path(path)
        wl = self.workload
        meta = {"format": FORMAT, "config": config_to_dict(self.config), "seed": self.seed,
                "jobs": [{"kind": j.kind, "variant": j.variant, "seed": j.seed}
                         for j in self.jobs],
                "failures": {str(k): v for k, v in self.failures.items()},
                "stats": self.stats, "clock": self.clock, "slot_seconds": self.slot_seconds}
        obs = np.asarray(self.obs, dtype=np.float64).reshape(-1, 6)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, meta=np.asarray(json.dumps(meta)), obs=obs,
                 pilot_run=np.asarray(self.pilot_run, dtype=np.int64), initial=self.initial,
                 # cast: numpy's stub also types the names in **kwds as allow_pickle
                 **cast("dict[str, Any]", {f"w_{k}": np.asarray(getattr(wl, k))
                                           for k in Workload._fields
                                           if getattr(wl, k) is not None}))
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
            wl = validate_workload(Workload(**{k: a[f"w_{k}"] for k in Workload._fields
                                                  if f"w_{k}" in a}),
                                   config)
            jobs = tuple(JobSpec(j["kind"], dict(j["variant"]), int(j["seed"]))
                         for j in meta["jobs"])
            obs = a["obs"]
            if len(jobs) != wl.n_tasks or obs.ndim != 2 or obs.shape[1] != 6:
                raise ValueError("jobs or observations do not match the workload")
            if obs.size and not (np.all(np.isfinite(obs)) and np.all(obs[:, 4] > 0)
                                 and np.all(obs[:, 5] >= 1)
                                 and obs[:, 0].min() >= 0 and obs[:, 0].max() < wl.n_tasks):
                raise ValueError("observations: expected finite rows of known tasks with "
                                 "losses > 0 and units >= 1")
            clock, slot_seconds = meta.get("clock"), meta.get("slot_seconds")
            if clock not in ("work", "wall") or (clock == "wall") != (slot_seconds is not None):
                raise ValueError(f"clock {clock!r} with slot_seconds {slot_seconds!r}")
            initial = a["initial"].astype(np.float64)
            if initial.shape != (wl.n_tasks,) or not np.all(initial > 0):
                raise ValueError("initial: expected one loss > 0 per task")
        except FileNotFoundError:
            raise
        except (OSError, KeyError, TypeError, EOFError, zipfile.BadZipFile, ValueError) as e:
            raise ValueError(f"{path}: not a readable live record ({e})") from e
        rows = [(int(r[0]), int(r[1]), int(r[2]), float(r[3]), float(r[4]), int(r[5]))
                for r in obs]
        return cls(config, meta["seed"], wl, jobs, a["pilot_run"].astype(np.int64), initial,
                   rows, {int(k): v for k, v in meta["failures"].items()}, meta["stats"],
                   clock, slot_seconds)


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


def shifted_table(table: np.ndarray, log_shift: float,
                  grid: np.ndarray = LOG_WORK_GRID) -> np.ndarray:
    """A log-loss table on the log-work grid read ``log_shift`` further along the work axis
    (the curve at ``exp(log_shift)`` times the work; flat after the grid's end)."""
    grid = np.asarray(grid, dtype=np.float64)
    return pmath.interp(grid + log_shift, grid, np.asarray(table, dtype=np.float64))


def replay(record: LiveRecord, curves: str = "reference", slot: str = "measured"
           ) -> tuple[CoreConfig, Workload]:
    """The simulator episode of a live record (see the module docstring).

    Returns:
        ``(config, workload)``: ``CoreSchedulerEnv(config).reset(options={"workload":
        workload})`` runs it.

    Raises:
        ValueError: ``curves`` is not ``"reference"`` or ``"recorded"``, or ``slot`` not
            ``"measured"`` or ``"model"``.
    """
    if curves not in ("reference", "recorded"):
        raise ValueError(f"curves: expected 'reference' or 'recorded', got {curves!r}")
    if slot not in ("measured", "model"):
        raise ValueError(f"slot: expected 'measured' or 'model', got {slot!r}")
    wl = record.workload
    if not wl.n_tasks:
        return record.config, wl
    units = record.units_per_slot() if slot == "measured" else np.ones(wl.n_tasks)
    if curves == "reference" and np.all(units == 1.0):
        return record.config, wl
    rows = []
    for m in range(wl.n_tasks):
        table = (wl.log_loss[m] if curves == "reference" else
                 recorded_table(float(record.initial[m]), wl.log_loss[m], *record.curve(m)))
        rows.append(table if units[m] == 1.0 else shifted_table(table, pmath.log(units[m])))
    table = np.stack(rows).astype(np.float32)
    true = table.copy() if curves == "recorded" else np.stack([
        wl.true_log_loss[m] if units[m] == 1.0 else
        shifted_table(wl.true_log_loss[m], pmath.log(units[m]))
        for m in range(wl.n_tasks)]).astype(np.float32)
    return record.config, wl._replace(log_loss=table, true_log_loss=true)


__all__ = ["LiveRecord", "recorded_table", "replay", "reference_table", "shifted_table"]
