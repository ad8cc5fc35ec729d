"""Average the weights of MARA checkpoints (a "model soup"; docs/experiments.md, "How a
teacher grows with its members").

    python experiments/scripts/average_weights.py runs/soup.pt runs/a/last.pt runs/b/last.pt

Writes a checkpoint whose MAT weights are the element-wise mean of the inputs' (everything
else, the value normaliser included, is the first input's; the optimiser state is dropped,
so it loads and evaluates like any checkpoint, but does not resume). The inputs must be
MATs of the same sizes and layout. Averaging is meaningful for runs that share their
initial weights (e.g. ``mara-train --init <stage-1>.pt`` with different seeds); runs from
different initialisations average to a broken policy.
"""

from __future__ import annotations

import sys

from mara_agents import safe_io
from mara_agents.mat.checkpoint import load_checkpoint


def main() -> None:
    out, files = sys.argv[1], sys.argv[2:]
    if len(files) < 2:
        raise SystemExit("usage: average_weights.py OUT.pt IN1.pt IN2.pt [...]")
    blobs = [load_checkpoint(f) for f in files]
    for f, b in zip(files[1:], blobs[1:], strict=False):
        if b["mat_config"] != blobs[0]["mat_config"] or b["layout"] != blobs[0]["layout"]:
            raise SystemExit(f"{f}: another MAT size or layout than {files[0]}")
    state = {k: sum(b["state_dict"][k].float() for b in blobs) / len(blobs)
             for k in blobs[0]["state_dict"]}
    blob = {k: v for k, v in blobs[0].items() if k not in ("optimizer", "integrity")}
    blob["state_dict"] = state
    safe_io.save(out, blob)
    print(f"wrote {out}: the mean of {len(files)} checkpoints' weights")


if __name__ == "__main__":
    main()
