"""The report's figures: every line of ``completion_vs_load.png`` has a style of its own."""

from __future__ import annotations

import itertools

import pytest

from benchmarks import plots

pytest.importorskip("matplotlib")


def rows(policies: list[str]) -> list[dict]:
    out = []
    for i, policy in enumerate(policies):
        for preset, load in (("CoRE-v0", 1.0), ("CoRE-Heavy-v0", 1.5)):
            rate = 0.9 - 0.02 * i - 0.1 * load
            out.append({"preset": preset, "policy": policy, "completion_rate": rate,
                        "ci_low": rate - 0.01, "ci_high": rate + 0.01, "seeds": [0, 9],
                        "episodes": 10, "is_bound": policy == "bound"})
    return out


@pytest.mark.parametrize("n", [1, 14, 20, 210, 211, 500])
def test_series_styles_never_repeat_a_combination(n):
    styles = plots.series_styles(n)
    assert len(styles) == n == len(set(styles))
    assert all(a != b for x, y in itertools.pairwise(styles) for a, b in zip(x, y, strict=False))


def test_no_two_lines_of_a_20_policy_plot_share_a_style(tmp_path, monkeypatch):
    from matplotlib.colors import to_hex

    figures = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: figures.append(fig))
    policies = [f"policy_{i:02d}" for i in range(20)] + ["bound"]
    plots.plot_vs_load(rows(policies), tmp_path / "completion_vs_load.png")
    (fig,) = figures
    lines = [c.lines[0] for c in fig.axes[0].containers]
    triples = [(to_hex(line.get_color()), line.get_marker(), line.get_linestyle())
               for line in lines]
    assert len(triples) == 21 and len(set(triples)) == 21, triples
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels[0] == "bound (clairvoyant)" and labels[1:] == policies[:-1]
    import matplotlib.pyplot as plt

    plt.close(fig)
