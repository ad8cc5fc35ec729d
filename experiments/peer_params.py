"""The tuning grids of the peer schedulers (docs/baselines.md, "Peer schedulers"), as policy
factories.

Every peer was tuned the same way: each configuration of its grid below ran on the selection
seeds 100-147 of CoRE-v0 (never the reported seeds 0-49), and its default is the
configuration with the highest mean completion rate there::

    python -m experiments.scripts.tune_peers                 # every peer, 2 processes
    python -m experiments.scripts.tune_peers --peers las     # one

A configuration is a factory named ``<peer>__<param>_<value>__...`` (dots and minus signs
spelled ``_`` and ``m``), e.g. ``experiments.peer_params:las__queues_3__threshold_16``, so
``mara-bench baselines --policies`` runs any of them.
"""

from __future__ import annotations

import itertools
from typing import Any

from core_env.forecast import LossForecastWrapper, WLSForecaster
from mara_agents.policy import make_policy

GRIDS: dict[str, dict[str, list[Any]]] = {
    "las": {"queues": [2, 3], "threshold": [4.0, 16.0, 64.0], "starve_limit": [0.0, 8.0]},
    "successive_halving": {"r_min": [2.0, 4.0, 8.0], "eta": [2.0, 3.0, 4.0],
                           "metric": ["gap", "forecast"]},
    "optimus": {"default_remaining": [10.0, 40.0, 160.0], "deadline_aware": [False, True]},
    "slaq": {"decay": [0.7, 0.9, 1.0], "min_points": [3, 5]},
    "laira": {"z": [0.0, 1.0, 2.0], "beta": [0.0, 0.5, 2.0, 4.0, 8.0],
              "share": ["needed", "cap"]},
}
"""Peer name -> parameter -> the values tried (every combination)."""


def _word(value: Any) -> str:
    return str(value).replace(".", "_").replace("-", "m")


def configurations(peer: str) -> dict[str, dict[str, Any]]:
    """Factory name -> keyword arguments, for every configuration of ``peer``'s grid."""
    grid = GRIDS[peer]
    out = {}
    for values in itertools.product(*grid.values()):
        kwargs = dict(zip(grid, values, strict=False))
        out["__".join([peer] + [f"{k}_{_word(v)}" for k, v in kwargs.items()])] = kwargs
    return out


def _factory(peer: str, kwargs: dict[str, Any]):
    def factory(env: Any, **more: Any):
        if kwargs.get("metric") == "forecast":  # successive halving on WLS forecasts
            env = LossForecastWrapper(env, WLSForecaster())
        return make_policy(peer, env, **kwargs, **more)

    factory.__doc__ = f"{peer} with {kwargs}."
    return factory


for _peer in GRIDS:
    globals().update({name: _factory(_peer, kw) for name, kw in configurations(_peer).items()})
