"""Stable-Baselines3 over the PettingZoo env through SuperSuit: one vector-env entry per node,
for parameter-shared (Maskable)PPO. Needs the ``sb3`` extra (``pip install -e ".[sb3]"``)::

    from sb3_contrib import MaskablePPO
    from core_env.integrations.sb3 import make_vec_env

    model = MaskablePPO("MultiInputPolicy", make_vec_env("CoRE-Small-v0", 2), seed=0)
    model.learn(65_536)

:func:`make_vec_env` stacks copies of SuperSuit's per-node vector env in
:class:`SeededSB3VecEnv`, which hands MaskablePPO each node's ``action_mask`` through
``env_method("action_masks")`` and repairs SuperSuit's rough edges on our side: it seeds
(copy i of the env gets ``seed + i`` at the next ``reset``), it sets
``"TimeLimit.truncated"`` from SuperSuit's truncation flags so that SB3 bootstraps truncated
episodes, and it adds SB3's ``r`` and ``l`` to our ``info["episode"]`` (so
``rollout/ep_rew_mean`` is the mean number of completed tasks). Details and measured runs:
``docs/integrations.md``, "Parameter-shared PPO over the PettingZoo env (SuperSuit)".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import supersuit as ss
from supersuit.vector.sb3_vector_wrapper import SB3VecEnvWrapper

import core_env


class SeededSB3VecEnv(SB3VecEnvWrapper):
    """SuperSuit's SB3 vector env with a working ``seed``, explicit truncation infos,
    SB3's ``r``/``l`` keys in ``info["episode"]`` and MaskablePPO's ``action_masks``."""

    def __init__(self, venv: Any) -> None:
        super().__init__(venv)
        self._next_seed: int | None = None
        self._masks = np.ones((self.num_envs, self.action_space.n), dtype=bool)

    def has_attr(self, attr_name: str) -> bool:
        """Only ``action_masks`` (what MaskablePPO asks for) is provided."""
        return attr_name == "action_masks"

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None,
                   **method_kwargs: Any) -> list[Any]:
        """``env_method("action_masks")``: bool[K + 1] per entry, from the last observation."""
        if method_name != "action_masks":
            raise AttributeError(f"method_name: expected 'action_masks', got {method_name!r}")
        return list(self._masks)

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Use ``seed`` at the next :meth:`reset` (SB3 calls this when the model is seeded)."""
        self._next_seed = seed
        return [seed] * self.num_envs

    def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
        """Reset every copy, with the seed given here or stored by :meth:`seed`."""
        seed = self._next_seed if seed is None else seed
        self._next_seed = None
        observations, self.reset_infos = self.venv.reset(seed=seed, options=options)
        self._masks = observations["action_mask"].astype(bool)
        return observations

    def step_wait(self) -> Any:
        """SB3's ``(obs, rewards, dones, infos)``, with ``TimeLimit.truncated`` set on
        truncation and SB3's ``r``/``l`` added to ``info["episode"]``."""
        observations, rewards, terminations, truncations, infos = self.venv.step_wait()
        for i in np.flatnonzero(truncations):
            if not terminations[i]:
                infos[i]["TimeLimit.truncated"] = True
        for info in infos:
            stats = info.get("episode")
            if stats is not None and "r" not in stats:
                info["episode"] = {**stats, "r": stats["return"], "l": stats["length"]}
        self._masks = observations["action_mask"].astype(bool)
        return observations, rewards, np.logical_or(terminations, truncations), infos


def make_vec_env(preset: str = "CoRE-Small-v0", num_copies: int = 2, **overrides: Any
                 ) -> SeededSB3VecEnv:
    """An SB3 vector env of ``num_copies`` parallel envs with one entry per node.

    Args:
        preset: a ``core_env`` preset id.
        num_copies: independent environments (each gives ``n_nodes`` entries).
        **overrides: configuration overrides for :func:`core_env.parallel_env`.
    """
    par = core_env.parallel_env(preset=preset, **overrides)
    vec = ss.pettingzoo_env_to_vec_env_v1(par)
    vec = ss.concat_vec_envs_v1(vec, num_copies, num_cpus=0, base_class="gymnasium")
    return SeededSB3VecEnv(vec)
