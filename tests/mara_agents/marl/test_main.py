"""``python -m mara_agents.marl train``: it trains on the portable torch settings whether or
not the caller set them (it starts itself again with them), and says what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torchrl", reason="the [torchrl] extra is not installed")

import torch  # noqa: E402

from mara_agents.marl import PORTABLE_TORCH  # noqa: E402
from mara_agents.marl.common import load_model  # noqa: E402
from tests.side_by_side import run_side_by_side  # noqa: E402


def train(out, extra_env):
    """The command (one thread) writing ``out``, as arguments of :func:`run_side_by_side`."""
    env = {k: v for k, v in os.environ.items() if k not in PORTABLE_TORCH}
    env.update(OMP_NUM_THREADS="1", **extra_env)
    return {"args": [sys.executable, "-m", "mara_agents.marl", "train", "ippo", "--preset",
                     "CoRE-Small-v0", "--env-steps", "64", "--out", str(out)], "env": env}


@pytest.mark.slow
def test_the_command_trains_on_the_portable_settings(tmp_path):
    plain, pinned = run_side_by_side(train(tmp_path / "plain.pt", {}),
                                     train(tmp_path / "pinned.pt", PORTABLE_TORCH))
    assert plain.returncode == 0 and pinned.returncode == 0, plain.stderr + pinned.stderr
    a = load_model(tmp_path / "plain.pt", "ippo")["actor_state"]
    b = load_model(tmp_path / "pinned.pt", "ippo")["actor_state"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_bad_arguments_exit_with_a_message(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "mara_agents.marl", "train", "ippo", "--preset",
                          "CoRE-v9", "--env-steps", "64", "--out", str(tmp_path / "x.pt")],
                         env={**os.environ, **PORTABLE_TORCH}, capture_output=True, text=True)
    assert bad.returncode == 2 and "preset" in bad.stderr
