"""The Stable-Baselines3 job kind ``sb3-classic`` (:class:`SB3ClassicJob`): PPO or A2C on a
Gymnasium classic-control task, with the loss of the ``sb3-rl`` curve bank. Install the
``jobs-sb3`` extra (``pip install -e ".[jobs-sb3]"``); :mod:`core_env.live.jobs` imports this
module only when the kind is asked for, so ``core_env`` itself needs neither SB3 nor torch.

**Loss** (:func:`~core_env.live.classic_control.normalised_loss`, the bank's): the normalised
return gap of ``R``, the mean undiscounted return of the training episodes that finished in
the slot (up to the last 100). A slot in which no episode finished observes the previous loss
again (1.0 before the first).

**Work and nodes.** A work unit is ``unit_steps`` environment steps per node. With k nodes
the job collects from k environments at once (``n_steps`` each per rollout) and PPO's
minibatches are k times larger, so k nodes see k times the steps in the same number of
gradient steps: synchronous data parallelism, as for the supervised kinds.

**State.** ``save`` holds the policy's and optimiser's tensors, the job's generators and its
counters. The environments are not part of it: every slot starts new episodes, from
environment seeds drawn from the job's generator (an episode in flight at a slot's end is
cut). Training runs on one torch thread, and the torch and numpy global generators SB3 draws
from are the job's own during ``train`` (the process's are put back afterwards), so a job's
losses depend on its seed alone, wherever and next to whatever it runs::

    job = make_job(JobSpec("sb3-classic", {"algo": "a2c", "env_id": "Acrobot-v1"}, seed=0))
"""

from __future__ import annotations

import io
from typing import Any, cast

import numpy as np

from core_env.live.classic_control import ALGOS, LOSS_FLOOR, RETURN_RANGE, normalised_loss  # noqa: F401 (re-exported)
from core_env.live.jobs import generator_from_state, generator_state
from core_env.live.scaling import check_lr_scaling, scaled_lr
from core_env.utils.checks import check_int, check_number, fail

try:
    import torch
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.logger import Logger
except ImportError as e:  # pragma: no cover - the jobs-sb3 extra installs them
    raise ImportError(f"the sb3-classic job kind needs Stable-Baselines3 and torch: pip "
                      f"install -e '.[jobs-sb3]' ({e})") from e

SB3_CLASSES: dict[str, type[BaseAlgorithm]] = {"ppo": PPO, "a2c": A2C}

_MTState = tuple[str, np.ndarray, int, int, float]
"""numpy's legacy (MT19937) global generator state, as ``np.random.get_state()`` returns it
(numpy's stub types the call as a dict: its no-argument overload is the legacy=False one)."""
"""SB3's class of each name of :data:`~core_env.live.classic_control.ALGOS`."""


def sb3_model(algo: str, env: Any, **hyper: Any) -> BaseAlgorithm:
    """SB3's ``algo`` (a name of :data:`~core_env.live.classic_control.ALGOS`) with an MLP
    policy on the vectorised environment ``env``; ``hyper`` are the class's keyword
    arguments (the job's and the ``sb3-rl`` bank's models are both built here)."""
    if algo not in SB3_CLASSES:
        fail("algo", algo, f"one of {ALGOS}")
    model = SB3_CLASSES[algo]("MlpPolicy", env, **hyper)
    # a logger with no output: SB3's default makes a new SB3-<time> folder in the temporary
    # directory at every learn() call, one per slot in live mode
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def _env_of(model: BaseAlgorithm) -> Any:
    """The vectorised environment of a model built by :func:`sb3_model` (never None there)."""
    env = model.get_env()
    assert env is not None
    return env


class SB3ClassicJob:
    """SB3 ``algo`` on ``env_id`` (see the module docstring).

    Args:
        algo: ``"ppo"`` or ``"a2c"``. env_id: a key of
            :data:`~core_env.live.classic_control.RETURN_RANGE`.
        lr: learning rate (of one node's batch). n_steps: steps per environment per rollout.
        batch: PPO's per-node minibatch size. unit_steps: environment steps per node per
            work unit (a multiple of ``n_steps``).
        lr_scaling: the learning rate with k nodes: ``"none"``, ``"sqrt"`` or ``"linear"``.
    """

    def __init__(self, algo: str = "ppo", env_id: str = "CartPole-v1", lr: float = 3e-4,
                 n_steps: int = 128, batch: int = 64, unit_steps: int = 512,
                 lr_scaling: str = "none") -> None:
        if algo not in ALGOS:
            fail("algo", algo, f"one of {ALGOS}")
        if env_id not in RETURN_RANGE:
            fail("env_id", env_id, f"one of {sorted(RETURN_RANGE)}")
        self.n_steps = check_int("n_steps", n_steps, minimum=1)
        self.batch = check_int("batch", batch, minimum=1)
        self.unit_steps = check_int("unit_steps", unit_steps, minimum=1)
        if unit_steps % n_steps:
            fail("unit_steps", unit_steps, f"a multiple of n_steps={n_steps}")
        self.lr_scaling = check_lr_scaling(lr_scaling)
        self.lr = float(check_number("lr", lr, 0.0, lo_open=True))
        self.algo, self.env_id = algo, env_id

    def _model(self, nodes: int) -> BaseAlgorithm:
        """A fresh SB3 model on ``nodes`` environments (its random initialisation does not
        touch the job's generators; :meth:`train` loads the job's parameters into it)."""
        env = make_vec_env(self.env_id, n_envs=nodes, seed=int(self.rng.integers(2**31)))
        hyper: dict[str, Any] = {"learning_rate": scaled_lr(self.lr, self.lr_scaling, nodes),
                                 "n_steps": self.n_steps, "device": "cpu", "verbose": 0}
        if self.algo == "ppo":
            hyper["batch_size"] = self.batch * nodes
        with torch.random.fork_rng():
            return sb3_model(self.algo, env, **hyper)

    def setup(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = self._model(1)
            _env_of(model).close()
            self.params = model.get_parameters()
            self.torch_state = torch.get_rng_state()
        self.np_state = cast(_MTState, np.random.RandomState(seed).get_state())
        self.samples = 0
        self.last_loss = 1.0

    def loss(self) -> float:
        """The last observed loss (1.0 before any training)."""
        return self.last_loss

    def train(self, units: int, nodes: int) -> float:
        saved = (torch.get_rng_state(), np.random.get_state(), torch.get_num_threads())
        torch.set_rng_state(self.torch_state)
        np.random.set_state(self.np_state)
        torch.set_num_threads(1)
        try:
            model = self._model(nodes)
            # SB3 types get_parameters() as dict[str, dict] and set_parameters' argument as
            # dict[str, Tensor]; it takes what get_parameters() returns
            model.set_parameters(self.params, exact_match=True)  # type: ignore[arg-type]
            model.learn(total_timesteps=units * self.unit_steps * nodes)
            assert model.ep_info_buffer is not None  # learn() creates it
            returns = [e["r"] for e in model.ep_info_buffer]
            self.params = model.get_parameters()
            self.samples += int(model.num_timesteps)
            _env_of(model).close()
            self.torch_state = torch.get_rng_state()
            self.np_state = cast(_MTState, np.random.get_state())
        finally:
            torch.set_rng_state(saved[0])
            np.random.set_state(saved[1])
            torch.set_num_threads(saved[2])
        if returns:
            self.last_loss = float(normalised_loss(np.mean(returns), self.env_id))
        return self.last_loss

    def save(self) -> bytes:
        kind, keys, pos, has_gauss, cached = self.np_state
        buf = io.BytesIO()
        torch.save({"params": self.params, "torch_state": self.torch_state,
                    "np_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
                    "np_rest": [int(pos), int(has_gauss), float(cached)],
                    "rng": generator_state(self.rng),
                    "samples": self.samples, "last_loss": self.last_loss}, buf)
        return buf.getvalue()

    def load(self, blob: bytes) -> None:
        state = torch.load(io.BytesIO(blob), weights_only=True)
        self.params, self.torch_state = state["params"], state["torch_state"]
        pos, has_gauss, cached = state["np_rest"]
        self.np_state = ("MT19937", state["np_keys"].numpy().astype(np.uint32), pos,
                         has_gauss, cached)
        self.rng = generator_from_state(state["rng"])
        self.samples, self.last_loss = int(state["samples"]), float(state["last_loss"])
