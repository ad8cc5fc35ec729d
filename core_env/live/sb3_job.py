"""The ``sb3-classic`` job kind: Stable-Baselines3 PPO or A2C on a Gymnasium classic-control
task, with the loss of the ``sb3-rl`` curve bank (the ``sb3`` extra; SB3 and torch are
imported when the job is built, so ``core_env`` needs neither).

**Loss** (the bank's, ``benchmarks/data/rl_curves.py``): the normalised return gap
``max((R_best - R) / (R_best - R_worst), LOSS_FLOOR)`` of ``R``, the mean undiscounted return
of the training episodes that finished in the slot (up to the last 100), with the fixed
per-environment constants :data:`RETURN_RANGE`. A slot in which no episode finished
observes the previous loss again (1.0 before the first).

**Work and nodes.** A work unit is ``unit_steps`` environment steps per node. With k nodes
the job collects from k environments at once (``n_steps`` each per rollout) and PPO's
minibatches are k times larger, so k nodes see k times the steps in the same number of
gradient steps: synchronous data parallelism, as for the supervised kinds.

**State.** ``save`` holds the policy's and optimiser's tensors, the job's generators and its
counters. The environments are not part of it: every slot starts new episodes, from
environment seeds drawn from the job's generator (an episode in flight at a slot's end is
cut). Training runs on one torch thread, and the torch and numpy global generators SB3 draws
from are the job's own during ``train`` (the process's are put back afterwards), so a job's
losses depend on its seed alone, wherever and next to whatever it runs.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from core_env.live.scaling import check_lr_scaling, scaled_lr

LOSS_FLOOR = 0.01
"""Lower clip of the loss, so that ``log(loss)`` stays finite."""

RETURN_RANGE: dict[str, tuple[float, float]] = {
    "CartPole-v1": (0.0, 500.0),
    "Acrobot-v1": (-500.0, -60.0),
    "Pendulum-v1": (-1600.0, -150.0),
}
"""Per environment ``(R_worst, R_best)`` of the loss normalisation (see
``benchmarks/data/rl_curves.py`` for how they were chosen)."""

ALGOS = ("ppo", "a2c")


def normalised_loss(returns: np.ndarray, env_id: str) -> np.ndarray:
    """Loss of mean episode returns: ``max((R_best - R) / (R_best - R_worst), LOSS_FLOOR)``."""
    worst, best = RETURN_RANGE[env_id]
    gap = (best - np.asarray(returns, dtype=np.float64)) / (best - worst)
    return np.maximum(gap, LOSS_FLOOR)


class SB3ClassicJob:
    """SB3 ``algo`` on ``env_id`` (see the module docstring).

    Args:
        algo: ``"ppo"`` or ``"a2c"``. env_id: a key of :data:`RETURN_RANGE`.
        lr: learning rate (of one node's batch). n_steps: steps per environment per rollout.
        batch: PPO's per-node minibatch size. unit_steps: environment steps per node per
            work unit (a multiple of ``n_steps``).
        lr_scaling: the learning rate with k nodes: ``"none"``, ``"sqrt"`` or ``"linear"``.
    """

    def __init__(self, algo: str = "ppo", env_id: str = "CartPole-v1", lr: float = 3e-4,
                 n_steps: int = 128, batch: int = 64, unit_steps: int = 512,
                 lr_scaling: str = "none") -> None:
        if algo not in ALGOS:
            raise ValueError(f"algo: expected one of {ALGOS}, got {algo!r}")
        if env_id not in RETURN_RANGE:
            raise ValueError(f"env_id: expected one of {sorted(RETURN_RANGE)}, got {env_id!r}")
        for name, v in (("n_steps", n_steps), ("batch", batch), ("unit_steps", unit_steps)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        if unit_steps % n_steps:
            raise ValueError(f"unit_steps: expected a multiple of n_steps={n_steps}, got "
                             f"{unit_steps}")
        check_lr_scaling(lr_scaling)
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr: expected a positive number, got {lr!r}")
        self.algo, self.env_id, self.lr, self.lr_scaling = algo, env_id, float(lr), lr_scaling
        self.n_steps, self.batch, self.unit_steps = n_steps, batch, unit_steps

    def _model(self, nodes: int) -> Any:
        """A fresh SB3 model on ``nodes`` environments (its random initialisation does not
        touch the job's generators; :meth:`train` loads the job's parameters into it)."""
        import torch
        from stable_baselines3 import A2C, PPO
        from stable_baselines3.common.env_util import make_vec_env

        env = make_vec_env(self.env_id, n_envs=nodes, seed=int(self.rng.integers(2**31)))
        lr = scaled_lr(self.lr, self.lr_scaling, nodes)
        kwargs: dict[str, Any] = {"learning_rate": lr, "n_steps": self.n_steps,
                                  "device": "cpu", "verbose": 0}
        with torch.random.fork_rng():
            if self.algo == "ppo":
                return PPO("MlpPolicy", env, batch_size=self.batch * nodes, **kwargs)
            return A2C("MlpPolicy", env, **kwargs)

    def setup(self, seed: int) -> None:
        import torch

        self.rng = np.random.default_rng(seed)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = self._model(1)
            model.get_env().close()
            self.params = model.get_parameters()
            self.torch_state = torch.get_rng_state()
        self.np_state = np.random.RandomState(seed).get_state()
        self.samples = 0
        self.last_loss = 1.0

    def loss(self) -> float:
        """The last observed loss (1.0 before any training)."""
        return self.last_loss

    def train(self, units: int, nodes: int) -> float:
        import torch

        saved = (torch.get_rng_state(), np.random.get_state(), torch.get_num_threads())
        torch.set_rng_state(self.torch_state)
        np.random.set_state(self.np_state)
        torch.set_num_threads(1)
        try:
            model = self._model(nodes)
            model.set_parameters(self.params, exact_match=True)
            model.learn(total_timesteps=units * self.unit_steps * nodes)
            returns = [e["r"] for e in model.ep_info_buffer]
            self.params = model.get_parameters()
            self.samples += int(model.num_timesteps)
            model.get_env().close()
            self.torch_state, self.np_state = torch.get_rng_state(), np.random.get_state()
        finally:
            torch.set_rng_state(saved[0])
            np.random.set_state(saved[1])
            torch.set_num_threads(saved[2])
        if returns:
            self.last_loss = float(normalised_loss(np.mean(returns), self.env_id))
        return self.last_loss

    def save(self) -> bytes:
        import torch

        kind, keys, pos, has_gauss, cached = self.np_state
        gen = self.rng.bit_generator.state
        buf = io.BytesIO()
        torch.save({"params": self.params, "torch_state": self.torch_state,
                    "np_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
                    "np_rest": [int(pos), int(has_gauss), float(cached)],
                    "rng": [str(gen["state"]["state"]), str(gen["state"]["inc"]),
                            int(gen["has_uint32"]), int(gen["uinteger"])],
                    "samples": self.samples, "last_loss": self.last_loss}, buf)
        return buf.getvalue()

    def load(self, blob: bytes) -> None:
        import torch

        state = torch.load(io.BytesIO(blob), weights_only=True)
        self.params, self.torch_state = state["params"], state["torch_state"]
        pos, has_gauss, cached = state["np_rest"]
        self.np_state = ("MT19937", state["np_keys"].numpy().astype(np.uint32), pos,
                         has_gauss, cached)
        s, inc, has_uint32, uinteger = state["rng"]
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = {
            "bit_generator": "PCG64", "state": {"state": int(s), "inc": int(inc)},
            "has_uint32": has_uint32, "uinteger": uinteger}
        self.samples, self.last_loss = int(state["samples"]), float(state["last_loss"])
