"""Live presets (SPEC §8): the simulator's layouts over real jobs.

==================  ==========================================================
id                  what it is
==================  ==========================================================
Live-Small-v0       CoRE-Small-v0's layout (4 nodes, K=8, 40 arrival slots)
Live-v0             CoRE-v0's layout (16 nodes, K=32, 200 arrival slots)
==================  ==========================================================

Tasks are jobs of the shipped pilot set (:mod:`core_env.live.pilots`); required work is in
the jobs' work units. No switching cost is charged in work (the work clock): moving a job's
state costs seconds, which the env measures.
"""

from __future__ import annotations

from typing import Any

from core_env.config import CoreConfig
from core_env.presets import PRESETS, preset_config

LIVE_PRESETS: dict[str, CoreConfig] = {
    "Live-Small-v0": PRESETS["CoRE-Small-v0"].replace(switch_cost=0.0),
    "Live-v0": PRESETS["CoRE-v0"].replace(switch_cost=0.0),
}
"""Live preset id -> configuration."""


def live_config(preset: str = "Live-Small-v0", **overrides: Any) -> CoreConfig:
    """The configuration of a live preset with flat overrides applied; like
    :func:`core_env.make_config`, the id may carry its own, ``"Live-v0:load=3"``.

    Raises:
        ValueError: unknown preset id, unknown override name, an override given twice, or an
            invalid value.
    """
    return preset_config(LIVE_PRESETS, preset, overrides)
