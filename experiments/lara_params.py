"""LARA with one parameter changed, as policy factories: the parameter table of
``docs/baselines.md``.

    mara-bench baselines --presets CoRE-v0 --policies lara \\
        experiments.lara_params:explore_obs_0 experiments.lara_params:safety_1_5
    mara-bench baselines --presets CoRE-v0 --reference experiments.lara_params:oracle \\
        --policies experiments.lara_params:oracle \\
        experiments.lara_params:oracle_carry_remainders_false

Every name of :data:`CHANGES` is LARA on WLS forecasts with that change; ``oracle`` is LARA
on true remaining work (``OracleForecaster``) and ``oracle_<name>`` the same with the
change (the table's "with oracle forecasts" cells, paired against ``oracle``).
"""

from __future__ import annotations

from typing import Any

from core_env.forecast import OracleForecaster
from mara_agents.policy import make_policy

CHANGES: dict[str, dict[str, Any]] = {
    "explore_obs_0": {"explore_obs": 0},
    "explore_obs_2": {"explore_obs": 2},
    "explore_obs_5": {"explore_obs": 5},
    "explore_budget_0_25": {"explore_budget": 0.25},
    "explore_budget_0_75": {"explore_budget": 0.75},
    "explore_split_visible": {"explore_split": "visible"},
    "column_fc_q10": {"column": "fc_q10"},
    "column_fc_q90": {"column": "fc_q90"},
    "safety_1_5": {"safety": 1.5},
    "deadline_margin_0": {"deadline_margin": 0},
    "capacity_model_sequential": {"capacity_model": "sequential"},
    "carry_remainders_false": {"carry_remainders": False},
    "work_conserving_false": {"work_conserving": False},
    "repairs_off": {"deadline_margin": 0, "carry_remainders": False},
}
"""Factory name -> the ``LARAParams`` fields it changes."""

ORACLE_CHANGES = ("deadline_margin_0", "capacity_model_sequential", "carry_remainders_false",
                  "repairs_off")
"""The changes also measured with true remaining work (``oracle_<name>``)."""


def _lara(changes: dict[str, Any], oracle: bool):
    def factory(env: Any, **kwargs: Any):
        forecaster = OracleForecaster.for_env(env) if oracle else None
        return make_policy("lara", env, forecaster=forecaster, **changes, **kwargs)

    what = ", ".join(f"{k}={v!r}" for k, v in changes.items()) or "the defaults"
    factory.__doc__ = f"LARA with {what}{' on true remaining work' if oracle else ''}."
    return factory


globals().update({name: _lara(changes, False) for name, changes in CHANGES.items()})
oracle = _lara({}, True)
globals().update({f"oracle_{name}": _lara(CHANGES[name], True) for name in ORACLE_CHANGES})
