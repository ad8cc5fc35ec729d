"""Integrity: every file the project loads is checked before it is trusted, workload values
cannot overflow on their way into the simulator, stored benchmark results are checked
against what they claim to be, workers die with their parent, and malformed calls are
refused at once with the state intact (docs/reliability.md, "What is checked on load").
Each test below failed on 537544f."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import core_env
from core_env import banks
from core_env.workload import generate_workload

torch = pytest.importorskip("torch")

from benchmarks import plots, report, runner  # noqa: E402
from benchmarks.runner import EpisodeSpec  # noqa: E402
from mara_agents import safe_io  # noqa: E402
from mara_agents.forecast.forecaster import FlowMatchingForecaster  # noqa: E402
from mara_agents.mat.checkpoint import load_checkpoint, shipped  # noqa: E402
from tests.benchmarks.fake_episodes import synthetic_episode  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = shipped()


# --- checkpoints ------------------------------------------------------------------------

def _largest_tensor_record(path: Path) -> str:
    with zipfile.ZipFile(path) as z:
        return max((i for i in z.infolist() if "/data/" in i.filename),
                   key=lambda i: i.file_size).filename


def _flip_bytes(src: Path, dst: Path) -> str:
    """Copy ``src`` to ``dst`` with 64 bytes flipped in its largest tensor record (the
    probe of the issue: torch.load alone accepts it)."""
    record = _largest_tensor_record(src)
    with zipfile.ZipFile(src) as z:
        info = z.getinfo(record)
        offset = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data = bytearray(src.read_bytes())
    for i in range(offset + 8, offset + 72):
        data[i] ^= 0x5A
    dst.write_bytes(bytes(data))
    return record


def test_a_flipped_weight_is_refused_naming_the_file_and_the_record(tmp_path):
    bad = tmp_path / "last.pt"
    record = _flip_bytes(SHIPPED, bad)
    torch.load(bad, weights_only=True)  # control: torch alone loads it
    with pytest.raises(ValueError, match="CRC-32 mismatch") as err:
        load_checkpoint(bad)
    assert str(bad) in str(err.value) and record in str(err.value)


def test_an_altered_tensor_with_valid_crcs_is_refused_by_the_integrity_record(tmp_path):
    blob = torch.load(SHIPPED, weights_only=True)
    name = next(iter(blob["state_dict"]))
    blob["state_dict"][name] = blob["state_dict"][name] + 0.01  # a re-saved, altered file
    path = tmp_path / "altered.pt"
    torch.save(blob, path)  # keeps the old integrity record
    with pytest.raises(ValueError, match=f"tensor 'state_dict/{name}' does not match"):
        load_checkpoint(path)


def test_altered_config_fields_are_refused(tmp_path):
    blob = torch.load(SHIPPED, weights_only=True)
    blob["train_config"] = {**blob["train_config"], "fm_samples": 1}
    path = tmp_path / "altered.pt"
    torch.save(blob, path)
    with pytest.raises(ValueError, match="configuration fields do not match"):
        load_checkpoint(path)


def test_nan_weights_are_refused_even_with_a_fresh_record(tmp_path):
    blob = torch.load(SHIPPED, weights_only=True)
    name = next(iter(blob["state_dict"]))
    blob["state_dict"][name] = torch.full_like(blob["state_dict"][name], float("nan"))
    path = tmp_path / "nan.pt"
    safe_io.save(path, blob)
    with pytest.raises(ValueError, match=f"'state_dict/{name}' holds non-finite"):
        load_checkpoint(path)


@pytest.mark.parametrize("change, match", [
    (lambda b: b.pop("state_dict"), "entry 'state_dict': expected a dict"),
    (lambda b: b.update(mat_config=[1, 2]), "entry 'mat_config': expected a dict"),
    (lambda b: b.update(format="other"), "not a MARA checkpoint"),
    (lambda b: b["train_config"].pop("forecaster"), "no forecaster name"),
])
def test_malformed_entries_are_one_value_error_naming_the_file(tmp_path, change, match):
    blob = torch.load(SHIPPED, weights_only=True)
    change(blob)
    path = tmp_path / "odd.pt"
    safe_io.save(path, blob)
    with pytest.raises(ValueError, match=match) as err:
        load_checkpoint(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("change, match", [
    (lambda b: b["mat_config"].update(heads_typo=3), "not a valid MAT configuration"),
    (lambda b: b["state_dict"].pop(next(iter(b["state_dict"]))), "weights do not fit"),
])
def test_weights_that_do_not_fit_name_the_file(tmp_path, change, match):
    from mara_agents.policy import make_policy

    blob = torch.load(SHIPPED, weights_only=True)
    change(blob)
    path = tmp_path / "odd.pt"
    safe_io.save(path, blob)
    with pytest.raises(ValueError, match=match) as err:
        make_policy("mara", core_env.parallel_env(preset="CoRE-v0"), checkpoint=path)
    assert str(path) in str(err.value)


def test_a_file_without_a_record_loads_with_a_warning_naming_it(tmp_path):
    blob = torch.load(SHIPPED, weights_only=True)
    blob.pop(safe_io.INTEGRITY_KEY)
    path = tmp_path / "legacy.pt"
    torch.save(blob, path)
    with pytest.warns(UserWarning, match="no integrity record") as rec:
        load_checkpoint(path)
    assert str(path) in str(rec[0].message)


def test_the_shipped_files_carry_integrity_records():
    files = [*ROOT.glob("mara_agents/weights/*.pt"), *ROOT.glob("mara_agents/weights/marl/*/*.pt"),
             *ROOT.glob("experiments/checkpoints/*/*.pt"),
             *ROOT.glob("mara_agents/forecast/weights/*.pt")]
    assert files
    for f in files:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            blob = safe_io.load(f)
        assert blob[safe_io.INTEGRITY_KEY] == safe_io.integrity_record(blob), f


def test_the_fm_loader_checks_the_record_too(tmp_path):
    from mara_agents.forecast.forecaster import CHECKPOINT_DIR, DEFAULT_CHECKPOINT

    blob = torch.load(CHECKPOINT_DIR / f"{DEFAULT_CHECKPOINT}.pt", weights_only=True)
    name = next(iter(blob["state_dict"]))
    blob["state_dict"][name] = blob["state_dict"][name] * 2
    path = tmp_path / "fm.pt"
    torch.save(blob, path)
    with pytest.raises(ValueError, match="does not match its sha256"):
        FlowMatchingForecaster.load(path)


def test_the_checkpoints_suite_exits_2_on_a_corrupted_checkpoint(tmp_path):
    bad = tmp_path / "last.pt"
    _flip_bytes(SHIPPED, bad)
    out = subprocess.run([sys.executable, "-m", "benchmarks", "checkpoints", str(bad),
                          "--seeds", "2", "--workers", "1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    assert str(bad) in out.stderr and "CRC-32" in out.stderr
    assert "Traceback" not in out.stderr


# --- workloads --------------------------------------------------------------------------

CFG = core_env.make_config("CoRE-Small-v0")


@pytest.mark.parametrize("field, value, match", [
    ("cap", lambda wl: np.full(wl.n_tasks, 1e30), "workload.cap"),
    ("cap", lambda wl: np.full(wl.n_tasks, 2 ** 63, dtype=np.uint64), "workload.cap"),
    ("cap", lambda wl: np.full(wl.n_tasks, 9), "cap in \\[1, 4\\]"),
    ("log_loss", lambda wl: np.full(wl.log_loss.shape, 1e300), "workload.log_loss"),
    ("true_log_loss", lambda wl: np.full(wl.log_loss.shape, -1e39), "workload.true_log_loss"),
    ("log_target", lambda wl: np.full(wl.n_tasks, 1e300), "workload.log_target"),
    ("family", lambda wl: np.full(wl.n_tasks, 100), "a family index in \\[0, 7\\)"),
    ("alpha", lambda wl: np.full(wl.n_tasks, 1e-50), "rounds to 0 in float32"),
    ("speeds", lambda wl: np.full(CFG.cluster.n_nodes, 1e-50), "rounds to 0 in float32"),
])
def test_values_that_would_overflow_in_the_cast_are_refused(field, value, match):
    env = core_env.CoreSchedulerEnv(CFG)
    env.reset(seed=1)
    before = {f.name: getattr(env.sim, f.name).copy() for f in dataclasses.fields(env.sim)}
    wl = generate_workload(CFG, np.random.default_rng(3))
    with pytest.raises(ValueError, match=match):
        env.reset(options={"workload": wl._replace(**{field: value(wl)})})
    for name, arr in before.items():
        assert np.array_equal(arr, getattr(env.sim, name)), name


# --- stored benchmark results -----------------------------------------------------------

def _specs():
    return [EpisodeSpec("CoRE-v0", pol, s) for pol in ("lara", "edf") for s in range(4)]


@pytest.mark.parametrize("tamper, why", [
    (lambda d: (d / "CoRE-v0__lara__1.json").write_text("{}"), "preset, policy and seed"),
    (lambda d: (d / "CoRE-v0__lara__1.json").write_text(json.dumps(
        {**json.loads((d / "CoRE-v0__lara__1.json").read_text()), "completion_rate": 0.99})),
     "completion_rate 0.99 is not"),
    (lambda d: shutil.copy(d / "CoRE-v0__lara__2.json", d / "CoRE-v0__lara__1.json"),
     "it holds CoRE-v0__lara__2"),
    (lambda d: (d / "CoRE-v0__lara__1.json").write_text(json.dumps(
        {**json.loads((d / "CoRE-v0__lara__1.json").read_text()), "config_hash": "x"})),
     "config hash 'x'"),
])
def test_a_tampered_result_is_moved_aside_recomputed_and_named(tmp_path, tamper, why):
    clean = runner.run_episodes(_specs(), tmp_path / "clean", synthetic_episode, workers=1,
                                 progress=False)
    run = tmp_path / "run"
    runner.run_episodes(_specs(), run, synthetic_episode, workers=1, progress=False)
    tamper(run / "episodes")
    with pytest.warns(UserWarning, match="CoRE-v0__lara__1.json") as rec:
        again = runner.run_episodes(_specs(), run, synthetic_episode, workers=1,
                                     progress=False)
    assert why in str(rec[0].message)
    assert again == clean
    assert (run / "episodes" / "CoRE-v0__lara__1.json.corrupt").exists()


def test_an_episode_function_with_an_inconsistent_result_fails_loudly(tmp_path):
    def broken(spec):
        return {**synthetic_episode(spec), "completed": 1000}

    with pytest.raises(RuntimeError, match="invalid result"):
        runner.run_episodes(_specs()[:1], tmp_path, broken, workers=1, progress=False)


def test_the_plot_temporary_file_has_a_unique_name(tmp_path, monkeypatch):
    rows = report.summarise([synthetic_episode(EpisodeSpec(p, "lara", s))
                              for p in ("CoRE-v0", "CoRE-Heavy-v0") for s in range(3)])
    moves = []
    real = os.replace
    monkeypatch.setattr(plots.os, "replace", lambda a, b: (moves.append(a), real(a, b)))
    for _ in range(2):
        plots.plot_vs_load(rows, tmp_path / "plot.png")
    assert len(moves) == 2 and moves[0] != moves[1]
    assert all(Path(m).parent == tmp_path for m in moves)
    assert (tmp_path / "plot.png").exists() and len(list(tmp_path.iterdir())) == 1


_ORPHAN_SCRIPT = """
import sys, time
from benchmarks import report, runner
from benchmarks.runner import EpisodeSpec
from tests.benchmarks.fake_episodes import slow_episode
specs = [EpisodeSpec("CoRE-v0", "lara", s) for s in range(40)]
runner.run_episodes(specs, __import__("pathlib").Path(sys.argv[1]), slow_episode, workers=2,
                     progress=False)
"""


def _children(pid: int) -> set[int]:
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.update(int(c) for c in text)
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_when_the_main_process_is_killed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path / "out")],
                            cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.5)
            workers = {c for c in _children(proc.pid)
                       if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()}
        assert len(workers) >= 2, "the pool did not start"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists()
                                                  for w in workers):
            time.sleep(0.2)
        alive = [w for w in workers if Path(f"/proc/{w}").exists()
                 and "Z" not in Path(f"/proc/{w}/stat").read_text().split()[2]]
        assert not alive, f"workers {alive} outlived their parent"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


# --- calls and data files ---------------------------------------------------------------

def test_a_bad_aec_action_is_refused_at_the_call_and_stores_nothing():
    aec = core_env.scheduler_v0.env(preset="CoRE-Small-v0")
    aec.reset(seed=0)
    first = aec.agent_selection
    with pytest.raises(ValueError, match=f"action of {first}"):
        aec.step(99)
    assert aec.agent_selection == first
    for _ in range(len(aec.possible_agents) * 3):  # the episode goes on normally
        aec.step(0)


@pytest.mark.parametrize("call, match", [
    (lambda: core_env.parallel_env(preset="CoRE-Small-v0").reset(options="x"), "options"),
    (lambda: core_env.parallel_env(preset="CoRE-Small-v0").reset(seed=True), "seed"),
    (lambda: core_env.parallel_env(preset="CoRE-Small-v0").reset(seed=1.5), "seed"),
    (lambda: core_env.make_batched(None), "env_id"),
    (lambda: core_env.make_batched("CoRE-Small-v0", num_envs=2).reset(seed=1.5), "seed"),
    (lambda: core_env.make_batched("CoRE-Small-v0", num_envs=2).reset(seed=[0, True]),
     r"seed\[1\]"),
])
def test_malformed_calls_are_value_errors_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_reused_env_is_bitwise_a_fresh_one():
    used = core_env.parallel_env(preset="CoRE-v0")
    obs, _ = used.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(150):
        if not used.agents:
            break
        obs, *_ = used.step({a: int(rng.choice(np.flatnonzero(obs[a]["action_mask"])))
                             for a in used.agents})
    again, _ = used.reset(seed=7)
    fresh_env = core_env.parallel_env(preset="CoRE-v0")
    fresh, _ = fresh_env.reset(seed=7)
    for a in fresh:
        assert again[a]["observation"].tobytes() == fresh[a]["observation"].tobytes(), a
    assert used.state().tobytes() == fresh_env.state().tobytes()


@pytest.fixture
def data_copy(tmp_path, monkeypatch):
    """A copy of the shipped data folder standing in for it (caches cleared)."""
    copy = tmp_path / "data"
    shutil.copytree(banks.DATA_DIR, copy)
    monkeypatch.setattr(banks, "DATA_DIR", copy.resolve())
    banks._load_shipped.cache_clear()
    yield copy
    banks._load_shipped.cache_clear()


def test_a_missing_manifest_is_refused(data_copy):
    (data_copy / banks.MANIFEST).unlink()
    with pytest.raises(banks.BankError, match="manifest missing"):
        banks._load_shipped("lcdb")


@pytest.mark.parametrize("text", ["[]", '{"files": 3}', '{"files": {"lcdb.npz": {}}}',
                                  "{not json"])
def test_a_malformed_manifest_is_a_bank_error_naming_it(data_copy, text):
    (data_copy / banks.MANIFEST).write_text(text)
    with pytest.raises(banks.BankError, match="manifest") as err:
        banks._load_shipped("lcdb")
    assert str(data_copy / banks.MANIFEST) in str(err.value)


def test_a_shipped_file_missing_from_the_manifest_is_refused(data_copy):
    manifest = json.loads((data_copy / banks.MANIFEST).read_text())
    del manifest["files"]["lcdb.npz"]
    (data_copy / banks.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(banks.BankError, match="not listed"):
        banks._load_shipped("lcdb")
