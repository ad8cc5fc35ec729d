"""Pilots of a large-state job for live runs where a move costs real time (issue 59).

    python experiments/scripts/large_state_pilots.py OUT.npz

``mlp-digits`` with 2,048 hidden units (2.5 MB of weights and momentum) and 64-sample units,
four variants (learning rate 0.05 and 0.1 with sqrt scaling, 0.025 linear, 0.05 unscaled),
three seeds, 192 units, alpha from 2 and 4 nodes; about a minute on one core. Then
``mara-bench live --presets Live-v0:load=3 --pilots OUT.npz --slot-seconds 0.05 ...``
(docs/live.md, "Switches on the wall clock").
"""
from __future__ import annotations

import sys

from core_env.live import JobSpec, make_pilots

VARIANTS = [{"hidden": 2048, "unit_samples": 64, "batch": 16, "lr": lr, "lr_scaling": rule}
            for lr, rule in ((0.05, "sqrt"), (0.1, "sqrt"), (0.025, "linear"), (0.05, "none"))]


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit(__doc__)
    pilots = make_pilots([JobSpec("mlp-digits", v) for v in VARIANTS], seeds=3, units=192,
                         nodes=(2, 4), progress=True)
    print(f"wrote {pilots.save(argv[1])}; alpha per variant: {pilots.alpha.round(2).tolist()}")


if __name__ == "__main__":
    main(sys.argv)
