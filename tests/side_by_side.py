"""Subprocesses of a test run side by side (the machine has two cores): one helper."""

from __future__ import annotations

import subprocess
from typing import Any


def run_side_by_side(*commands: dict[str, Any], timeout: float = 600
                     ) -> list[subprocess.CompletedProcess]:
    """Start every command (``subprocess.Popen`` keyword arguments: ``args``, ``env``,
    ``cwd``), wait for all of them and return what each did, as ``subprocess.run`` would
    with ``capture_output=True, text=True``; a command still running when the test stops
    (a timeout, an error) is killed."""
    procs = [subprocess.Popen(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **c)
             for c in commands]
    try:
        outs = [proc.communicate(timeout=timeout) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    return [subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
            for proc, (out, err) in zip(procs, outs, strict=False)]
