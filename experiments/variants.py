"""The MARA variants behind the findings of ``docs/experiments.md``, as policy factories.

Each is a ``module:Factory`` policy spec for ``make_policy`` and every ``mara-bench`` suite
(run from the repository's root, which puts ``experiments`` on the path)::

    mara-bench default --policies lara mara experiments.variants:mara_ens5
    python -c "import core_env; from mara_agents.policy import make_policy; \\
        make_policy('experiments.variants:mara_distill', core_env.parallel_env())"

Their checkpoints are in ``experiments/checkpoints`` (not installed with the package); the
README.json next to each says how it was trained, with which commit.
"""

from __future__ import annotations

from pathlib import Path

from mara_agents.ablations import (  # noqa: F401 (the
    mara_ft,
    mara_noshaping,
    mara_on,
    mara_wls,  # shipped ablations, by their old specs)
    mat_dec,
)
from mara_agents.mat.checkpoint import shipped

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"


def _mara(*files: str):
    """A factory of MARA on these checkpoint files of :data:`CHECKPOINTS`."""
    return mara_on(*(CHECKPOINTS / f for f in files))


mara_ens5 = _mara(*(f"ensemble/seed{k}.pt" for k in range(5)))
"""Five runs of the default recipe of 2026-11-30 (training seeds 0-4), decoded together."""
mara_distill = _mara("distill/mara_distill.pt")
"""``mara_ens5`` distilled into one MAT (``mara-distill``)."""
mara_single = _mara("single/mara_single.pt")
"""One ``mara-train --members 1`` run (seed 0): the default shipped from 2026-12-01 to
2026-12-03, and member 0 of the shipped recipe."""
mara_recipe3 = _mara("recipe3/mara_recipe3.pt")
"""``mara-train --members 3``: three runs (seeds 0-2) distilled, the default shipped from
2026-12-03 to 2026-12-06."""
mara_recipe4 = mara_on(shipped())
"""``mara-train --members 4`` (four runs distilled): the shipped default since 2026-12-06,
``make_policy("mara")``'s checkpoint."""
mara_v0 = _mara("v0/mara_default.pt")
"""The default checkpoint shipped until 2026-12-01 (best of five training seeds)."""
mara_2m = _mara("ablation/mara_2m.pt")
"""MARA after 2.0M PPO steps with shaping beta 1 (the ablations' starting point)."""
mara_staged = _mara("ablation/mara_staged.pt")
"""The default of 2026-11-30 morning (94 minutes of training in six steps)."""
mara_d32 = _mara("ablation/mara_d32.pt")
"""The default of 2026-11-30 afternoon: a MAT half as wide."""
mara_fast = _mara("ablation/mara_fast.pt")
"""``mara_d32``'s recipe on a cheaper FM sampler (5 ODE steps, 16 samples)."""
mara_switchmix = _mara("switchmix/mara_switchmix.pt")
"""One run of the recipe on ``CoRE-SwitchMix-v0`` with ``--placement keep`` (issue 59's MARA v2
candidate): 1.7-3.3 points below the shipped MARA on every setting measured, not shipped."""


def mara_decoded(env, **kwargs):
    """The shipped MARA executing its decoded node order also where a switch costs
    something (``placement="model"``): what ``make_policy("mara")`` did before 2026-12-07,
    when ``placement="auto"`` became the default (issue 59)."""
    return mara_recipe4(env, placement="model", **kwargs)


mara_decoded.fingerprint = mara_recipe4.fingerprint
mara_decoded.paths = mara_recipe4.paths


def mara_keep(env, **kwargs):
    """The shipped MARA with its node counts always placed to keep nodes on their tasks
    (``placement="keep"``), also where nothing charges a switch (issue 59; on the live wall
    clock the default ``auto`` does the same)."""
    return mara_recipe4(env, placement="keep", **kwargs)


mara_keep.fingerprint = mara_recipe4.fingerprint
mara_keep.paths = mara_recipe4.paths
