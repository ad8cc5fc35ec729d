"""``MARAPolicy``: the trained MAT as a :class:`~mara_agents.policy.Policy` (SPEC §5).

    import core_env
    from mara_agents.policy import make_policy, run_episode
    env, policy = make_policy("mara", core_env.parallel_env(preset="CoRE-v0"))
    print(run_episode(env, policy, seed=0)["completion_rate"])

MARA reads the forecast columns exactly as it was trained: from a
``LossForecastWrapper(env, forecaster, cache=True)`` around the forecaster named in its
checkpoint (FM for the shipped one); :func:`~mara_agents.policy.make_policy` builds that
wrapper. Actions are decoded node by node with the sequential mask, greedily by default
(deterministic for a seed), or sampled from the policy with ``deterministic=False``.

``checkpoint=`` a list of checkpoints makes an ensemble (``make_policy("mara-ens5", env)``
is the shipped one): at every node position the members score the actions given the same
earlier choices and the ensemble follows the mean of their scores (the geometric mean of
their distributions; :func:`~mara_agents.mat.ensemble_act`).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Union

import numpy as np
import torch

from mara_agents.mat import ensemble_act, split_observations
from mara_agents.mat_numpy import NumpyEnsemble, NumpyMAT
from mara_agents.ppo import load_checkpoint, model_from_checkpoint, train_config

DEFAULT_CHECKPOINT = "mara_default.pt"
"""File name of the shipped checkpoint in ``mara_agents/checkpoints``."""

Checkpoints = Union[str, Path, Sequence[Union[str, Path]], None]
"""One checkpoint, several (an ensemble), or None (the shipped one)."""


def _paths(checkpoint: Checkpoints) -> list[Path]:
    if checkpoint is None:
        return [checkpoint_path()]
    if isinstance(checkpoint, (str, Path)):
        return [Path(checkpoint)]
    paths = [Path(c) for c in checkpoint]
    if not paths:
        raise ValueError("checkpoint: an empty list (an ensemble needs at least one member)")
    return paths


def checkpoint_path(name: str = DEFAULT_CHECKPOINT) -> Path:
    """Path of a checkpoint shipped in the package."""
    return Path(str(resources.files("mara_agents") / "checkpoints" / name))


def checkpoint_forecaster(checkpoint: Checkpoints = None) -> tuple[str, int, int]:
    """The forecaster (``"fm"`` or ``"wls"``) a checkpoint was trained with, and the FM
    sampler's ODE steps and samples.

    Raises:
        ValueError: ensemble members trained on different forecast columns (names them).
    """
    paths = _paths(checkpoint)
    found = []
    for p in paths:
        cfg = train_config(load_checkpoint(p))
        try:
            found.append((str(cfg["forecaster"]), int(cfg["fm_steps"]),
                          int(cfg["fm_samples"])))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{p}: train_config: malformed forecaster settings ({e!r})") from e
    for p, f in zip(paths[1:], found[1:]):
        if f != found[0]:
            raise ValueError(f"checkpoint: ensemble members read different forecast columns: "
                             f"{paths[0]} (forecaster, fm_steps, fm_samples) = {found[0]}, "
                             f"{p} = {f}")
    return found[0]


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

    Raises:
        ValueError: the env has no cached forecast wrapper, a checkpoint was trained for
            another observation layout (node count, slots or features), or ensemble
            members that do not fit together.
    """

    needs_forecast = True

    def __init__(self, env: Any, checkpoint: Checkpoints = None,
                 deterministic: bool = True, threads: int | None = 1) -> None:
        from mara_agents.policy import _forecast_wrapper

        if threads is not None:
            torch.set_num_threads(threads)
        wrapper = _forecast_wrapper(env)
        if wrapper is None or wrapper.cache is None:
            raise ValueError("env: MARA needs LossForecastWrapper(env, forecaster, cache=True) "
                             "(use make_policy('mara', env))")
        paths = _paths(checkpoint)
        blobs = [load_checkpoint(p) for p in paths]
        self.layout = wrapper.layout
        self.models = [model_from_checkpoint(b, self.layout, str(p))
                       for b, p in zip(blobs, paths)]
        self.model = self.models[0]
        # greedy decoding in numpy (the same actions as the torch path)
        self.greedy = (NumpyMAT(self.model) if len(self.models) == 1
                       else NumpyEnsemble(self.models))
        self.train_config = train_config(blobs[0])
        """The (first) member's training config."""
        self.agents = list(env.possible_agents)
        self.deterministic = deterministic
        self.generator = torch.Generator().manual_seed(0)

    @classmethod
    def pretrained(cls, env: Any, deterministic: bool = True) -> MARAPolicy:
        """The shipped checkpoint (trained on ``CoRE-v0`` with the pretrained FM)."""
        return cls(env, checkpoint_path(), deterministic=deterministic)

    def reset(self, seed: int | None = None) -> None:
        self.generator = torch.Generator().manual_seed(0 if seed is None else int(seed))

    def act(self, observations: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
        missing = [a for a in self.agents if a not in observations]
        if missing:
            raise ValueError(f"observations: MARA decodes all nodes jointly, missing "
                             f"{missing}")
        obs = np.stack([observations[a]["observation"] for a in self.agents])[None]
        mask = np.stack([observations[a]["action_mask"] for a in self.agents])[None]
        x = split_observations(obs, mask, self.layout)
        if self.deterministic:
            actions = self.greedy.act(x)
        else:
            with torch.inference_mode():
                if len(self.models) == 1:
                    actions = self.model.act(x, generator=self.generator)[0].numpy()
                else:
                    actions = ensemble_act(self.models, x, deterministic=False,
                                           generator=self.generator).numpy()
        return {a: int(actions[0, i]) for i, a in enumerate(self.agents)}
