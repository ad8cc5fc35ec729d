"""The MARL model that ships with the package (issue 70 item 4): the plain name runs it on
the preset it was trained for with nothing trained here, as it was trained (sequential
decoding: no capacity conflict), and a damaged copy is refused."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("torch", reason="the [agents] extra is not installed")

import core_env  # noqa: E402
from mara_agents.marl import MODELS_DIR, shipped_model  # noqa: E402
from mara_agents.marl.common import SharedActorPolicy, load_model  # noqa: E402
from mara_agents.policy import make_policy, run_episode  # noqa: E402
from mara_agents.policy_spec import file_fingerprint, policy_fingerprint  # noqa: E402

PRESET = "CoRE-Small-v0"


def test_the_shipped_mappo_runs_from_a_fresh_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no results/marl/models here
    assert not MODELS_DIR.exists()
    path = shipped_model(PRESET, "mappo")
    blob = load_model(path, "mappo")  # integrity-checked
    assert blob["preset"] == PRESET and blob["config"]["decoding"] == "sequential"
    assert blob["env_steps"] == 2_000_000
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its own preset's model: no fallback warning
        env, policy = make_policy("mappo", core_env.parallel_env(preset=PRESET), preset=PRESET)
    assert isinstance(policy, SharedActorPolicy) and policy.deterministic
    stats = run_episode(env, policy, seed=0)
    assert stats["capacity_conflicts"] == 0 and stats["illegal_actions"] == 0
    assert policy_fingerprint("mappo") == file_fingerprint(path)
    with pytest.raises(ValueError, match="no trained model"):  # none shipped for CoRE-v0
        make_policy("mappo", core_env.parallel_env(preset="CoRE-v0"), preset="CoRE-v0")


def test_a_damaged_copy_is_refused(tmp_path):
    data = bytearray(shipped_model(PRESET, "mappo").read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "mappo.pt"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        load_model(bad, "mappo")
