"""Loss-forecast columns for the task table: :class:`LossForecastWrapper` (SPEC §4).

The wrapper is the one place that turns observed histories into forecasts: once per step it
collects the histories of every visible task, calls the forecaster once for all of them, and
appends five columns to every task row of every observation (and of ``state()``):

==============  ==================================================================
column          meaning
==============  ==================================================================
``fc_mean``     forecast mean remaining work / achievable work, clipped to [0, 2], / 2
``fc_q10``      10% quantile, same normalisation
``fc_q50``      median, same normalisation
``fc_q90``      90% quantile, same normalisation
``fc_p_reach``  probability of reaching the target within the achievable work
==============  ==================================================================

"Achievable work" is what the task can still receive before its deadline at full
parallelism and mean node speed, ``min(p, N)**alpha * mean_speed * (deadline - t)``, so a
normalised value below 0.5 reads "reachable in time if served at full cap". Empty slots
have zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.wrappers import BaseParallelWrapper

from core_env.forecast.cache import ForecastCache, achievable_work, inputs_at
from core_env.forecast.protocol import Forecaster, HistoryBatch, RemainingWork, forecast
from core_env.layout import Feature, Layout
from core_env.state import BatchState

FORECAST_FEATURES = (
    Feature("fc_mean", 0.0, 1.0,
            "forecast mean remaining work / achievable work before the deadline, clipped "
            "to [0, 2], / 2"),
    Feature("fc_q10", 0.0, 1.0, "10% quantile of remaining work, normalised like fc_mean"),
    Feature("fc_q50", 0.0, 1.0, "median remaining work, normalised like fc_mean"),
    Feature("fc_q90", 0.0, 1.0, "90% quantile of remaining work, normalised like fc_mean"),
    Feature("fc_p_reach", 0.0, 1.0,
            "forecast probability of reaching the target within the achievable work"),
)
"""Columns appended to every task row by :class:`LossForecastWrapper`."""


def slot_inputs(sim: BatchState, rows: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, HistoryBatch, np.ndarray, np.ndarray]:
    """Histories, targets and achievable work of every visible task, vectorised.

    Args:
        sim: the simulator state.
        rows: environment indices to include (default all).

    Returns:
        ``(env, slot, batch, log_targets, achievable)``: int64[n] environment and slot of
        each visible task, its :class:`HistoryBatch`, float64[n] ln targets and float64[n]
        achievable work before the deadline.
    """
    present = sim.slot_task >= 0
    if rows is not None:
        keep = np.zeros(sim.batch_size, dtype=bool)
        keep[rows] = True
        present &= keep[:, None]
    env, slot = np.nonzero(present)
    batch, log_targets = inputs_at(sim, env, slot)
    return env, slot, batch, log_targets, achievable_work(sim)[env, slot]


def forecast_columns(fc: RemainingWork, achievable: np.ndarray) -> np.ndarray:
    """float32[n, 5] normalised forecast columns (:data:`FORECAST_FEATURES` order)."""
    scale = 1.0 / np.maximum(achievable, 1e-9)
    cols = [np.minimum(q * scale, 2.0) * 0.5 for q in (fc.mean, fc.q10, fc.q50, fc.q90)]
    cols.append(np.clip(fc.p_reach, 0.0, 1.0))
    return np.stack(cols, axis=1).astype(np.float32)


class LossForecastWrapper(BaseParallelWrapper):
    """Appends forecast columns (:data:`FORECAST_FEATURES`) to every task row.

    Args:
        env: a ``CoreSchedulerEnv`` or a wrapper around one.
        forecaster: any :class:`~core_env.forecast.Forecaster`.
        cache: if True, forecast only the tasks that are new or have a new observation and
            compute ``fc_p_reach`` from the cached quantiles
            (:class:`~core_env.forecast.cache.ForecastCache`; what MARA is trained with);
            if False (default) forecast every visible task every step.

    Attributes:
        layout, state_layout: the extended layouts (task rows have F + 5 columns).
        forecast_calls: how many times the forecaster has been called.
    """

    def __init__(self, env: Any, forecaster: Forecaster, cache: bool = False) -> None:
        super().__init__(env)
        if not isinstance(forecaster, Forecaster):
            raise ValueError(f"forecaster: expected an object with a predict(histories, "
                             f"targets, budgets) method, got {type(forecaster).__name__}")
        self.forecaster = forecaster
        self.inner_layout: Layout = env.layout
        self.layout: Layout = env.layout.with_task_features(FORECAST_FEATURES)
        self.inner_state_layout: Layout = env.state_layout
        self.state_layout: Layout = env.state_layout.with_task_features(FORECAST_FEATURES)
        lo, hi = self.layout.bounds()
        k = self.layout.n_slots
        obs_space = spaces.Dict({
            "observation": spaces.Box(lo, hi, dtype=np.float32),
            "action_mask": spaces.Box(0, 1, shape=(k + 1,), dtype=np.int8),
        })
        self.observation_spaces = {a: obs_space for a in env.possible_agents}
        slo, shi = self.state_layout.bounds()
        self.state_space = spaces.Box(slo, shi, dtype=np.float32)
        self.forecast_calls = 0
        self._extra = np.zeros((k, len(FORECAST_FEATURES)), dtype=np.float32)
        self.cache = ForecastCache(forecaster, 1, k) if cache else None

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        if self.cache is not None:
            self.cache.reset()
        self._update_forecasts()
        return self._augment(obs), infos

    def step(self, actions: dict[str, Any]):
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self._update_forecasts()
        return self._augment(obs), rewards, terms, truncs, infos

    def state(self) -> np.ndarray:
        inner = self.env.state()
        return _extend(inner, self.inner_state_layout, self._extra)

    def _update_forecasts(self) -> None:
        """One forecaster call for all visible tasks."""
        sim = self.env.unwrapped.sim
        if self.cache is not None:
            calls = self.cache.calls
            self._extra[:] = self.cache.update(sim)[0]
            self.forecast_calls += self.cache.calls - calls
            return
        _, slot, batch, log_targets, achievable = slot_inputs(sim)
        self._extra[:] = 0.0
        if slot.size:
            fc = forecast(self.forecaster, batch, log_targets, achievable)
            self.forecast_calls += 1
            self._extra[slot] = forecast_columns(fc, achievable)

    def _augment(self, obs: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
        if not obs:
            return obs
        agents = list(obs)
        stacked = np.stack([obs[a]["observation"] for a in agents])
        wide = _extend(stacked, self.inner_layout, self._extra)
        return {a: {"observation": wide[i], "action_mask": obs[a]["action_mask"]}
                for i, a in enumerate(agents)}


def _extend(x: np.ndarray, layout: Layout, extra: np.ndarray) -> np.ndarray:
    """Append ``extra[K, E]`` to the task rows of flat vectors ``x[..., D]`` laid out by
    ``layout``; returns float32[..., D + K * E]."""
    head = x[..., : layout.task_block.start]
    table = layout.task_table(x)
    extra_b = np.broadcast_to(extra, table.shape[:-1] + extra.shape[-1:])
    wide = np.concatenate([table, extra_b], axis=-1).reshape(*x.shape[:-1], -1)
    return np.concatenate([head, wide], axis=-1).astype(np.float32, copy=False)


def forecast_wrapper(env: Any) -> LossForecastWrapper | None:
    """The ``LossForecastWrapper`` in ``env``'s wrapper chain, if any."""
    e = env
    while e is not None:
        if isinstance(e, LossForecastWrapper):
            return e
        e = getattr(e, "env", None)
    return None
