"""A centralised single-agent Gymnasium view of the scheduler (for MaskablePPO & co.).

``gymnasium.make("core_env:core_env/CoRE-Small-v0")`` returns a :class:`CentralCoreEnv`: one
agent chooses every node's action at once. Action ``MultiDiscrete([K + 1] * N)``;
observation ``Dict(state=Box(S), action_mask=Box((N, K + 1), int8))`` where ``state`` is the
PettingZoo env's global state; ``action_masks()`` returns the flat boolean mask that
sb3-contrib's MaskablePPO expects. The reward is the team reward. With
``observations="blocks"`` the observation is the entity view instead:
``Dict(globals=Box(G), nodes=Box((N, NF)), tasks=Box((K, F)), action_mask=...)``.

At the end of an episode ``info["episode"]`` holds the PettingZoo env's statistics plus
Stable-Baselines3's ``r`` (return) and ``l`` (length), what its logger reads, so a plain
``DummyVecEnv`` logs it (no ``t``: a wall-clock entry would make the same seed and actions
give different infos); ``info["completion_rate"]`` is there too, so a ``Monitor`` (which
writes its own ``info["episode"]``) keeps it with ``Monitor(env,
info_keywords=("completion_rate",))``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from core_env.config import CoreConfig
from core_env.env import CoreSchedulerEnv, block_spaces


class CentralCoreEnv(gymnasium.Env):
    """Centralised view: the PettingZoo env driven by one joint action per step."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, config: CoreConfig | None = None, *, preset: str | None = None,
                 render_mode: str | None = None, observations: str = "full",
                 **overrides: Any) -> None:
        self.par = CoreSchedulerEnv(config, preset=preset, render_mode=render_mode,
                                    observations=observations, **overrides)
        self.observations = observations
        self.render_mode = render_mode
        self.config = self.par.config
        n, k = self.config.cluster.n_nodes, self.config.cluster.max_visible_tasks
        self.n_nodes, self.n_actions = n, k + 1
        self.action_space = spaces.MultiDiscrete([k + 1] * n)
        mask_space = spaces.Box(0, 1, shape=(n, k + 1), dtype=np.int8)
        if observations == "blocks":
            lay = self.par.layout
            self.observation_space = spaces.Dict({
                **block_spaces(lay, *lay.bounds(), n_rows=n), "action_mask": mask_space})
        else:
            self.observation_space = spaces.Dict({"state": self.par.state_space,
                                                  "action_mask": mask_space})
        self._mask = np.ones((n, k + 1), dtype=np.int8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.par.reset(seed=seed, options=options)
        return self._obs(), {}

    def step(self, action):
        a = np.asarray(action)
        if a.shape != (self.n_nodes,) or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"action: expected an int array of shape ({self.n_nodes},), got "
                             f"shape {a.shape} dtype {a.dtype}")
        if not self.par.agents:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        bad = (a < 0) | (a >= self.n_actions)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"action[{i}] (node_{i}): expected an int in "
                             f"[0, {self.n_actions - 1}], got {a[i]}")
        # the dynamics directly, without the PettingZoo shell's per-agent observations
        rew, term, trunc, info = self.par._step_joint(a.astype(np.int64))
        if term or trunc:
            self.par.agents = []
            ep = info["episode"]
            ep.update(r=ep["return"], l=ep["length"])
            info["completion_rate"] = ep["completion_rate"]
        return self._obs(), rew, term, trunc, info

    def action_masks(self) -> np.ndarray:
        """bool[N * (K + 1)]: the per-node masks concatenated (MaskablePPO's format)."""
        return self._mask.astype(bool).ravel()

    def render(self):
        return self.par.render()

    def _obs(self) -> dict[str, np.ndarray]:
        ob, sim = self.par._observer, self.par.sim
        ob.compute(sim)  # the blocks state() reads; no per-node observations
        self._mask = ob.write_mask(sim, ob.mask)[0].copy()
        if self.observations == "blocks":
            return {"globals": ob.globals[0].copy(), "nodes": ob.nodes[0].copy(),
                    "tasks": ob.table[0].copy(), "action_mask": self._mask.copy()}
        return {"state": self.par.state(), "action_mask": self._mask.copy()}
