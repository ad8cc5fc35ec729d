"""Configuration: validation of every field, overrides, presets (SPEC §3 "Configuration")."""

from __future__ import annotations

import dataclasses
import math

import pytest

import core_env
from core_env import CoreConfig, make_config
from core_env.config import ClusterConfig, EpisodeConfig, RewardConfig, WorkloadConfig

PRESET_IDS = ["CoRE-v0", "CoRE-Heavy-v0", "CoRE-Extreme-v0", "CoRE-HeldOut-v0", "CoRE-Small-v0"]

# (field, bad value, name that must appear in the message)
BAD_VALUES = [
    ("n_nodes", 0), ("n_nodes", 1025), ("n_nodes", 4.0), ("n_nodes", True), ("n_nodes", "4"),
    ("n_nodes", -3),
    ("max_visible_tasks", 0), ("max_visible_tasks", 513), ("max_visible_tasks", 2.5),
    ("max_visible_tasks", None),
    ("switch_cost", -0.1), ("switch_cost", 1.0), ("switch_cost", 1.5), ("switch_cost", math.nan),
    ("switch_cost", "0.1"),
    ("node_speeds", (1.0,) * 3), ("node_speeds", (0.0,) * 16), ("node_speeds", (5.0,) * 16),
    ("node_speeds", (-1.0,) * 16), ("node_speeds", (math.inf,) * 16), ("node_speeds", 1.0),
    ("speed_choices", ()), ("speed_choices", (0.0, 1.0)), ("speed_choices", (4.5,)),
    ("speed_choices", 2.0),
    ("mix", "nope"), ("mix", ""), ("mix", 3),
    ("load", 0.0), ("load", -1.0), ("load", 20.5), ("load", math.inf), ("load", math.nan),
    ("load", "1"),
    ("base_arrival_rate", 0.0), ("base_arrival_rate", 64.5), ("base_arrival_rate", -0.5),
    ("arrival_slots", 0), ("arrival_slots", 100_001), ("arrival_slots", 10.0),
    ("required_work", (0.1, 10.0)), ("required_work", (10.0, 5.0)),
    ("required_work", (1.0, 3000.0)),
    ("required_work", 3.0), ("required_work", (1.0, 2.0, 3.0)), ("required_work", (1.0, math.nan)),
    ("deadline_slack", (0.0, 1.0)), ("deadline_slack", (1.0, 25.0)), ("deadline_slack", (2.0, 1.0)),
    ("window", (0, 5)), ("window", (5, 4)), ("window", (1, 10_001)), ("window", (1.0, 5.0)),
    ("window", (1, 2, 3)), ("window", 5),
    ("parallelism_choices", ()), ("parallelism_choices", (0,)), ("parallelism_choices", (1025,)),
    ("parallelism_choices", (1.5,)), ("parallelism_choices", (True,)), ("parallelism_choices", 2),
    ("alpha_range", (0.0, 1.0)), ("alpha_range", (0.5, 1.5)), ("alpha_range", (0.9, 0.6)),
    ("shaping_beta", -0.5), ("shaping_beta", 100.5), ("shaping_beta", math.inf),
    ("shaping_beta", math.nan),
    ("max_steps", 0), ("max_steps", 1_000_001), ("max_steps", 5.0), ("max_steps", -1),
]


@pytest.mark.parametrize("field, value", BAD_VALUES,
                         ids=[f"{f}={v!r}" for f, v in BAD_VALUES])
def test_invalid_field_rejected_with_its_name(field, value):
    with pytest.raises(ValueError) as err:
        make_config("CoRE-v0", **{field: value})
    assert field in str(err.value)


@pytest.mark.parametrize("field, value", [("n_nodes", 0), ("load", 25.0), ("shaping_beta", -1.0),
                                          ("switch_cost", 1.0), ("max_steps", 0)])
def test_message_names_value_and_range(field, value):
    with pytest.raises(ValueError) as err:
        make_config("CoRE-v0", **{field: value})
    msg = str(err.value)
    assert field in msg and repr(value) in msg
    assert "[" in msg or "(" in msg  # an allowed range is stated


def test_node_speeds_and_speed_choices_are_exclusive():
    with pytest.raises(ValueError, match="node_speeds"):
        make_config("CoRE-Small-v0", node_speeds=(1.0,) * 4, speed_choices=(1.0, 2.0))


def test_section_override_with_wrong_type_rejected():
    with pytest.raises(ValueError, match="cluster"):
        make_config("CoRE-v0", cluster="big")
    with pytest.raises(ValueError, match="reward"):
        CoreConfig(reward=ClusterConfig())


def test_unknown_override_and_unknown_preset_rejected():
    with pytest.raises(ValueError, match="n_agents"):
        make_config("CoRE-v0", n_agents=4)
    with pytest.raises(ValueError, match="preset"):
        make_config("CoRE-v9")
    with pytest.raises(ValueError):
        core_env.parallel_env(preset="CoRE-v0", n_agents=4)
    with pytest.raises(ValueError):
        core_env.parallel_env(preset="No-Such-v0")


def test_invalid_value_rejected_by_env_constructors():
    with pytest.raises(ValueError, match="n_nodes"):
        core_env.parallel_env(preset="CoRE-Small-v0", n_nodes=0)
    with pytest.raises(ValueError, match="load"):
        core_env.make_batched("CoRE-Small-v0", num_envs=2, load=-1.0)
    with pytest.raises(ValueError, match="shaping_beta"):
        core_env.CentralCoreEnv(preset="CoRE-Small-v0", shaping_beta=-1.0)


@pytest.mark.parametrize("preset", PRESET_IDS)
def test_presets_are_valid_configs(preset):
    cfg = make_config(preset)
    assert isinstance(cfg, CoreConfig)
    assert cfg is core_env.PRESETS[preset]
    # re-validating every section from its own fields succeeds (each value is in range)
    for section in (cfg.cluster, cfg.workload, cfg.reward, cfg.episode):
        type(section)(**{f.name: getattr(section, f.name) for f in dataclasses.fields(section)})
    assert cfg.max_steps > cfg.workload.arrival_slots
    assert cfg.workload.max_tasks > cfg.workload.arrival_rate * cfg.workload.arrival_slots


def test_preset_set_is_complete():
    assert set(PRESET_IDS) <= set(core_env.PRESETS)


def test_default_max_steps():
    cfg = make_config("CoRE-Small-v0")
    assert cfg.episode.max_steps is None
    assert cfg.max_steps == cfg.workload.arrival_slots + cfg.workload.window[1] + 1
    assert make_config("CoRE-Small-v0", max_steps=17).max_steps == 17


@pytest.mark.parametrize("field, value, section", [
    ("n_nodes", 8, "cluster"), ("max_visible_tasks", 5, "cluster"), ("load", 1.7, "workload"),
    ("shaping_beta", 0.25, "reward"), ("switch_cost", 0.3, "cluster"),
    ("arrival_slots", 12, "workload"), ("max_steps", 33, "episode"),
    ("mix", "held-out", "workload"),
])
def test_replace_changes_only_that_field(field, value, section):
    base = make_config("CoRE-v0")
    new = base.replace(**{field: value})
    assert getattr(getattr(new, section), field) == value
    assert getattr(getattr(base, section), field) != value  # the original is untouched
    for name in ("cluster", "workload", "reward", "episode"):
        old_sec, new_sec = getattr(base, name), getattr(new, name)
        for f in dataclasses.fields(old_sec):
            if f.name != field:
                assert getattr(new_sec, f.name) == getattr(old_sec, f.name), (name, f.name)


def test_replace_node_speeds_with_n_nodes_together():
    cfg = make_config("CoRE-v0").replace(n_nodes=2, node_speeds=[0.5, 2.0])
    assert cfg.cluster.n_nodes == 2
    assert cfg.cluster.node_speeds == (0.5, 2.0)  # list accepted, stored as a tuple of floats
    assert cfg.cluster.max_speed == 2.0
    with pytest.raises(ValueError, match="node_speeds"):
        make_config("CoRE-v0").replace(node_speeds=(0.5, 2.0))  # 16 nodes


def test_replace_whole_section_and_field():
    cfg = make_config("CoRE-v0").replace(cluster=ClusterConfig(n_nodes=3), max_visible_tasks=4)
    assert (cfg.cluster.n_nodes, cfg.cluster.max_visible_tasks) == (3, 4)


def test_replaced_config_drives_the_env():
    cfg = make_config("CoRE-Small-v0").replace(n_nodes=3, max_visible_tasks=5, load=2.0,
                                               shaping_beta=0.0, switch_cost=0.2)
    env = core_env.parallel_env(config=cfg)
    assert env.possible_agents == ["node_0", "node_1", "node_2"]
    assert all(env.action_space(a).n == 6 for a in env.possible_agents)
    assert env.config.reward.shaping_beta == 0.0
    # overrides on top of an explicit config
    env2 = core_env.parallel_env(config=cfg, n_nodes=2)
    assert env2.possible_agents == ["node_0", "node_1"]
    assert env2.config.cluster.max_visible_tasks == 5


def test_configs_are_frozen_and_hashable_by_value():
    cfg = make_config("CoRE-v0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.cluster.n_nodes = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.reward = RewardConfig()  # type: ignore[misc]
    assert cfg.replace(n_nodes=16) == cfg
    assert make_config("CoRE-v0", load=1.5) == core_env.PRESETS["CoRE-Heavy-v0"]


def test_max_speed_and_arrival_rate_properties():
    assert ClusterConfig().max_speed == 1.0
    assert ClusterConfig(n_nodes=2, speed_choices=(0.5, 3.0)).max_speed == 3.0
    w = WorkloadConfig(load=2.5, base_arrival_rate=0.4)
    assert w.arrival_rate == pytest.approx(1.0)
    assert EpisodeConfig().max_steps is None


def test_no_config_from_argv(monkeypatch):
    """No configuration is read from argv at construction time."""
    import sys
    monkeypatch.setattr(sys, "argv", ["prog", "--n_nodes", "3", "n_nodes=3"])
    env = core_env.parallel_env(preset="CoRE-Small-v0")
    assert len(env.possible_agents) == 4


def test_wrong_config_object_with_overrides_raises_value_error():
    with pytest.raises(ValueError, match="config"):
        core_env.parallel_env(config={"n_nodes": 3}, n_nodes=2)


def test_wrong_config_object_raises_value_error():
    with pytest.raises(ValueError, match="config"):
        core_env.parallel_env(config={"n_nodes": 3})


def test_a_preset_spec_carries_its_overrides():
    from core_env.presets import split_preset

    assert split_preset("CoRE-v0") == ("CoRE-v0", {})
    assert split_preset("CoRE-v0:load=1.5, speed_choices=(0.5,1,2),mix=held-out") == (
        "CoRE-v0", {"load": 1.5, "speed_choices": (0.5, 1, 2), "mix": "held-out"})
    spec = "CoRE-v0:switch_cost=0.3,speed_choices=(0.3, 1.0, 1.4)"
    assert make_config(spec) == make_config("CoRE-v0", switch_cost=0.3,
                                            speed_choices=(0.3, 1.0, 1.4))
    assert core_env.parallel_env(preset=spec).unwrapped.config == make_config(spec)
    assert make_config("CoRE-Switch-v0:load=2").workload.load == 2.0


@pytest.mark.parametrize("spec, says", [
    ("CoRE-v0:switch_cost", "expected ID:name=value"),
    ("CoRE-v0:=1", "expected ID:name=value"),
    ("CoRE-v0:load=1,load=2", "load is given twice"),
    ("CoRE-v9:load=1", "preset: expected one of"),
    ("CoRE-v0:nope=1", "unknown configuration override 'nope'"),
    ("CoRE-v0:switch_cost=2", "switch_cost: expected a finite number"),
    ("CoRE-v0:mix=nope", "mix"),
])
def test_a_bad_preset_spec_is_refused_naming_what_is_wrong(spec, says):
    with pytest.raises(ValueError, match=says):
        make_config(spec)


def test_an_override_in_both_the_spec_and_a_keyword_is_refused():
    with pytest.raises(ValueError, match=r"\['load'\] given both"):
        make_config("CoRE-v0:load=1.5", load=2.0)
