"""The forecasters behind MARA's forecast columns, by name: the one list used by training
(``mara-train --forecaster``), inference (a checkpoint names its forecaster) and the
benchmarks."""

from __future__ import annotations

from typing import Any

FM_CHECKPOINTS = {"fm": "fm_default", "fm-v1": "fm_v1"}
"""The shipped flow-matching forecasters by name, and their checkpoint names in
``mara_agents/forecast/weights/``: ``fm`` is trained on the synthetic mix alone, ``fm-v1``
on the synthetic mix and the real banks' train split (a quarter of its cases)."""

FORECASTERS = (*FM_CHECKPOINTS, "wls")
"""The FM forecasters of :data:`FM_CHECKPOINTS`, and ``wls``: LARA's estimator (the
MARA-with-WLS ablation)."""

DEFAULT_FORECASTER = "fm"
"""The forecaster ``mara-train`` trains MARA on unless told otherwise."""


def make_forecaster(name: str, fm_steps: int | None = None, fm_samples: int | None = None,
                    fm_backend: str = "torch") -> Any:
    """A forecaster by name.

    Args:
        name: one of :data:`FORECASTERS`.
        fm_steps: the FM sampler's ODE steps (None: the FM checkpoint's own 10; WLS has
            none).
        fm_samples: the FM sampler's samples per forecast (None: the checkpoint's 32).
        fm_backend: FM's ``backend``: ``"numpy"`` for one environment, ``"torch"`` for the
            batched simulator.

    Raises:
        ValueError: an unknown name (the valid ones are listed).
    """
    if name in FM_CHECKPOINTS:
        from mara_agents.forecast.forecaster import FlowMatchingForecaster

        overrides = {k: v for k, v in (("steps", fm_steps), ("samples", fm_samples))
                     if v is not None}
        return FlowMatchingForecaster.pretrained(FM_CHECKPOINTS[name], backend=fm_backend,
                                                 **overrides)
    if name == "wls":
        from core_env.forecast import WLSForecaster

        return WLSForecaster()
    raise ValueError(f"forecaster: expected one of {FORECASTERS}, got {name!r}")
