"""Determinism across processes and backends (SPEC §3 "Seeding", §7 "Ray").

The same seed gives identical results in this process and in fresh interpreters (with
different ``PYTHONHASHSEED`` values, so nothing may depend on set or dict-of-str order): a
whole PettingZoo episode, a batched rollout, baseline episodes through the benchmark's
episode function, and the flow-matching forecaster. The local process pool and the Ray
backend give identical benchmark results, and results carry a config hash and code version
that are the same in every process and change when the configuration does.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from benchmarks import runner, store
from benchmarks.runner import EpisodeSpec, run_episode_spec
from tests.side_by_side import run_side_by_side

ROOT = Path(__file__).resolve().parents[2]

FINGERPRINT = r'''
import hashlib, json
import numpy as np
import torch
torch.set_num_threads(1)  # torch outputs depend on the thread count (as the runner pins)
import core_env
from benchmarks.runner import EpisodeSpec, run_episode_spec
from benchmarks.store import code_version, config_record


def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def pettingzoo_episode(seed):
    env = core_env.parallel_env(preset="CoRE-Small-v0", speed_choices=(0.5, 1.0, 2.0),
                                switch_cost=0.25)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    parts = []
    while env.agents:
        act = {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
        obs, rew, term, trunc, infos = env.step(act)
        parts += [np.stack([o["observation"] for o in obs.values()]),
                  np.array(list(rew.values())), env.state()]
    return digest(*parts), infos["node_0"]["episode"]


def batched(seed):
    envs = core_env.make_batched("CoRE-Small-v0", num_envs=8, seed=seed)
    obs, mask = envs.reset()
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(120):
        act = (rng.random(mask.shape) * mask).argmax(axis=-1)
        obs, mask, rew, done, info = envs.step(act)
        parts += [obs, rew, done]
    return digest(*parts)


def forecaster():
    from core_env.forecast import HistoryBatch
    from mara_agents.forecast import FlowMatchingForecaster
    fm = FlowMatchingForecaster.pretrained(seed=3)
    rng = np.random.default_rng(0)
    n, h = 16, 12
    log_work = np.sort(rng.uniform(0, 3, (n, h)), axis=1)
    log_loss = 1.0 - 0.4 * log_work + 0.02 * rng.standard_normal((n, h))
    batch = HistoryBatch(log_work, log_loss, np.full(n, h), np.arange(n))
    fc = fm.predict_batch(batch, np.full(n, -0.8), np.full(n, 200.0))
    return digest(*fc)


out = {"pettingzoo": pettingzoo_episode(7), "batched": batched(11), "forecaster": forecaster(),
       "episodes": [run_episode_spec(EpisodeSpec("CoRE-Small-v0", p, 5))
                    for p in ("random", "lara", "oracle_greedy")],
       "config_hash": config_record("CoRE-v0")["config_hash"], "code_version": code_version()}
print(json.dumps(out, sort_keys=True))
'''


def fingerprints_in_subprocesses(*hash_seeds: str) -> list[dict]:
    """The fingerprint in one subprocess per ``PYTHONHASHSEED``, run side by side."""
    runs = run_side_by_side(*({"args": [sys.executable, "-c", FINGERPRINT], "cwd": ROOT,
                               "env": {**os.environ, "PYTHONHASHSEED": seed}}
                              for seed in hash_seeds), timeout=300)
    for res in runs:
        assert res.returncode == 0, res.stderr[-3000:]
    return [json.loads(res.stdout.strip().splitlines()[-1]) for res in runs]


def fingerprint_here() -> dict:
    import torch

    before = torch.get_num_threads()
    scope: dict = {"__name__": "fingerprint"}
    lines = FINGERPRINT.strip().splitlines()
    try:
        exec(compile("\n".join(lines[:-1]), "<fingerprint>", "exec"), scope)  # all but print
    finally:
        torch.set_num_threads(before)
    return json.loads(json.dumps(scope["out"], sort_keys=True))


@pytest.mark.slow
def test_same_seed_gives_identical_results_in_separate_processes():
    a, b = fingerprints_in_subprocesses("0", "4242")
    assert a == b
    assert fingerprint_here() == a


def test_the_fingerprint_is_sensitive():
    """Control: the digests above would notice a different seed or a different action."""
    import torch

    before = torch.get_num_threads()
    scope: dict = {"__name__": "fingerprint"}
    src = FINGERPRINT.split("\nout = ")[0]
    exec(compile(src, "<fingerprint>", "exec"), scope)
    torch.set_num_threads(before)
    assert scope["pettingzoo_episode"](7) == scope["pettingzoo_episode"](7)
    assert scope["pettingzoo_episode"](7)[0] != scope["pettingzoo_episode"](8)[0]
    assert scope["batched"](11) != scope["batched"](12)


def test_config_hash_is_stable_and_changes_with_the_configuration(monkeypatch):
    import core_env

    h = store.config_record("CoRE-v0")["config_hash"]
    assert h == store.config_record("CoRE-v0")["config_hash"] and len(h) == 16
    assert h != store.config_record("CoRE-Heavy-v0")["config_hash"]
    changed = core_env.make_config("CoRE-v0", switch_cost=0.1)
    monkeypatch.setitem(core_env.PRESETS, "CoRE-v0", changed)
    assert store.config_record("CoRE-v0")["config_hash"] != h


def test_code_version_names_the_commit_and_hashes_the_sources(tmp_path, monkeypatch):
    v = store.code_version()
    head, _, src = v.partition("+src.")
    assert head and len(src) == 12 and int(src, 16) >= 0
    assert store.code_version() == v


SPECS = [EpisodeSpec("CoRE-Small-v0", p, s) for p in ("random", "edf", "lara")
         for s in range(3)]


@pytest.mark.slow
def test_local_serial_pool_and_ray_backends_give_identical_benchmark_results(tmp_path):
    pytest.importorskip("ray", reason="the optional [ray] extra is not installed")
    serial = runner.run_episodes(SPECS, tmp_path / "serial", run_episode_spec, workers=1,
                                  progress=False)
    pooled = runner.run_episodes(SPECS, tmp_path / "pool", run_episode_spec, workers=2,
                                  progress=False)
    remote = runner.run_episodes(SPECS, tmp_path / "ray", run_episode_spec, backend="ray",
                                  progress=False)
    assert serial == pooled == remote
    assert serial == [run_episode_spec(s) for s in SPECS]  # and equal to a direct call
    for d in ("serial", "pool", "ray"):
        manifest = json.loads((tmp_path / d / store.MANIFEST).read_text())
        assert manifest["config_hashes"] == {
            "CoRE-Small-v0": store.config_record("CoRE-Small-v0")["config_hash"]}


def fm_episode(spec: EpisodeSpec) -> dict:
    """A stand-in episode whose result is a digest of FM forecasts (torch), and the thread
    count it ran with."""
    import hashlib

    import numpy as np
    import torch

    from core_env.forecast import HistoryBatch
    from mara_agents.forecast import FlowMatchingForecaster

    rng = np.random.default_rng(spec.seed)
    n, h = 24, 10
    log_work = np.sort(rng.uniform(0, 3, (n, h)), axis=1)
    log_loss = 1.0 - 0.4 * log_work + 0.05 * rng.standard_normal((n, h))
    fc = FlowMatchingForecaster.pretrained(seed=spec.seed).predict_batch(
        HistoryBatch(log_work, log_loss, np.full(n, h), np.arange(n)), np.full(n, -0.8),
        np.full(n, 200.0))
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in fc))
    return {"preset": spec.preset, "policy": spec.policy, "seed": spec.seed,
            "fm": digest.hexdigest(), "threads": torch.get_num_threads()}


@pytest.mark.slow
def test_backends_pin_torch_threads_so_fm_forecasts_agree(tmp_path):
    """Found by this suite: FM forecasts differ with torch's thread count (1 vs 2 threads),
    so pool workers (all cores), Ray workers (1 thread) and the main process disagreed. The
    runner now pins every backend to ``EPISODE_THREADS`` threads."""
    import torch

    specs = [EpisodeSpec("CoRE-Small-v0", "fm", s) for s in range(3)]
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # a main process with more threads than the workers
    try:
        serial = runner.run_episodes(specs, tmp_path / "serial", fm_episode, workers=1,
                                      progress=False)
        assert torch.get_num_threads() == 2  # restored after the run
        pooled = runner.run_episodes(specs, tmp_path / "pool", fm_episode, workers=2,
                                      progress=False)
        runs = [serial, pooled]
        try:
            import ray  # noqa: F401

            runs.append(runner.run_episodes(specs, tmp_path / "ray", fm_episode,
                                             backend="ray", progress=False))
        except ImportError:
            pass
    finally:
        torch.set_num_threads(before)
    assert all(r == serial for r in runs)
    assert {r["threads"] for r in serial} == {runner.EPISODE_THREADS}
