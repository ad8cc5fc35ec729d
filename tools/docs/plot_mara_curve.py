"""Plot MARA's learning curve (completion rate vs environment steps) from a ``curve.json``
written by ``mara-train``:

    python -m tools.docs.plot_mara_curve runs/mara/curve.json docs/assets/mara_curve.png
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, dst: str, lara: float | None = None) -> None:
    d = json.load(open(src))
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    imit = [r for r in d["imitation"] if r["completion_rate"] is not None]
    if imit:  # "samples" = states gathered so far = stage-1 environment steps
        ax.plot([r["samples"] for r in imit],
                [r["completion_rate"] for r in imit], "o-", label="stage 1: DAgger (mixed policy)")
    offset = d["imitation"][-1]["samples"] if d["imitation"] else 0
    ppo = d["ppo"]
    if ppo:
        x = [offset + r["env_steps"] for r in ppo]
        y = [r["completion_rate"] for r in ppo]
        ax.plot(x, y, "-", alpha=0.35, color="C1", label="stage 2: PPO (sampling policy)")
        w = 25
        if len(y) > w:
            kernel = [1.0 / w] * w
            import numpy as np
            ax.plot(x[w - 1:], np.convolve(y, kernel, mode="valid"), "-", color="C1",
                    label=f"stage 2, mean of {w} updates")
    if lara is not None:
        ax.axhline(lara, color="gray", ls="--", label=f"LARA ({lara:.3f})")
    ax.set_xlabel("environment steps (slots x environments)")
    ax.set_ylabel("completion rate of finished episodes")
    ax.set_title("MARA training on CoRE-v0")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else None)
