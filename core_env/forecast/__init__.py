"""Loss forecasting for core_env (numpy only): protocol, WLS, oracle and the forecast wrapper.

    from core_env.forecast import LossForecastWrapper, WLSForecaster
    env = LossForecastWrapper(core_env.parallel_env(), WLSForecaster())

See ``docs/forecasting.md``.
"""

from core_env.forecast.oracle import OracleForecaster
from core_env.forecast.protocol import (
                                        QUANTILES,
                                        REMAINING_CAP,
                                        BaseForecaster,
                                        CurveHistory,
                                        Forecaster,
                                        HistoryBatch,
                                        RemainingWork,
                                        forecast,
)
from core_env.forecast.wls import OnlineWLS, WLSForecaster, naive_slope_forecaster
from core_env.forecast.wrapper import (
                                        FORECAST_FEATURES,
                                        LossForecastWrapper,
                                        forecast_columns,
                                        forecast_wrapper,
                                        slot_inputs,
)

__all__ = [
    "BaseForecaster", "CurveHistory", "FORECAST_FEATURES", "Forecaster", "HistoryBatch",
    "LossForecastWrapper", "OnlineWLS", "OracleForecaster", "QUANTILES", "REMAINING_CAP",
    "RemainingWork", "WLSForecaster", "forecast", "forecast_columns", "forecast_wrapper",
    "naive_slope_forecaster",
    "slot_inputs",
]
