"""Live mode (SPEC §8): real training jobs on real worker processes.

* :class:`LiveSchedulerEnv` (:mod:`core_env.live.env`): the PettingZoo env of the simulator's
  contract whose losses come from really training each task's job; presets ``Live-Small-v0``
  and ``Live-v0`` (:mod:`core_env.live.live_presets`;
  ``pettingzoo.make("parallel", "core_env/Live-v0")``);
* the job protocol, the kind registry and the numpy job kinds (:mod:`core_env.live.jobs`),
  the torch kind (:mod:`core_env.live.torch_jobs`), the Stable-Baselines3 kind
  (:mod:`core_env.live.sb3_jobs`) and their data (:mod:`core_env.live.datasets`);
* the pilot curves the workloads' targets come from (:mod:`core_env.live.pilots`) and the
  workloads (:mod:`core_env.live.live_workload`);
* the runtimes, one worker per node with state moves and fault handling: local processes
  (:mod:`core_env.live.runtime`) or Ray actors (:mod:`core_env.live.ray_runtime`);
* records of live episodes and their replay in the simulator (:mod:`core_env.live.record`);
* sessions: your jobs, submitted while a policy schedules them (:mod:`core_env.live.session`,
  :mod:`core_env.live.submissions`, the status views of :mod:`core_env.live.status`).

See ``docs/live.md``. A job kind's libraries are imported only when the kind is used: the
``live`` extra for ``mlp-digits`` and ``mlp-mnist1d``, ``jobs-torch`` for ``cnn-digits``,
``jobs-sb3`` for ``sb3-classic``::

    env = LiveSchedulerEnv(preset="Live-Small-v0")
"""

from core_env.live.env import LIVE_KEYS, RUNTIME_BACKENDS, LiveSchedulerEnv, make_runtime
from core_env.live.jobs import JOB_KINDS, JobSpec, MLPDigitsJob, TrainingJob, job_class, make_job
from core_env.live.live_presets import LIVE_PRESETS, live_config
from core_env.live.live_workload import LiveWorkload, generate_live_workload
from core_env.live.pilots import (
                                  PILOTS,
                                  Pilots,
                                  load_pilots,
                                  make_pilots,
                                  record_pilots,
                                  validate_pilots,
)
from core_env.live.record import LiveRecord, replay
from core_env.live.runtime import LocalRuntime, Runtime, SlotResult, SlotTask, run_serial
from core_env.live.session import LiveSession, LiveSessionEnv
from core_env.live.submissions import FolderSource, JsonLinesSource, Submission

__all__ = ["FolderSource", "JOB_KINDS", "JobSpec", "JsonLinesSource", "LIVE_KEYS",
           "LIVE_PRESETS", "LiveRecord", "LiveSchedulerEnv", "LiveSession", "LiveSessionEnv",
           "LiveWorkload", "LocalRuntime", "MLPDigitsJob", "PILOTS", "Pilots",
           "RUNTIME_BACKENDS", "Runtime", "SlotResult", "SlotTask", "Submission", "TrainingJob",
           "generate_live_workload", "job_class", "live_config", "load_pilots", "make_job",
           "make_pilots", "make_runtime", "record_pilots", "replay", "run_serial",
           "validate_pilots"]
