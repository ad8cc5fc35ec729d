"""core-env: an arrival-driven, discrete-node CoRE-Learning scheduling environment.

Quick use::

    import core_env, pettingzoo
    env = pettingzoo.make("parallel", "core_env/CoRE-v0")
    # or: from core_env import scheduler_v0; env = scheduler_v0.parallel_env()
    # or: core_env.parallel_env(preset="CoRE-Small-v0", n_nodes=8)
    # batched: core_env.make_batched("CoRE-v0", num_envs=256, seed=0)

This package never imports torch.
"""

from __future__ import annotations

from core_env import scheduler_v0
from core_env.batched import BatchedCoreEnv, make_batched
from core_env.central import CentralCoreEnv
from core_env.config import ClusterConfig, CoreConfig, EpisodeConfig, RewardConfig, WorkloadConfig
from core_env.env import CoreSchedulerEnv
from core_env.layout import Layout, observation_layout, state_layout
from core_env.masks import sequential_mask
from core_env.presets import PRESETS, make_config
from core_env.registration import register_presets
from core_env.workload import Workload, generate_workload

__version__ = "0.1.0"

parallel_env = scheduler_v0.parallel_env
raw_env = scheduler_v0.raw_env
# core_env.env is the module core_env/env.py (calling it still builds the AEC env, with a
# DeprecationWarning); the AEC env is scheduler_v0.env(...)

register_presets()
del register_presets

__all__ = [
    # build an environment
    "parallel_env", "raw_env", "scheduler_v0", "make_batched", "make_config", "PRESETS",
    # what they are
    "CoreSchedulerEnv", "CentralCoreEnv", "BatchedCoreEnv",
    "CoreConfig", "ClusterConfig", "WorkloadConfig", "RewardConfig", "EpisodeConfig",
    "Workload", "generate_workload",
    # reading observations and acting under the parallelism caps
    "Layout", "observation_layout", "state_layout", "sequential_mask",
]
"""The public API. Everything else is importable by its module path (``core_env.observe``,
``core_env.masks.sequential_masks``, ``core_env.forecast``, ``core_env.bound``,
``core_env.live``, ``core_env.testing``)."""
