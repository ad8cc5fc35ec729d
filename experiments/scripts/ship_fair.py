"""Ship MARA-fair checkpoints: each run's ``last.pt`` without its optimiser and generator
state, as ``mara_agents/weights/mara_fair_<f>.pt``, and a manifest ``mara_fair.json``.

    python experiments/scripts/ship_fair.py RUNS_DIR [F ...]

(the fractions to ship, default every one of ``FAIR_FRACTIONS``; the manifest keeps the
entries of the others)

``RUNS_DIR/fair-<f>/`` are ``mara-train --preset CoRE-Tenants-v0 --fair-fraction <f> --init
mara_agents/weights/mara_default.pt --lr 3e-4 --ent-coef 0.01 --env-steps 600000 --members 1
--out RUNS_DIR/fair-<f>`` runs (the manifest records each one's settings).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mara_agents.mat.checkpoint import WEIGHTS_DIR, load_checkpoint
from mara_agents.policy import FAIR_FRACTIONS
from mara_agents.safe_io import INTEGRITY_KEY, save

KEEP = ("format", "mat_config", "layout", "train_config", "value_norm", "state_dict",
        "update", "env_steps", "curve", "fair")


def main(runs: Path, fractions: list[float]) -> None:
    path = WEIGHTS_DIR / "mara_fair.json"
    manifest = (json.loads(path.read_text()) if path.is_file() else
                {"preset": "CoRE-Tenants-v0", "init": "mara_agents/weights/mara_default.pt",
                 "checkpoints": {}})
    for f in fractions:
        run = runs / f"fair-{f}"
        blob = load_checkpoint(run / "last.pt")
        cfg = blob["train_config"]
        assert cfg["fair_fraction"] == f, (run, cfg["fair_fraction"])
        out = WEIGHTS_DIR / f"mara_fair_{f}.pt"
        save(out, {k: blob[k] for k in KEEP if k in blob and k != INTEGRITY_KEY})
        curve = json.loads((run / "curve.json").read_text())
        last = curve["ppo"][-1]
        manifest["checkpoints"][out.name] = {
            "fair_fraction": f,
            "command": (f"mara-train --preset CoRE-Tenants-v0 --init "
                        f"mara_agents/weights/mara_default.pt --fair-fraction {f} "
                        f"--lr {cfg['lr']:g} --ent-coef {cfg['ent_coef']:g} "
                        f"--env-steps {cfg['env_steps']} --members 1 --threads 1 "
                        f"--out runs/fair-{f}"),
            "wall_seconds": curve["seconds"], "env_steps": blob["env_steps"],
            "final_multipliers": json.loads(blob["fair"])["lambda"],
            "last_rollout": last}
    manifest["checkpoints"] = dict(sorted(manifest["checkpoints"].items()))
    path.write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), [float(f) for f in sys.argv[2:]] or list(FAIR_FRACTIONS))
