"""The benchmark report's figures (matplotlib, the ``bench`` extra).

Both show mean completion rates with their 95% intervals as error bars, a title naming the
presets and seeds, labelled axes with units, and the legend outside the data. The lines of
:func:`plot_vs_load` are told apart by colour, marker and line style together
(:func:`series_styles`: no two policies share all three, however many there are)::

    plot_vs_load(summarise(results), Path("results/default/completion_vs_load.png"))
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLORS = tuple(f"C{i}" for i in range(10))
"""Matplotlib's default colour cycle (tab10)."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", ":")
"""With 10 colours, 7 markers and 3 line styles (pairwise coprime counts), series ``i`` and
``j`` < 210 share a colour, a marker and a line style only if ``i == j``."""


def series_styles(n: int) -> list[tuple[str, str, str]]:
    """``n`` distinct ``(colour, marker, linestyle)`` triples, neighbours differing in all
    three: series ``i`` takes colour ``i % 10``, marker ``i % 7`` and line style ``i % 3``
    (distinct for up to 210 series by the Chinese remainder theorem); beyond 210 each series
    gets a colour of its own, spread over the hues."""
    import colorsys

    styles = []
    for i in range(n):
        if n <= len(COLORS) * len(MARKERS) * len(LINESTYLES):
            color = COLORS[i % len(COLORS)]
        else:
            r, g, b = colorsys.hsv_to_rgb(i / n, 0.85, 0.8)
            color = f"#{round(255 * r):02x}{round(255 * g):02x}{round(255 * b):02x}"
        styles.append((color, MARKERS[i % len(MARKERS)], LINESTYLES[i % len(LINESTYLES)]))
    return styles


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _seeds(rows: Sequence[dict[str, Any]]) -> str:
    lo = min(r["seeds"][0] for r in rows)
    hi = max(r["seeds"][1] for r in rows)
    return f"seed {lo}" if lo == hi else f"seeds {lo}-{hi}"


def plot_per_preset(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Horizontal bars of one preset's policies (the clairvoyant bound, if any, dashed)."""
    if not rows:
        return
    plt = _pyplot()
    rows = sorted(rows, key=lambda r: r["completion_rate"])
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.6))
    y = range(len(rows))
    err = [[100 * (r["completion_rate"] - r["ci_low"]) for r in rows],
           [100 * (r["ci_high"] - r["completion_rate"]) for r in rows]]
    colors = ["white" if r.get("is_bound") else f"C{i % 10}" for i, r in enumerate(rows)]
    ax.barh(list(y), [100 * r["completion_rate"] for r in rows], xerr=err, capsize=3,
            color=colors, edgecolor="black", linestyle="-", linewidth=0.6)
    ax.set_yticks(list(y), [f"{r['policy']} (clairvoyant)" if r.get("is_bound")
                            else r["policy"] for r in rows])
    ax.set_xlabel("completion rate (% of arrived tasks), 95% CI")
    ax.set_xlim(0, 100)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{rows[0]['preset']}: {_seeds(rows)}, {rows[0]['episodes']} episodes each")
    save_figure(fig, path)


def plot_vs_load(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Completion rate against the arrival-rate multiplier, one line per policy, for the
    presets that differ only in their load (e.g. CoRE-v0, -Heavy, -Extreme); nothing is
    written when fewer than two loads ran."""
    import core_env

    groups: dict[Any, dict[str, float]] = {}
    for p in sorted({r["preset"] for r in rows}):
        cfg = core_env.make_config(p)
        groups.setdefault(cfg.replace(load=1.0), {})[p] = cfg.workload.load
    if not groups:
        return
    loads = max(groups.values(), key=lambda g: (len(set(g.values())), "CoRE-v0" in g))
    if len(set(loads.values())) < 2:
        return
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    series = {}
    for policy in sorted({r["policy"] for r in rows}):
        series[policy] = sorted(((loads[r["preset"]], r) for r in rows
                                 if r["policy"] == policy and r["preset"] in loads),
                                key=lambda p: p[0])
    bound = {p for p, pts in series.items() if pts and pts[0][1].get("is_bound")}
    styles = iter(series_styles(len(series) - len(bound)))
    for policy, pts in series.items():
        x = [p for p, _ in pts]
        y = [100 * r["completion_rate"] for _, r in pts]
        err = [[100 * (r["completion_rate"] - r["ci_low"]) for _, r in pts],
               [100 * (r["ci_high"] - r["completion_rate"]) for _, r in pts]]
        if policy in bound:  # the clairvoyant bound: no policy reaches it
            ax.errorbar(x, y, yerr=err, marker="s", capsize=3, color="black", linestyle="--",
                        label=f"{policy} (clairvoyant)")
        else:
            color, marker, linestyle = next(styles)
            ax.errorbar(x, y, yerr=err, marker=marker, capsize=3, color=color,
                        linestyle=linestyle, label=policy)
    ax.set_xlabel("load (arrival-rate multiplier of the training load)")
    ax.set_ylabel("completion rate (% of arrived tasks)")
    ax.set_xticks(sorted(set(loads.values())))
    ax.grid(alpha=0.3)
    ax.set_title(f"Completion rate vs load: {', '.join(sorted(loads))}; {_seeds(rows)}, "
                 f"95% CI")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    save_figure(fig, path)


def plot_curves(blobs: dict[tuple[int, str, str], dict], out: Path, window: int = 200) -> None:
    """The marl suite's ``curve_<algorithm>.png`` (``blobs``: its model files by budget,
    algorithm and preset): completion rate of the training episodes (moving mean over
    ``window`` episodes: about three rounds of the 64 envs that finish together) against env
    steps, one line per preset and budget (the smaller budgets drawn on top, thinner: with
    one seed their runs are the larger ones' beginnings)."""
    import numpy as np

    plt = _pyplot()
    for algo in dict.fromkeys(a for _, a, _ in blobs):
        fig, ax = plt.subplots(figsize=(7, 4))
        for (budget, a, preset), b in blobs.items():
            if a != algo or not b["curve"]["env_steps"]:
                continue
            x = np.asarray(b["curve"]["env_steps"])
            y = 100 * np.asarray(b["curve"]["completion_rate"])
            w = min(window, len(y))
            ax.plot(x[w - 1:], np.convolve(y, np.ones(w) / w, "valid"),
                    label=f"{preset}, {budget:,} steps",
                    linewidth=1.0 if budget < max(b for b, _, _ in blobs) else 2.0,
                    zorder=3 if budget < max(b for b, _, _ in blobs) else 2)
        ax.set_xscale("log")
        ax.set_xlabel("env steps (slots) trained")
        ax.set_ylabel(f"completion rate (%), mean of {window} training episodes")
        ax.set_title(f"{algo}: training episodes (seed {next(iter(blobs.values()))['seed']})")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        save_figure(fig, out / f"curve_{algo}.png")


def plot_updates(blobs: dict[tuple[int, str, str], dict], out: Path) -> None:
    """``updates_<algorithm>.png``: the PPO updates' per-node entropy, critic loss and
    explained variance against env steps, one line per preset and budget (models whose file
    records them; the evidence of whether a run that does not learn moved at all)."""
    plt = _pyplot()
    keys = (("entropy", "entropy per node (nats)"), ("value_loss", "critic loss"),
            ("explained_variance", "explained variance"))
    for algo in dict.fromkeys(a for _, a, _ in blobs):
        runs = {(budget, preset): b["curve"]["updates"]
                for (budget, a, preset), b in blobs.items()
                if a == algo and (b["curve"].get("updates") or {}).get("entropy")}
        if not runs:
            continue
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        for (budget, preset), up in runs.items():
            for ax, (key, _) in zip(axes, keys, strict=False):
                ax.plot(up["env_steps"], up[key], label=f"{preset}, {budget:,} steps",
                        linewidth=1.0)
        for ax, (_, label) in zip(axes, keys, strict=False):
            ax.set_xscale("log")
            ax.set_xlabel("env steps (slots) trained")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{algo}: PPO update statistics")
        fig.tight_layout()
        save_figure(fig, out / f"updates_{algo}.png")


def save_figure(fig: Any, path: Path) -> None:
    """Save a matplotlib figure atomically (a uniquely named temporary file, renamed)."""
    import matplotlib.pyplot as plt

    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp.png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)
