"""core_env.live's torch and Stable-Baselines3 job kinds where the test itself drives torch:
the sb3-classic job's loss and its hands off the process's generators and temporary folder,
and the cnn-digits job's losses on any torch thread count (the kinds' other checks, through
core_env's API alone, are tests/core_env/live/test_runtime.py's)."""

from __future__ import annotations

import numpy as np
import pytest

from core_env.live import JobSpec, make_job, run_serial
from tests.core_env.live.test_runtime import needs


def test_the_sb3_job_has_the_banks_loss_and_leaves_the_process_generators_alone():
    torch = pytest.importorskip("torch")
    needs("sb3-classic")
    from core_env.live.classic_control import LOSS_FLOOR, normalised_loss

    assert normalised_loss(250.0, "CartPole-v1") == 0.5
    assert normalised_loss(600.0, "CartPole-v1") == LOSS_FLOOR
    assert normalised_loss(-280.0, "Acrobot-v1") == 0.5
    torch.manual_seed(123)
    np.random.seed(123)
    want = (torch.rand(2), np.random.rand(2))
    torch.manual_seed(123)
    np.random.seed(123)
    job = make_job(JobSpec("sb3-classic", {"algo": "a2c", "n_steps": 16, "unit_steps": 64},
                           seed=0))
    job.train(1, 2)
    assert torch.equal(torch.rand(2), want[0]) and np.array_equal(np.random.rand(2), want[1])
    for bad, message in (({"algo": "dqn"}, "algo"), ({"env_id": "Pong-v5"}, "env_id"),
                         ({"unit_steps": 100}, "multiple of n_steps"),
                         ({"n_steps": 0}, "n_steps: expected an integer >= 1"),
                         ({"lr": float("nan")}, "lr: expected a .*, got nan")):
        with pytest.raises(ValueError, match=message):
            make_job(JobSpec("sb3-classic", bad))


def test_the_sb3_job_leaves_no_log_folders_behind(tmp_path, monkeypatch):
    """SB3's default logger makes a new ``SB3-<time>`` folder in the temporary directory at
    every learn(), so one per slot; the job's models log nowhere."""
    pytest.importorskip("torch")
    needs("sb3-classic")
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    job = make_job(JobSpec("sb3-classic", {"algo": "ppo", "n_steps": 16, "batch": 16,
                                           "unit_steps": 32}, seed=0))
    job.train(1, 1)
    job.train(1, 2)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("SB3-")] == []


def test_the_cnn_job_gives_the_same_losses_whatever_the_thread_count():
    torch = pytest.importorskip("torch")
    needs("cnn-digits")
    with pytest.raises(ValueError, match="channels: expected an integer >= 1, got True"):
        make_job(JobSpec("cnn-digits", {"channels": True}))
    spec = JobSpec("cnn-digits", {"channels": 8}, seed=2)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run_serial(spec, [(1, 1), (1, 4)])
        torch.set_num_threads(4)
        assert run_serial(spec, [(1, 1), (1, 4)]) == one
        assert torch.get_num_threads() == 4  # the process's setting is restored
    finally:
        torch.set_num_threads(threads)
