"""Registration of the presets with PettingZoo's and Gymnasium's registries.

After ``import core_env``::

    pettingzoo.make("parallel", "core_env/CoRE-v0", n_nodes=8)   # CoreSchedulerEnv
    pettingzoo.make("aec", "core_env/CoRE-v0")                   # AEC conversion
    gymnasium.make("core_env:core_env/CoRE-v0")                  # CentralCoreEnv
"""

from __future__ import annotations

from typing import Any

import gymnasium
import pettingzoo

from core_env.aec import aec_env
from core_env.env import CoreSchedulerEnv
from core_env.presets import PRESETS

NAMESPACE = "core_env"


def make_parallel(preset: str, **overrides: Any) -> CoreSchedulerEnv:
    """Entry point of the PettingZoo parallel registry."""
    return CoreSchedulerEnv(preset=preset, **overrides)


def make_aec(preset: str, **overrides: Any):
    """Entry point of the PettingZoo AEC registry."""
    return aec_env(CoreSchedulerEnv(preset=preset, **overrides))


def make_live_parallel(preset: str, **overrides: Any):
    """Entry point of the live presets in the PettingZoo parallel registry."""
    from core_env.live.env import LiveSchedulerEnv

    return LiveSchedulerEnv(preset=preset, **overrides)


def make_live_aec(preset: str, **overrides: Any):
    """Entry point of the live presets in the PettingZoo AEC registry."""
    return aec_env(make_live_parallel(preset, **overrides))


LIVE_PRESET_IDS = ("Live-Small-v0", "Live-v0")
"""The live presets (:mod:`core_env.live.live_presets`), registered for PettingZoo only."""


def _register_pettingzoo(preset: str, parallel: Any, aec: Any) -> None:
    env_id = f"{NAMESPACE}/{preset}"
    for kind, registry, entry in (("parallel", pettingzoo.parallel_registry, parallel),
                                  ("aec", pettingzoo.aec_registry, aec)):
        if env_id not in registry:
            pettingzoo.register(kind, env_id, entry_point=entry, kwargs={"preset": preset})


def register_presets() -> None:
    """Register every preset (idempotent)."""
    for preset in LIVE_PRESET_IDS:
        _register_pettingzoo(preset, make_live_parallel, make_live_aec)
    for preset in PRESETS:
        _register_pettingzoo(preset, make_parallel, make_aec)
        env_id = f"{NAMESPACE}/{preset}"
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="core_env.central:CentralCoreEnv",
                               kwargs={"preset": preset})
