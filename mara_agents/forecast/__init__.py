"""MARA's conditional flow-matching loss-curve forecaster (SPEC §4).

    from mara_agents.forecast import FlowMatchingForecaster
    fm = FlowMatchingForecaster.pretrained()          # the shipped checkpoint
    rw = fm.predict(histories, targets, budgets)      # a core_env.forecast.RemainingWork

Modules: :mod:`.matcher` (CFM targets), :mod:`.model` (representation and network),
:mod:`.forecaster` (sampling and remaining work), :mod:`.train` (the
``mara-train-forecaster`` command). See ``docs/forecasting_fm.md``.
"""

from mara_agents.forecast.forecaster import (
                                             CHECKPOINT_DIR,
                                             FlowMatchingForecaster,
                                             SamplerConfig,
                                             crossing_offsets,
)
from mara_agents.forecast.matcher import ConditionalFlowMatcher
from mara_agents.forecast.model import (
                                             FlowForecastNet,
                                             ModelConfig,
                                             future_trajectories,
                                             prefix_features,
)

__all__ = [
    "CHECKPOINT_DIR", "ConditionalFlowMatcher", "FlowForecastNet", "FlowMatchingForecaster",
    "ModelConfig", "SamplerConfig", "crossing_offsets", "future_trajectories",
    "prefix_features",
]
