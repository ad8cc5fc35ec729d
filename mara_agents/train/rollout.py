"""The batched simulator with forecast columns, as MARA's trainers step it.

:class:`Rollout` owns B environments of :class:`core_env.BatchedCoreEnv`, a
:class:`~core_env.forecast.cache.ForecastCache` around the forecaster, and the current
observations: :meth:`Rollout.inputs` gives the model's inputs for them, :meth:`Rollout.step`
executes a joint action (finished environments restart, and their cached forecasts are
dropped). PPO (:mod:`~mara_agents.train.trainer`), imitation
(:mod:`~mara_agents.train.imitation`) and distillation (:mod:`~mara_agents.train.distill`)
all step through it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import core_env
from core_env.forecast.cache import ForecastCache
from core_env.state import BatchState
from mara_agents.baselines.placement import keep_nodes, node_slots
from mara_agents.mat.checkpoint import wrapped_layout
from mara_agents.mat.inputs import inputs_from_batched
from mara_agents.mat.mara_policy import PLACEMENTS
from mara_agents.mat.model import Inputs


class Rollout:
    """B environments, their forecast cache and current observations.

    Args:
        config: the environments' configuration.
        num_envs: B.
        forecaster: the forecaster behind the columns.
        placement: ``"model"`` executes the joint actions as given; ``"keep"`` executes
            their per-task node counts placed as MARA places them at inference
            (:func:`~mara_agents.baselines.placement.keep_nodes`): the placement is part of
            the environment the policy learns in.

    Attributes:
        env: the batched simulator; ``plain_layout`` its observation layout, ``layout`` the
            layout with the forecast columns (what the model reads).
        obs, mask: float32[B, N, D] and int8[B, N, K+1] of the current step.
        tenant_successes: int64[B, G] successes by tenant of the last step (None without
            tenants).
    """

    def __init__(self, config: core_env.CoreConfig, num_envs: int, forecaster: Any,
                 placement: str = "model") -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement: expected one of {PLACEMENTS}, got {placement!r}")
        self.placement = placement
        self.env = core_env.BatchedCoreEnv(config, num_envs)
        self.plain_layout = self.env.layout
        self.layout = wrapped_layout(self.plain_layout)
        self.cache = ForecastCache(forecaster, num_envs, self.layout.n_slots)
        self.obs: np.ndarray | None = None
        self.mask: np.ndarray | None = None
        self.tenant_successes: np.ndarray | None = None

    @property
    def sim(self) -> BatchState:
        """The simulator state of the current step."""
        return self.env.sim

    def reset(self, seed: int) -> None:
        """Start every environment afresh (environment b from the b-th seed spawned from
        ``seed``) and forget the cached forecasts."""
        obs, self.mask = self.env.reset(seed=seed)
        assert isinstance(obs, np.ndarray)  # full observations (the env's default)
        self.obs = obs
        self.cache.reset()

    def inputs(self) -> Inputs:
        """The model's inputs for the current step (forecasts refreshed where stale)."""
        extra = self.cache.update(self.env.sim)
        assert self.obs is not None and self.mask is not None, "call reset() first"
        return inputs_from_batched(self.obs, self.mask, self.plain_layout, extra)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """Execute int[B, N] actions; returns ``(reward[B], done[B], episodes)`` where
        ``episodes`` is the batched simulator's ``info["episode"]`` of the environments that
        finished (they have restarted)."""
        assert self.obs is not None and self.mask is not None, "call reset() first"
        if self.placement == "keep":
            last, held = node_slots(self.obs, self.plain_layout)
            actions = np.stack([keep_nodes(a, la, h, m) for a, la, h, m
                                in zip(np.asarray(actions), last, held, self.mask, strict=False)])
        obs, mask, reward, done, info = self.env.step(actions)
        self.tenant_successes = info.get("tenant_successes")
        if done.any():
            self.cache.reset(done)
        assert isinstance(obs, np.ndarray)  # full observations (the env's default)
        self.obs, self.mask = obs, mask
        return reward, done, info["episode"]
