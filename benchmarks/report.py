"""Tables and plots of benchmark results.

:func:`summarise` turns episode records into one row per (preset, policy): the mean
completion rate with its 95% interval, the paired difference to a reference policy (LARA by
default), the group audit (worst group, largest gap: :func:`audit_row`) and, with
clairvoyant-bound records, each policy's share of the bound.
:func:`write_report` writes ``results.json``, ``results.csv``, ``table.md`` and the plots:
``completion_<preset>.png`` for every preset (``:`` written as ``+``) and
``completion_vs_load.png`` when the presets differ only in their load, and warns about
policies whose actions the mask forbade (:func:`warn_illegal`).
:func:`markdown_table` is the one table formatter of every suite::

    table = write_report(results, Path("results/mine"), {"suite": "mine", "reference": "lara"})
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.stats import DIFFERENCE, RATE, mean_ci
from benchmarks.store import (
    EPISODE_FIELDS,
    code_version,
    config_record,
    safe_name,
    write_atomic,
    write_csv,
)

REFERENCE_POLICY = "lara"
"""Policy that paired differences are taken against."""

MIN_GROUP_ARRIVALS = 20
"""A group counts in a row's worst group and largest gap once this many of its tasks arrived
over the row's episodes (pooled), so that a rare cap or family is not a table's headline."""

HEADLINE_GROUPINGS = ("tenant", "family", "work", "cap")
"""The groupings of the tables' worst group and largest gap: who a task is (its team, kind,
size, width). The slack and arrival-period thirds are in the fairness suite's tables: the
tightest slack third is mostly infeasible by construction, so it would head every row."""


def audit_row(episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The group audit of a row's episodes (SPEC §10; :mod:`core_env.audit`): their
    ``groups`` pooled, then :func:`audit_counts`; empty unless every episode has group
    counts."""
    from core_env.audit import pool

    if not episodes or not all("groups" in e for e in episodes):
        return {}
    return audit_counts(pool(e["groups"] for e in episodes))


def audit_counts(counts: dict[str, Any]) -> dict[str, Any]:
    """Over :data:`HEADLINE_GROUPINGS` of pooled group counts: ``worst_group`` (the lowest
    group completion rate) and its ``worst_group_name`` (``"grouping: group"``),
    ``group_gap`` (the largest gap between two groups of one grouping) and its
    ``group_gap_grouping``."""
    from core_env.audit import difference, group_min

    out: dict[str, Any] = {}
    worst = group_min(counts, MIN_GROUP_ARRIVALS, HEADLINE_GROUPINGS)
    if worst is not None:
        out.update(worst_group=worst[0], worst_group_name=worst[1])
    gap = difference(counts, MIN_GROUP_ARRIVALS, HEADLINE_GROUPINGS)
    if gap is not None:
        out.update(group_gap=gap[0], group_gap_grouping=gap[1])
    return out


def audit_cells(row: dict[str, Any]) -> list[str]:
    """A row's worst-group and largest-gap cells (``-`` without an audit)."""
    worst = (f"{100 * row['worst_group']:.1f}% ({row['worst_group_name']})"
             if "worst_group" in row else "-")
    gap = (f"{100 * row['group_gap']:.1f} pts ({row['group_gap_grouping']})"
           if "group_gap" in row else "-")
    return [worst, gap]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]],
                   title: str | None = None) -> str:
    """A Markdown table (cells converted with ``str``), optionally after a title line."""
    lines = [title, ""] if title else []
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


MISUSE = ("illegal_actions", "capacity_conflicts")
"""The counts of actions the env did not execute as chosen: an action the mask forbids (run
as idle) and a node beyond a task's parallelism cap (idled). Every row has their totals; the
table shows them only when a row has any (:func:`format_table`), and :func:`write_report`
warns once per policy and preset about illegal actions."""


def warn_illegal(rows: Sequence[dict[str, Any]]) -> None:
    """One warning per (preset, policy) row whose episodes had illegal actions."""
    for r in rows:
        if r.get("illegal_actions"):
            warnings.warn(
                f"policy {r['policy']} on {r['preset']}: {r['illegal_actions']} actions over "
                f"{r['episodes']} episodes were illegal (the action mask forbids them) and ran "
                f"as idle; a policy should choose from each node's action_mask",
                stacklevel=3)


def summarise(results: Sequence[dict[str, Any]], reference: str = REFERENCE_POLICY
              ) -> list[dict[str, Any]]:
    """One row per (preset, policy): mean completion rate with its 95% CI, mean utilization,
    and the paired difference to the ``reference`` policy on the seeds both have.

    Records with a ``bound`` key are clairvoyant bounds (one per preset and seed, see
    :func:`benchmarks.suites.bound_record`), not episodes. When there are any, every policy
    row also gets ``of_bound`` (mean of completed / bound over the seeds with a positive
    bound, with its 95% CI, ``bound_paired`` seeds), and each preset gets a row for the
    bound itself: its completion-rate bound (bound / arrived) with CI, the paired headroom
    over the reference policy, and the solves (methods used, seconds, largest MILP gap).
    Intervals of rates and shares are clipped to [0, 1], of differences to [-1, 1]
    (:mod:`benchmarks.stats`). Every episode row has the totals of :data:`MISUSE`.
    Rows are sorted by (preset, policy).
    """
    bounds = {(r["preset"], r["seed"]): r for r in results if "bound" in r}
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in results:
        if "bound" not in r:
            by.setdefault((r["preset"], r["policy"]), {})[r["seed"]] = r
    rows = []
    for (preset, policy), eps in sorted(by.items()):
        rates = [eps[s]["completion_rate"] for s in sorted(eps)]
        mean, lo, hi = mean_ci(rates, bounds=RATE)
        row = {"preset": preset, "policy": policy, "episodes": len(rates),
               "seeds": [min(eps), max(eps)], "completion_rate": mean, "ci_low": lo,
               "ci_high": hi,
               "utilization": sum(e["utilization"] for e in eps.values()) / len(eps),
               **{k: sum(e.get(k, 0) for e in eps.values()) for k in MISUSE}}
        ref = by.get((preset, reference))
        if ref is not None and policy != reference:
            common = sorted(set(eps) & set(ref))
            if common:
                diffs = [eps[s]["completion_rate"] - ref[s]["completion_rate"] for s in common]
                d, dlo, dhi = mean_ci(diffs, bounds=DIFFERENCE)
                row.update(diff_vs_ref=d, diff_ci_low=dlo, diff_ci_high=dhi, paired=len(common))
        with_bound = [s for s in sorted(eps) if bounds.get((preset, s), {}).get("bound", 0) > 0]
        if with_bound:
            ratios = [eps[s]["completed"] / bounds[(preset, s)]["bound"] for s in with_bound]
            m, mlo, mhi = mean_ci(ratios, bounds=RATE)
            row.update(of_bound=m, of_bound_ci_low=mlo, of_bound_ci_high=mhi,
                       bound_paired=len(with_bound))
        row.update(audit_row(list(eps.values())))
        rows.append(row)
    for preset in sorted({p for p, _ in bounds}):
        rows.append(_bound_row(preset, [bounds[k] for k in sorted(bounds) if k[0] == preset],
                               by.get((preset, reference), {})))
    rows.sort(key=lambda r: (r["preset"], not r.get("is_bound", False), r["policy"]))
    return rows


def _bound_row(preset: str, recs: list[dict[str, Any]], ref: dict[int, dict[str, Any]]
               ) -> dict[str, Any]:
    mean, lo, hi = mean_ci([r["bound"] / max(r["n_tasks"], 1) for r in recs], bounds=RATE)
    seconds = [r["lp_seconds"] + r["milp_seconds"] for r in recs]
    methods: dict[str, int] = {}
    for r in recs:
        methods[r["method"]] = methods.get(r["method"], 0) + 1
    gaps = [r["milp_gap"] for r in recs if r.get("milp_gap") is not None]
    row = {"preset": preset, "policy": recs[0]["policy"], "episodes": len(recs),
           "seeds": [recs[0]["seed"], recs[-1]["seed"]],
           "completion_rate": mean, "ci_low": lo, "ci_high": hi, "utilization": None,
           "is_bound": True, "bound_mean": sum(r["bound"] for r in recs) / len(recs),
           "scaling": recs[0].get("scaling"), "methods": methods,
           "solve_seconds_mean": sum(seconds) / len(seconds),
           "solve_seconds_max": max(seconds), "milp_gap_max": max(gaps) if gaps else None}
    by_seed = {r["seed"]: r for r in recs}
    common = sorted(set(by_seed) & set(ref))
    if common:
        d, dlo, dhi = mean_ci([by_seed[s]["bound"] / max(by_seed[s]["n_tasks"], 1)
                               - ref[s]["completion_rate"] for s in common], bounds=DIFFERENCE)
        row.update(diff_vs_ref=d, diff_ci_low=dlo, diff_ci_high=dhi, paired=len(common))
    return row


def _pct(m: float, lo: float, hi: float, sign: bool = False) -> str:
    f = "{:+.1f}" if sign else "{:.1f}"
    return f"{f.format(100 * m)}{'' if sign else '%'} ({f.format(100 * lo)}, {f.format(100 * hi)})"


def format_table(rows: Sequence[dict[str, Any]], reference: str = REFERENCE_POLICY) -> str:
    """Markdown table: completion rate (95% CI) and the paired difference to the reference
    policy (LARA unless the suite says otherwise), and where the episodes carry group counts
    the worst group and the largest gap between groups (:func:`audit_row`). When any row
    has illegal actions or capacity conflicts (:data:`MISUSE`), two columns give their
    totals over the row's episodes.

    With clairvoyant bounds in ``rows``, a column gives each policy's completions as a share
    of the bound (mean of per-seed ratios, 95% CI), the bound's own row shows the
    completion-rate bound, and a second table describes the solves.
    """
    has_bound = any(r.get("is_bound") for r in rows)
    has_audit = any("worst_group" in r for r in rows)
    has_misuse = any(r.get(k) for r in rows for k in MISUSE)
    ref_name = "LARA" if reference == "lara" else reference
    header = ["preset", "policy", "episodes", "completion rate (95% CI)",
              f"vs {ref_name}, paired (95% CI)", "utilization"]
    if has_misuse:
        header += ["illegal actions", "capacity conflicts"]
    if has_audit:
        header += ["worst group", "largest gap"]
    body = []
    for r in rows:
        diff = (_pct(r["diff_vs_ref"], r["diff_ci_low"], r["diff_ci_high"], sign=True)
                .replace(" (", " pts (", 1) if "diff_vs_ref" in r else "-")
        util = "-" if r["utilization"] is None else f"{r['utilization']:.3f}"
        name = f"**{r['policy']}** (clairvoyant)" if r.get("is_bound") else r["policy"]
        cells = [r["preset"], name, r["episodes"],
                 _pct(r["completion_rate"], r["ci_low"], r["ci_high"]), diff, util]
        if has_misuse:
            cells += [r.get(k, "-") for k in MISUSE]
        if has_audit:
            cells += audit_cells(r)
        if has_bound:
            cells.append(_pct(r["of_bound"], r["of_bound_ci_low"], r["of_bound_ci_high"])
                         if "of_bound" in r else "-")
        body.append(cells)
    text = markdown_table(header + (["of bound (95% CI)"] if has_bound else []), body)
    if has_bound:
        solves = [[r["preset"], r["episodes"], r["scaling"], f"{r['bound_mean']:.1f}",
                   ", ".join(f"{k} {v}" for k, v in sorted(r["methods"].items())),
                   f"{r['solve_seconds_mean']:.2f} ({r['solve_seconds_max']:.2f})",
                   "-" if r["milp_gap_max"] is None else f"{100 * r['milp_gap_max']:.1f}%"]
                  for r in rows if r.get("is_bound")]
        text += "\n" + markdown_table(
            ["preset", "seeds", "scaling", "mean bound (tasks)", "proven by",
             "solve s, mean (max)", "largest MILP gap"], solves,
            title="Clairvoyant bound solves (see docs/bound.md):")
    return text


def write_report(results: Sequence[dict[str, Any]], out: Path, meta: dict[str, Any]) -> str:
    """results.json / results.csv / table.md / plots; returns the table.

    ``meta["reference"]`` names the policy of the paired differences (default LARA).
    Clairvoyant-bound records (with a ``bound`` key) go to ``bounds.csv`` and to the
    ``bounds`` list of ``results.json``; ``results.csv`` and ``episodes`` hold the episodes.
    """
    out.mkdir(parents=True, exist_ok=True)
    reference = meta.get("reference", REFERENCE_POLICY)
    rows = summarise(results, reference)
    warn_illegal(rows)
    episodes = [r for r in results if "bound" not in r]
    bounds = [r for r in results if "bound" in r]
    presets = sorted({r["preset"] for r in results})
    payload = {**meta, "code_version": code_version(),
               "presets": {p: config_record(p) for p in presets},
               "summary": rows, "episodes": episodes}
    if bounds:
        payload["bounds"] = bounds
    write_atomic(out / "results.json", json.dumps(payload, indent=2, default=str))
    tables = [("results.csv", ["preset", "policy", "seed", *EPISODE_FIELDS], episodes)]
    if bounds:
        tables.append(("bounds.csv", list(bounds[0]), bounds))
    for name, fields, recs in tables:
        write_csv(out / name, recs, fields)
    table = format_table(rows, reference)
    write_atomic(out / "table.md", table)
    from benchmarks.plots import plot_per_preset, plot_vs_load

    for preset in presets:
        plot_per_preset([r for r in rows if r["preset"] == preset],
                        out / f"completion_{safe_name(preset)}.png")
    plot_vs_load(rows, out / "completion_vs_load.png")
    return table
