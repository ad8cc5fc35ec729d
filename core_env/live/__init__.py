"""Live mode (SPEC §8): real training jobs on real worker processes.

This package holds the runtime that live episodes are built on: the job protocol and the
built-in job kinds (:mod:`core_env.live.jobs`) and the local backend, one worker process per
node with state moves and fault handling (:mod:`core_env.live.runtime`). See
``docs/live.md``. Job kinds that need third-party libraries import them only when used
(``pip install -e ".[live]"`` for the built-in ones).
"""

from core_env.live.jobs import JOB_KINDS, JobSpec, MLPDigitsJob, TrainingJob, job_class, make_job
from core_env.live.runtime import LocalRuntime, SlotResult, SlotTask, run_serial

__all__ = ["JOB_KINDS", "JobSpec", "LocalRuntime", "MLPDigitsJob", "SlotResult", "SlotTask",
           "TrainingJob", "job_class", "make_job", "run_serial"]
