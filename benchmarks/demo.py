"""The demo run by ``make demo``: the ``default`` suite (every policy on CoRE-v0 and
CoRE-Heavy-v0, seeds 0-9), its Markdown table printed.

Results go to ``results/default`` (rerunning resumes; delete the folder to recompute).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.suites import run_suite


def main(out: Path = Path("results/default"), progress: bool = True, workers: int = 2) -> str:
    return run_suite("default", out, workers=workers, progress=progress)
