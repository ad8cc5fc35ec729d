"""MARA's ablations (SPEC §7) as policy factories, shipped with the package.

Each is a ``mara_agents.ablations:<name>`` policy spec for ``make_policy`` and every
``mara-bench`` suite; ``mara-bench ablation`` runs them paired against their control::

    import core_env
    from mara_agents.policy import make_policy

    env, policy = make_policy("mara_agents.ablations:mara_wls", core_env.parallel_env())

Every checkpoint continues the same 2.0M-step MARA for the same 300,032 PPO steps with one
change (``weights/ablation/README.json`` gives the commands); ``mara_ft`` changes nothing
and is the control.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, cast

from mara_agents.policy import file_fingerprint, make_policy

ABLATION_DIR = Path(__file__).resolve().parent / "weights" / "ablation"
"""Where the ablation checkpoints are shipped."""


class CheckpointFactory(Protocol):
    """What :func:`mara_on` returns: a policy factory with the checkpoint files it loads
    and their fingerprint."""

    paths: tuple[Path, ...]
    fingerprint: Callable[[], str]

    def __call__(self, env: Any, **kwargs: Any) -> Any: ...


def mara_on(*paths: Path) -> CheckpointFactory:
    """A policy factory of MARA on these checkpoint files (several: an ensemble), with the
    ``fingerprint`` the benchmark store keeps (stored results follow the weights)."""
    paths = tuple(Path(p) for p in paths)

    def factory(env: Any, **kwargs: Any):
        return make_policy("mara", env, checkpoint=list(paths) if len(paths) > 1 else paths[0],
                           **kwargs)

    factory.__doc__ = f"MARA on {', '.join(p.name for p in paths)}."
    out = cast(CheckpointFactory, factory)  # the function, with the two attributes set here
    out.fingerprint = lambda: file_fingerprint(*paths)
    out.paths = paths
    return out


mara_ft = mara_on(ABLATION_DIR / "mara_ft.pt")
"""The control: the 2.0M-step MARA fine-tuned 300k steps with no change."""
mara_wls = mara_on(ABLATION_DIR / "mara_wls.pt")
"""Without FM: WLS forecast columns instead of the flow-matching forecaster's."""
mara_noshaping = mara_on(ABLATION_DIR / "mara_noshaping.pt")
"""Without shaping: reward shaping beta 0."""
mat_dec = mara_on(ABLATION_DIR / "mat_dec.pt")
"""Without autoregression: independent per-node heads (MAT-Dec)."""

ABLATIONS = ("mara_ft", "mara_wls", "mara_noshaping", "mat_dec")
"""The ``ablation`` suite's policies, the control first."""
