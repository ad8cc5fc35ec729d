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
from core_env.config import (ClusterConfig, CoreConfig, EpisodeConfig, RewardConfig,
                             WorkloadConfig)
from core_env.env import CoreSchedulerEnv
from core_env.layout import Layout, observation_layout, state_layout
from core_env.masks import sequential_mask, sequential_masks
from core_env.observe import ObsBlocks, assemble
from core_env.presets import PRESETS, make_config
from core_env.registration import register_presets
from core_env.workload import Workload, generate_workload

__version__ = "0.1.0"

parallel_env = scheduler_v0.parallel_env
env = scheduler_v0.env
raw_env = scheduler_v0.raw_env

register_presets()

__all__ = [
    "BatchedCoreEnv", "CentralCoreEnv", "ClusterConfig", "CoreConfig", "CoreSchedulerEnv",
    "EpisodeConfig", "Layout", "ObsBlocks", "PRESETS", "RewardConfig", "Workload", "WorkloadConfig",
    "assemble", "env", "generate_workload", "make_batched", "make_config", "observation_layout",
    "parallel_env", "raw_env", "register_presets", "scheduler_v0", "sequential_mask",
    "sequential_masks", "state_layout",
]
