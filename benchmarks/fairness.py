"""The fairness suite's report (SPEC §10): who loses when tasks miss, at 1x, 1.5x and 2x load.

``mara-bench fairness`` runs its policies on ``CoRE-v0`` and ``CoRE-Tenants-v0`` at three
loads (presets with ``load=`` overrides) like any scheduling suite (its ``table.md`` has the
worst group and largest gap of every row) and adds, from the episodes' group counts
(:mod:`core_env.audit`, pooled over seeds), ``fairness.md``:

* a summary per preset and policy: overall completion, the worst tenant (with tenants), the
  worst group and the largest gap between two groups of one grouping, and Jain's index over
  the groups of the tenant and work groupings;
* per preset, one table per grouping: each policy's completion rate in each group;

* per preset with tenants, the frontier: each policy's overall and worst-tenant completion,
  their ratio, and the policies better than it on both (none: it is on the frontier);

and ``fairness_<preset>.png``: per policy, overall and worst-tenant (else worst-group)
completion against load (presets that differ in more than their load get a numbered name);
``frontier_<preset>.png`` per preset with tenants: worst-tenant against overall completion,
one point per policy, MARA-fair's settings joined in order of f.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.report import MIN_GROUP_ARRIVALS, audit_counts, markdown_table

FAIRNESS_PRESETS = ("CoRE-v0", "CoRE-v0:load=1.5", "CoRE-v0:load=2.0", "CoRE-Tenants-v0",
                    "CoRE-Tenants-v0:load=1.5", "CoRE-Tenants-v0:load=2.0")
"""The fairness suite's presets: the training load and the tenants' preset at 1x, 1.5x and
2x load."""

JAIN_GROUPINGS = ("tenant", "work")
"""The groupings whose Jain index the summary shows."""


def pooled(results: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(preset, policy) -> the episodes' group counts pooled over seeds, and the mean overall
    completion rate (``rate``)."""
    from core_env.audit import pool

    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        if "groups" in r and "bound" not in r:
            by.setdefault((r["preset"], r["policy"]), []).append(r)
    return {key: {"counts": pool(e["groups"] for e in eps),
                  "rate": sum(e["completion_rate"] for e in eps) / len(eps),
                  "episodes": len(eps)}
            for key, eps in sorted(by.items())}


def summary_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (preset, policy) (see the module docstring)."""
    from core_env.audit import by_group, group_min, jain_index

    rows = []
    for (preset, policy), p in pooled(results).items():
        counts = p["counts"]
        rates = by_group(counts, MIN_GROUP_ARRIVALS)
        row: dict[str, Any] = {"preset": preset, "policy": policy, "episodes": p["episodes"],
                               "completion_rate": p["rate"]}
        tenant = group_min(counts, MIN_GROUP_ARRIVALS, ["tenant"])
        if tenant is not None:
            row.update(worst_tenant=tenant[0], worst_tenant_name=tenant[1])
        row.update(audit_counts(counts))
        for grouping in JAIN_GROUPINGS:
            if len(rates.get(grouping, {})) >= 2:
                row[f"jain_{grouping}"] = jain_index(rates[grouping].values())
        rows.append(row)
    return rows


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def format_summary(rows: Sequence[dict[str, Any]]) -> str:
    body = []
    for r in rows:
        body.append([
            r["preset"], r["policy"], r["episodes"], _pct(r["completion_rate"]),
            f"{_pct(r['worst_tenant'])} ({r['worst_tenant_name']})" if "worst_tenant" in r
            else "-",
            f"{_pct(r['worst_group'])} ({r['worst_group_name']})" if "worst_group" in r
            else "-",
            f"{100 * r['group_gap']:.1f} pts ({r['group_gap_grouping']})" if "group_gap" in r
            else "-",
            *(f"{r[f'jain_{g}']:.3f}" if f"jain_{g}" in r else "-" for g in JAIN_GROUPINGS)])
    return markdown_table(["preset", "policy", "episodes", "completion", "worst tenant",
                           "worst group", "largest gap",
                           *(f"Jain ({g})" for g in JAIN_GROUPINGS)], body)


def group_tables(results: Sequence[dict[str, Any]]) -> str:
    """Per preset and grouping, each policy's completion rate in each group (groups with
    fewer than :data:`~benchmarks.report.MIN_GROUP_ARRIVALS` arrivals in brackets)."""
    from core_env.audit import GROUPINGS

    by_preset: dict[str, dict[str, Any]] = {}
    for (preset, policy), p in pooled(results).items():
        by_preset.setdefault(preset, {})[policy] = p["counts"]
    parts = []
    for preset, policies in by_preset.items():
        for grouping in GROUPINGS:
            labels: list[str] = []
            for counts in policies.values():
                labels += [g for g in counts.get(grouping, {}) if g not in labels]
            if not labels:
                continue
            body = []
            for policy, counts in policies.items():
                cells = [policy]
                for label in labels:
                    c = counts.get(grouping, {}).get(label)
                    if not c or not c["arrived"]:
                        cells.append("-")
                        continue
                    text = f"{100 * c['completed'] / c['arrived']:.1f}%"
                    cells.append(text if c["arrived"] >= MIN_GROUP_ARRIVALS else f"({text})")
                body.append(cells)
            arrived = {label: sum(c.get(grouping, {}).get(label, {}).get("arrived", 0)
                                  for c in policies.values()) // len(policies)
                       for label in labels}
            parts.append(markdown_table(
                ["policy", *(f"{label} (n={arrived[label]})" for label in labels)], body,
                title=f"{preset}, by {grouping}:"))
    return "\n".join(parts)


def dominated_by(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(preset, policy) -> the policies of the same preset with a higher overall and a higher
    worst-tenant completion (rows with tenants only)."""
    out: dict[tuple[str, str], list[str]] = {}
    tenants = [r for r in rows if "worst_tenant" in r]
    for r in tenants:
        out[(r["preset"], r["policy"])] = [
            o["policy"] for o in tenants if o["preset"] == r["preset"]
            and o["completion_rate"] > r["completion_rate"]
            and o["worst_tenant"] > r["worst_tenant"]]
    return out


def format_frontier(rows: Sequence[dict[str, Any]]) -> str:
    """The frontier table (see the module docstring); '' without tenants."""
    dom = dominated_by(rows)
    body = [[r["preset"], r["policy"], _pct(r["completion_rate"]), _pct(r["worst_tenant"]),
             f"{r['worst_tenant'] / r['completion_rate']:.2f}" if r["completion_rate"] else "-",
             ", ".join(dom[(r["preset"], r["policy"])]) or "none (on the frontier)"]
            for r in rows if "worst_tenant" in r]
    if not body:
        return ""
    return markdown_table(["preset", "policy", "overall", "worst tenant", "worst / overall",
                           "better on both"], body,
                          title="The frontier: overall against worst-tenant completion")


def _fair_order(policy: str) -> float | None:
    from mara_agents.policy_spec import PolicySpec

    try:
        spec = PolicySpec.parse(policy)
        return spec.fraction if spec.kind == "mara_fair" else None
    except ValueError:
        return None


def _plot_frontier(rows: Sequence[dict[str, Any]], out: Path) -> None:
    """frontier_<preset>.png per preset with tenants."""
    try:
        from benchmarks.plots import _pyplot, save_figure, series_styles
        plt = _pyplot()
    except ImportError:  # the bench extra's matplotlib
        return
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if "worst_tenant" in r:
            by.setdefault(r["preset"], []).append(r)
    for preset, items in by.items():
        fig, ax = plt.subplots(figsize=(6.5, 5))
        fair = sorted((f, r) for r in items if (f := _fair_order(r["policy"])) is not None)
        if fair:
            ax.plot([100 * r["completion_rate"] for _, r in fair],
                    [100 * r["worst_tenant"] for _, r in fair], color="black", linewidth=1,
                    zorder=1)
            for f, r in fair:
                ax.annotate(f"f={f:g}", (100 * r["completion_rate"], 100 * r["worst_tenant"]),
                            textcoords="offset points", xytext=(4, 4), fontsize=7)
        others = [r for r in items if _fair_order(r["policy"]) is None]
        for r, (color, marker, _) in zip(others, series_styles(len(others)), strict=False):
            ax.scatter(100 * r["completion_rate"], 100 * r["worst_tenant"], color=color,
                       marker=marker, label=r["policy"], zorder=2)
        if fair:
            ax.scatter([100 * r["completion_rate"] for _, r in fair],
                       [100 * r["worst_tenant"] for _, r in fair], color="black", marker="o",
                       label="mara_fair (f)", zorder=2)
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [0.8 * lo, 0.8 * hi], color="grey", linestyle=":", linewidth=1,
                label="worst = 0.8 x overall")
        ax.set_xlim(lo, hi)
        ax.set_xlabel("overall completion (%)")
        ax.set_ylabel("worst tenant's completion (%)")
        ax.set_title(f"{preset}: the frontier (up and right is better)")
        ax.legend(fontsize=7)
        save_figure(fig, out / f"frontier_{_file_name(preset)}.png")


def _file_name(preset: str) -> str:
    """A preset spec as a file-name part (``CoRE-Tenants-v0:load=1.5`` ->
    ``CoRE-Tenants-v0_load1.5``)."""
    return "".join(c if c.isalnum() or c in "-." else "_" for c in preset.replace("=", ""))


def _plot(rows: Sequence[dict[str, Any]], out: Path) -> None:
    """fairness_<base preset>.png: overall and worst-group completion against load."""
    from core_env.presets import split_preset

    try:
        from benchmarks.plots import _pyplot, save_figure, series_styles
        plt = _pyplot()
    except ImportError:  # the bench extra's matplotlib
        return
    bases: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    names: dict[str, str] = {}
    tenants: dict[str, bool] = {}
    for r in rows:
        base, overrides = split_preset(r["preset"])
        if "worst_group" not in r:
            continue
        load = float(overrides.pop("load", 1.0))
        key = base + (f":{sorted(overrides.items())}" if overrides else "")
        names.setdefault(key, base if not overrides else f"{base}_{len(names)}")
        tenants[key] = tenants.get(key, False) or "worst_tenant" in r
        bases.setdefault(key, {}).setdefault(r["policy"], []).append(
            (load, r["completion_rate"], r.get("worst_tenant", r["worst_group"])))
    for key, policies in bases.items():
        base = names[key]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        styles = series_styles(len(policies))
        for (policy, pts), (color, marker, _) in zip(sorted(policies.items()), styles, strict=False):
            pts.sort()
            x = [p[0] for p in pts]
            ax.plot(x, [100 * p[1] for p in pts], color=color, marker=marker, linestyle="-",
                    label=f"{policy} overall")
            ax.plot(x, [100 * p[2] for p in pts], color=color, marker=marker, linestyle=":",
                    label=f"{policy} worst")
        ax.set_xlabel("load (x the training arrival rate)")
        ax.set_ylabel("completion (%)")
        what = "tenant" if tenants[key] else "group"
        ax.set_title(f"{base}: overall (solid) and worst {what} (dotted)")
        ax.legend(fontsize=7, ncol=2)
        save_figure(fig, out / f"fairness_{base}.png")


def write_fairness(results: Sequence[dict[str, Any]], out: Path) -> str:
    """Write ``fairness.md`` and the plots into ``out``; returns the summary table."""
    from benchmarks.store import write_atomic

    rows = summary_rows(results)
    summary = format_summary(rows)
    frontier = format_frontier(rows)
    write_atomic(out / "fairness.md", "# Fairness\n\n" + summary + "\n"
                 + (frontier + "\n" if frontier else "") + group_tables(results))
    _plot(rows, out)
    _plot_frontier(rows, out)
    return summary
