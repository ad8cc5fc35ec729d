"""Fixtures of the documentation tests: a doc snippet run the way a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

RunScript = Callable[..., subprocess.CompletedProcess]


def run_as_script(source: str, folder: Path, name: str = "example.py",
                  timeout: float = 300) -> subprocess.CompletedProcess:
    """Save ``source`` as ``folder/name`` and run ``python name`` there, as a user who copied
    a snippet into a file does (worker processes that are spawned import that file, so a
    snippet without its ``if __name__ == "__main__":`` guard fails here and not under
    ``python -c``); returns what it did (``stdout``, ``stderr``, ``returncode``)."""
    path = folder / name
    path.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, name], cwd=folder, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


@pytest.fixture
def run_script() -> RunScript:
    """:func:`run_as_script`."""
    return run_as_script
