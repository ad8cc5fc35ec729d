"""Reference scores over training seeds (SPEC §12): a trained algorithm's episodes pooled
over its training seeds (runs) and the evaluation seeds (tasks), summarised by the
interquartile mean with a 95% stratified-bootstrap interval (``rliable``, Agarwal et al.
2021: the runs resampled within each evaluation seed), as completion rates, as normalised
scores and as shares of the clairvoyant bound::

    rows = score_rows(results, {("CoRE-v0", 2_000_000, "mappo"): ["mappo@a.pt", "mappo@b.pt"]})
    print(score_table(rows))

The normalised score of an episode is ``(rate - random) / (lara - random)`` with the mean
completion rates of the naive ``random`` (0) and of ``lara`` (1) on the preset's evaluation
seeds; the bound share is ``completed / bound`` on the seeds whose bound is positive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.report import markdown_table

LOW, HIGH = "random", "lara"
"""The references of the normalised score: the naive random policy is 0, LARA 1."""

REPS = 2000
"""Bootstrap resamples per interval."""

BOOTSTRAP_SEED = 0
"""The bootstrap's random state (the intervals are reproducible)."""


def iqm_interval(scores: np.ndarray) -> tuple[float, float, float]:
    """``(IQM, low, high)`` of a [runs, tasks] score matrix: rliable's interquartile mean
    and its 95% stratified-bootstrap percentile interval (NaN for an empty matrix)."""
    from rliable import library, metrics

    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return float("nan"), float("nan"), float("nan")
    # rliable's stratified bootstrap draws from numpy's global generator (its random_state
    # reaches only arch's base class): seeded here, and the caller's state put back
    saved = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        point, ci = library.get_interval_estimates(
            {"x": scores}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=REPS)
    finally:
        np.random.set_state(saved)
    return float(point["x"][0]), float(ci["x"][0, 0]), float(ci["x"][1, 0])


def score_rows(results: Sequence[dict[str, Any]],
               groups: dict[tuple[str, int, str], Sequence[str]],
               references: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One row per ``(preset, budget, algorithm)`` of ``groups`` (-> the policy names of its
    training seeds) that has episodes: the runs, the evaluation seeds every run has, and the
    IQM with its interval of the completion rate, the normalised score (where both
    references ran on the preset) and the bound share (where bounds were computed). Each
    policy of ``references`` that ran on a preset gets a row first (one run, budget 0), so
    the IQMs compare on one scale."""
    presets = list(dict.fromkeys(p for p, _, _ in groups))
    groups = {**{(p, 0, ref): [ref] for p in presets for ref in references}, **groups}
    eps: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    bounds: dict[tuple[str, int], int] = {}
    for r in results:
        if "bound" in r:
            bounds[(r["preset"], r["seed"])] = r["bound"]
        else:
            eps.setdefault((r["preset"], r["policy"]), {})[r["seed"]] = r
    rows = []
    for (preset, budget, algo), names in groups.items():
        runs = [eps[(preset, n)] for n in names if (preset, n) in eps]
        if not runs:
            continue
        seeds = sorted(set.intersection(*(set(r) for r in runs)))
        rate = np.array([[run[s]["completion_rate"] for s in seeds] for run in runs])
        row: dict[str, Any] = {"preset": preset, "budget": budget, "algorithm": algo,
                               "runs": len(runs), "seeds": len(seeds),
                               "completion": iqm_interval(rate)}
        refs = [eps.get((preset, ref)) for ref in (LOW, HIGH)]
        if all(refs) and all(s in ref for ref in refs if ref for s in seeds):
            lo, hi = (np.mean([ref[s]["completion_rate"] for s in seeds])
                      for ref in refs if ref)
            if hi > lo:
                row["normalised"] = iqm_interval((rate - lo) / (hi - lo))
        keep = [i for i, s in enumerate(seeds) if bounds.get((preset, s), 0) > 0]
        if keep:
            share = np.array([[run[seeds[i]]["completed"] / bounds[(preset, seeds[i])]
                               for i in keep] for run in runs])
            row["bound_share"] = iqm_interval(share)
        rows.append(row)
    return rows


def _cell(row: dict[str, Any], key: str, pct: bool) -> str:
    if key not in row:
        return "-"
    m, lo, hi = row[key]
    if row["runs"] == 1:  # one run: the stratified bootstrap has nothing to resample
        return f"{100 * m:.1f}%" if pct else f"{m:.2f}"
    if pct:
        return f"{100 * m:.1f}% ({100 * lo:.1f}, {100 * hi:.1f})"
    return f"{m:.2f} ({lo:.2f}, {hi:.2f})"


def score_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown of :func:`score_rows`."""
    body = [[r["preset"], f"{r['budget']:,}" if r["budget"] else "-", r["algorithm"],
             r["runs"], r["seeds"],
             _cell(r, "completion", True), _cell(r, "normalised", False),
             _cell(r, "bound_share", True)] for r in rows]
    return markdown_table(
        ["preset", "budget (env steps)", "algorithm", "training seeds", "evaluation seeds",
         "completion, IQM (95% CI)", f"normalised ({LOW} = 0, {HIGH} = 1), IQM (95% CI)",
         "share of the bound, IQM (95% CI)"], body,
        title="Reference scores: interquartile mean over training and evaluation seeds, "
              "stratified bootstrap")
