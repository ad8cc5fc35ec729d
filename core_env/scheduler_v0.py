"""PettingZoo module convention: ``from core_env import scheduler_v0``.

``scheduler_v0.parallel_env(**kw)`` (parallel API), ``scheduler_v0.env(**kw)`` (AEC API) and
``scheduler_v0.raw_env`` (the unwrapped parallel class). Keyword arguments are those of
:class:`core_env.env.CoreSchedulerEnv` (``config``, ``preset``, ``render_mode`` and flat
configuration overrides).
"""

from __future__ import annotations

from typing import Any

from core_env.aec import aec_env
from core_env.env import CoreSchedulerEnv

raw_env = CoreSchedulerEnv


def parallel_env(**kwargs: Any) -> CoreSchedulerEnv:
    """The parallel environment."""
    return CoreSchedulerEnv(**kwargs)


def env(**kwargs: Any):
    """The AEC environment (PettingZoo's conversion of the parallel one, with each action
    checked when it is given: :mod:`core_env.aec`)."""
    return aec_env(CoreSchedulerEnv(**kwargs))
