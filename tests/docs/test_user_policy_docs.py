"""The worked example of docs/benchmarks.md ("Your own scheduler in every suite") works as
written: its module, saved as ``mysched.py``, runs through the documented command and the
documented Python call, saved as a script and run as ``python run_mine.py`` (its worker
processes import that file)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.side_by_side import run_side_by_side

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"


def _blocks() -> list[str]:
    section = PAGE.read_text().split("## Your own scheduler in every suite", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_documented_scheduler_runs_in_a_suite(tmp_path):
    module, call = _blocks()[:2]
    (tmp_path / "mysched.py").write_text(module)
    (tmp_path / "run_mine.py").write_text(call)
    cmd = next(line for line in PAGE.read_text().splitlines()
               if line.startswith("mara-bench default --policies"))
    assert "mysched:EarliestDeadline" in cmd
    # the command and the Python call, side by side (they write different folders)
    out, ran = run_side_by_side(
        {"args": [sys.executable, "-m", "benchmarks", *cmd.split()[1:], "--presets", "CoRE-v0",
                  "--seeds", "2", "--workers", "2", "--out", str(tmp_path / "cli")],
         "cwd": tmp_path},
        {"args": [sys.executable, "run_mine.py"], "cwd": tmp_path})
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if "mysched:EarliestDeadline" in line)
    assert "pts (" in row
    assert ran.returncode == 0, ran.stderr
    assert "mysched:EarliestDeadline" in ran.stdout
    assert (tmp_path / "results" / "mine" / "table.md").exists()
