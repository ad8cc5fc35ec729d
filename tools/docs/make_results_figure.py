"""Draw docs/assets/completion_rates.png from the full table of ``make demo``.

``make demo`` (``mara-bench default``: CoRE-v0 and CoRE-Heavy-v0, seeds 0-9) writes its full
table, one row per (preset, policy), to ``results/default/table.md``; the figure shows each
policy's mean completion rate with its 95% confidence interval.

    make demo
    python -m tools.docs.make_results_figure [results/default/table.md]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (CoRE-[\w-]+) \| (\w+) \| \d+ \| ([\d.]+)% \(([\d.]+), ([\d.]+)\) \|")


def read_table(path: Path = ROOT / "results" / "default" / "table.md"
               ) -> dict[str, dict[str, tuple[float, ...]]]:
    """preset -> policy -> (mean, low, high) completion rate in percent."""
    text = path.read_text()
    table: dict[str, dict[str, tuple[float, ...]]] = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            table.setdefault(m[1], {})[m[2]] = tuple(float(m[i]) for i in (3, 4, 5))
    if not table:
        raise ValueError(f"{path}: no rows of the default suite's table found")
    return table


def main(path: str | None = None) -> None:
    """Write docs/assets/completion_rates.png."""
    table = read_table(Path(path)) if path else read_table()
    presets = sorted(table, key=lambda p: (p != "CoRE-v0", p))
    policies = sorted(table[presets[0]], key=lambda p: table[presets[0]][p][0])
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    width = 0.8 / len(presets)
    for j, preset in enumerate(presets):
        xs = [i + (j - (len(presets) - 1) / 2) * width for i in range(len(policies))]
        vals = [table[preset][p] for p in policies]
        ax.bar(xs, [v[0] for v in vals], width, label=preset,
               yerr=[[v[0] - v[1] for v in vals], [v[2] - v[0] for v in vals]], capsize=3)
    ax.set_xticks(range(len(policies)))
    ax.set_xticklabels([p.replace("_", "\n") for p in policies], fontsize=8)
    ax.set_ylabel("tasks completed (%)")
    ax.set_title("Completion rate, 10 seeds, 95% CI (make demo)")
    ax.legend(frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    out = ROOT / "docs" / "assets" / "completion_rates.png"
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
