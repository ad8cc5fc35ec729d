"""``MARAPolicy``: the trained MAT as a :class:`~mara_agents.policy.Policy` (SPEC §5).

    import core_env
    from mara_agents.policy import make_policy, run_episode
    env, policy = make_policy("mara", core_env.parallel_env(preset="CoRE-v0"))
    print(run_episode(env, policy, seed=0)["completion_rate"])

MARA reads the forecast columns exactly as it was trained: from a
``LossForecastWrapper(env, forecaster, cache=True)`` around the forecaster named in its
checkpoint (FM for the shipped one), with that checkpoint's FM sampler settings;
:func:`mara_env` builds that wrapper (``make_policy("mara", env)`` calls it). Actions are
decoded node by node with the sequential mask, greedily by default (deterministic for a
seed), or sampled from the policy with ``deterministic=False``.

``checkpoint=`` a list of checkpoints makes an ensemble: at every node position the members
score the actions given the same earlier choices and the ensemble follows the mean of their
scores (:func:`~mara_agents.mat.ensemble.ensemble_act`).

This module imports no training code (no TensorBoard, no optimiser).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np
import torch

from mara_agents.baselines.placement import keep_nodes, node_slots
from mara_agents.mat.checkpoint import (
    input_columns,
    load_checkpoint,
    model_from_checkpoint,
    shipped,
)
from mara_agents.mat.ensemble import ensemble_act
from mara_agents.mat.inputs import select_inputs, split_observations
from mara_agents.mat.numpy_infer import NumpyEnsemble, NumpyMAT

PLACEMENTS = ("auto", "model", "keep")
"""The values of :class:`MARAPolicy`'s ``placement``."""

Checkpoints = Union[str, Path, Sequence[Union[str, Path]], None]
"""One checkpoint, several (an ensemble), or None (the shipped one)."""


def checkpoint_paths(checkpoint: Checkpoints) -> list[Path]:
    """The files of a checkpoint argument (None: the shipped default)."""
    if checkpoint is None:
        return [shipped()]
    if isinstance(checkpoint, (str, Path)):
        return [Path(checkpoint)]
    paths = [Path(c) for c in checkpoint]
    if not paths:
        raise ValueError("checkpoint: an empty list (an ensemble needs at least one member)")
    return paths


def checkpoint_forecaster(checkpoint: Checkpoints = None) -> tuple[str, int, int]:
    """The forecaster (a name of :data:`~mara_agents.forecast.registry.FORECASTERS`) a
    checkpoint was trained with, and the FM sampler's ODE steps and samples.

    Raises:
        ValueError: ensemble members trained on different forecast columns (names them).
    """
    paths = checkpoint_paths(checkpoint)
    found = []
    for p in paths:
        cfg = load_checkpoint(p)["train_config"]
        found.append((cfg["forecaster"], cfg["fm_steps"], cfg["fm_samples"]))
    for p, f in zip(paths[1:], found[1:], strict=False):
        if f != found[0]:
            raise ValueError(f"checkpoint: ensemble members read different forecast columns: "
                             f"{paths[0]} (forecaster, fm_steps, fm_samples) = {found[0]}, "
                             f"{p} = {f}")
    return found[0]


def mara_env(env: Any, checkpoint: Checkpoints = None, fm_steps: int | None = None) -> Any:
    """``env`` wrapped in the cached forecast wrapper a checkpoint was trained with (its
    forecaster and FM sampler settings; ``fm_steps`` overrides the ODE steps), integrated by
    the numpy sampler (the same columns to float32 rounding, faster for one environment).
    An env that already has a cached forecast wrapper is returned as it is.

    Raises:
        ValueError: ``fm_steps`` for a wrapped env or a checkpoint without FM columns.
    """
    from core_env.forecast import LossForecastWrapper, forecast_wrapper
    from mara_agents.forecast.registry import FM_CHECKPOINTS, make_forecaster

    if forecast_wrapper(env) is not None:
        if fm_steps is not None:
            raise ValueError("fm_steps: only applies to the FM forecaster make_policy builds; "
                             "pass a plain env, or set the steps on your forecaster")
        return env
    name, steps, samples = checkpoint_forecaster(checkpoint)
    if fm_steps is not None and name not in FM_CHECKPOINTS:
        raise ValueError(f"fm_steps: this checkpoint reads {name} forecasts, which have no "
                         f"ODE steps")
    forecaster = make_forecaster(name, fm_steps=steps if fm_steps is None else fm_steps,
                                 fm_samples=samples, fm_backend="numpy")
    return LossForecastWrapper(env, forecaster, cache=True)


class MARAPolicy:
    """A trained MAT acting through the PettingZoo API.

    Args:
        env: the environment it will act in: a ``LossForecastWrapper`` with ``cache=True``
            (see the module docstring).
        checkpoint: a checkpoint path (default: the shipped one), or a list of them: an
            ensemble (see the module docstring; members trained on the same forecast
            columns, autoregressive, with the same MAT sizes).
        deterministic: greedy decoding (default) or sampling.
        threads: torch CPU threads to use (``torch.set_num_threads``, process-wide; one
            thread is fastest for this small single-environment model); None leaves the
            setting alone.
        placement: which node trains which task. ``"model"``: as decoded. ``"keep"``: the
            decoded per-task node counts, placed as every baseline places them
            (:func:`~mara_agents.baselines.placement.keep_nodes`: nodes stay on their last
            task, then go to the task whose state they hold), so a switching cost is paid
            only where a task's count changes. ``"auto"`` (default): ``"keep"`` for a
            checkpoint trained with it (``train_config["placement"]``), else ``"keep"`` in
            an episode that charges a switch (the global feature ``episode_switch_cost``
            > 0, or a live env on the wall clock, where a move costs real time) and
            ``"model"`` in one that does not, so free-switching episodes are exactly the
            decoded ones.

    Raises:
        ValueError: the env has no cached forecast wrapper, a checkpoint was trained for
            another observation layout (node count, slots or features), or ensemble
            members that do not fit together.
    """

    needs_forecast = True

    def __init__(self, env: Any, checkpoint: Checkpoints = None,
                 deterministic: bool = True, threads: int | None = 1,
                 placement: str = "auto") -> None:
        from core_env.forecast import forecast_wrapper

        if placement not in PLACEMENTS:
            raise ValueError(f"placement: expected one of {PLACEMENTS}, got {placement!r}")
        if threads is not None:
            torch.set_num_threads(threads)
        wrapper = forecast_wrapper(env)
        if wrapper is None or wrapper.cache is None:
            raise ValueError("env: MARA needs LossForecastWrapper(env, forecaster, cache=True) "
                             "(use make_policy('mara', env))")
        paths = checkpoint_paths(checkpoint)
        blobs = [load_checkpoint(p) for p in paths]
        self.layout = wrapper.layout
        self.models = [model_from_checkpoint(b, self.layout, str(p))
                       for b, p in zip(blobs, paths, strict=False)]
        if any(b["layout"] != blobs[0]["layout"] for b in blobs):
            raise ValueError(f"checkpoint: ensemble members read different features: "
                             f"{[str(p) for p in paths]}")
        self.columns = input_columns(blobs[0], self.layout)
        """The env columns the checkpoint reads (None: all of them)."""
        self.model = self.models[0]
        # greedy decoding in numpy (the same actions as the torch path)
        self.greedy = (NumpyMAT(self.model) if len(self.models) == 1
                       else NumpyEnsemble(self.models))
        self.train_config = blobs[0]["train_config"]
        """The (first) member's training config."""
        self.agents = list(env.possible_agents)
        self.deterministic = deterministic
        self.generator = torch.Generator().manual_seed(0)
        trained = {b["train_config"].get("placement", "model") for b in blobs}
        self.placement = ("keep" if placement == "auto" and trained == {"keep"}
                          else placement)
        """``keep``, ``model``, or ``auto`` (keep where the episode charges a switch)."""
        # a live env on the wall clock charges every move in real time
        self._wall_clock = getattr(env.unwrapped, "clock", None) == "wall"
        names = {f.name for f in self.layout.global_features}
        self._cost_index = (self.layout.index("episode_switch_cost")
                            if "episode_switch_cost" in names else None)

    def reset(self, seed: int | None = None) -> None:
        self.generator = torch.Generator().manual_seed(0 if seed is None else int(seed))

    def act(self, observations: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
        missing = [a for a in self.agents if a not in observations]
        if missing:
            raise ValueError(f"observations: MARA decodes all nodes jointly, missing "
                             f"{missing}")
        obs = np.stack([observations[a]["observation"] for a in self.agents])[None]
        mask = np.stack([observations[a]["action_mask"] for a in self.agents])[None]
        x = select_inputs(split_observations(obs, mask, self.layout), self.columns)
        if self.deterministic:
            actions = self.greedy.act(x)
        else:
            with torch.inference_mode():
                if len(self.models) == 1:
                    actions = self.model.act(x, generator=self.generator)[0].numpy()
                else:
                    actions = ensemble_act(self.models, x, deterministic=False,
                                           generator=self.generator).numpy()
        if self.placement == "keep" or (self.placement == "auto" and self._charged(obs)):
            last, held = node_slots(obs[0], self.layout)
            actions = keep_nodes(np.asarray(actions)[0], last, held, mask[0])[None]
        return {a: int(actions[0, i]) for i, a in enumerate(self.agents)}

    def _charged(self, obs: np.ndarray) -> bool:
        """Whether this episode charges a switch (its ``episode_switch_cost`` > 0, or the
        live wall clock)."""
        return self._wall_clock or (self._cost_index is not None
                                    and float(obs[0, 0, self._cost_index]) > 0)
