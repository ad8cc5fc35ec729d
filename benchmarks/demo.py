"""The demo: the ``default`` suite (every policy on CoRE-v0 and CoRE-Heavy-v0, seeds 0-9) and
its one-row-per-policy summary, the table of the README (``mara-bench demo``).

Results go to ``results/default`` (rerunning resumes; delete the folder to recompute); the
full table, with confidence intervals of the completion rates and utilizations, is
``results/default/table.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.report import REFERENCE_POLICY, markdown_table
from benchmarks.suites import SUITES, run_suite


def summary_table(rows: Sequence[dict[str, Any]], presets: Sequence[str],
                  reference: str = REFERENCE_POLICY) -> str:
    """One row per policy, per preset the mean completion rate, the paired difference to
    ``reference`` (points, 95% CI) and, where the episodes carry group counts, the worst
    group (:func:`benchmarks.report.audit_row`), from :func:`benchmarks.report.summarise`'s
    rows, formatted as in the full table. Policies in order of their mean completion rate
    over the presets, highest first."""
    by = {(r["preset"], r["policy"]): r for r in rows if not r.get("is_bound")}
    policies = {policy for _, policy in by}
    ref_name = "LARA" if reference == REFERENCE_POLICY else reference

    def mean_rate(policy: str) -> float:
        return sum(by[(p, policy)]["completion_rate"] for p in presets) / len(presets)

    audit = any("worst_group" in r for r in by.values())
    header = ["policy"]
    for preset in presets:
        header += [f"{preset} completion", f"vs {ref_name}, paired (95% CI)"]
        header += ["worst group"] if audit else []
    body = []
    for policy in sorted(policies, key=lambda p: (-mean_rate(p), p)):
        cells = [policy]
        for preset in presets:
            r = by[(preset, policy)]
            cells.append(f"{100 * r['completion_rate']:.1f}%")
            cells.append(f"{100 * r['diff_vs_ref']:+.1f} pts ({100 * r['diff_ci_low']:+.1f}, "
                         f"{100 * r['diff_ci_high']:+.1f})" if "diff_vs_ref" in r else "-")
            if audit:
                cells.append(f"{100 * r['worst_group']:.1f}% ({r['worst_group_name']})"
                             if "worst_group" in r else "-")
        body.append(cells)
    return markdown_table(header, body)


def main(out: Path = Path("results/default"), progress: bool = True, workers: int = 2) -> str:
    """Run (or resume) the default suite into ``out``; returns :func:`summary_table`."""
    run_suite("default", out, workers=workers, progress=progress)
    results = json.loads((out / "results.json").read_text())
    return summary_table(results["summary"], SUITES["default"].presets, results["reference"])
