"""The ``sb3-rl`` curve bank's runs: Stable-Baselines3 PPO and A2C on Gymnasium classic control.

Every :class:`RunSpec` of :data:`SPECS` is one real training run; :func:`train_curve` trains it
on the CPU (one torch thread, seeded: the same curve on the same machine) and returns its
learning curve: work = environment timesteps, loss =
:func:`core_env.live.classic_control.normalised_loss` of the mean return of the training
episodes finished in each ``eval_every`` window. :data:`HELD_OUT_GROUPS` is the held-out split
(groups are environment ids). How the runs and constants were chosen: ``docs/workloads.md``::

    python -m tools.data.rl_curves --out /tmp/banks_raw/sb3-rl.npz [--limit N]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core_env.live.classic_control import ALGOS, LOSS_FLOOR, RETURN_RANGE, normalised_loss  # noqa: F401 (the bank's loss)
from core_env.utils.checks import fail
from tools.data.raw import generator_main, train_all

HELD_OUT_GROUPS: frozenset[str] = frozenset({"Acrobot-v1"})
"""Groups (environment ids) of the held-out split."""


@dataclass(frozen=True)
class RunSpec:
    """One training run of the bank.

    ``algo`` is ``"ppo"`` or ``"a2c"``; ``batch_size`` and ``n_epochs`` are PPO-only (None for
    A2C), ``use_rms_prop`` and ``normalize_advantage`` are passed to A2C only (PPO always
    normalises advantages). ``net_arch`` is the hidden layers of both the policy and the
    value network; ``log_std_init`` (Gaussian policies only) and ``ortho_init`` go to the
    policy. ``normalize_obs`` / ``normalize_reward`` wrap the vectorised environment in
    ``VecNormalize`` (the recorded returns stay raw: ``Monitor`` sits inside it).
    The curve has a point every ``eval_every`` timesteps up to ``total_timesteps``.
    """

    env_id: str
    algo: str
    seed: int
    total_timesteps: int
    eval_every: int
    n_envs: int
    learning_rate: float
    n_steps: int
    gamma: float
    gae_lambda: float
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    batch_size: int | None = None
    n_epochs: int | None = None
    net_arch: tuple[int, ...] = (64, 64)
    use_sde: bool = False
    sde_sample_freq: int = -1
    log_std_init: float = 0.0
    ortho_init: bool = True
    use_rms_prop: bool = True
    normalize_advantage: bool = False
    normalize_obs: bool = False
    normalize_reward: bool = False

    def __post_init__(self) -> None:
        if self.env_id not in RETURN_RANGE:
            fail("env_id", self.env_id, f"one of {sorted(RETURN_RANGE)}")
        if self.algo not in ALGOS:
            fail("algo", self.algo, f"one of {ALGOS}")
        if (self.algo == "ppo") != (self.batch_size is not None and self.n_epochs is not None):
            raise ValueError("batch_size and n_epochs: required for PPO, None for A2C")
        if not 0 < self.eval_every <= self.total_timesteps:
            raise ValueError(f"eval_every: expected in (0, total_timesteps], got {self.eval_every}")

    @property
    def label(self) -> str:
        """Unique, readable name: environment, algorithm, hyper-parameters and seed."""
        parts = [self.env_id, self.algo.upper(), f"lr={self.learning_rate:g}",
                 f"n_envs={self.n_envs}", f"n_steps={self.n_steps}"]
        if self.algo == "ppo":
            parts += [f"batch={self.batch_size}", f"epochs={self.n_epochs}"]
        parts += [f"gamma={self.gamma:g}", f"lambda={self.gae_lambda:g}",
                  f"ent={self.ent_coef:g}", f"vf={self.vf_coef:g}",
                  "net=" + "x".join(map(str, self.net_arch))]
        if self.use_sde:
            parts.append(f"sde={self.sde_sample_freq}")
        if self.log_std_init != 0.0:
            parts.append(f"log_std={self.log_std_init:g}")
        if not self.ortho_init:
            parts.append("no_ortho")
        if self.algo == "a2c":
            parts.append("rmsprop" if self.use_rms_prop else "adam")
            if self.normalize_advantage:
                parts.append("norm_adv")
        if self.normalize_obs:
            parts.append("norm_obs")
        if self.normalize_reward:
            parts.append("norm_reward")
        parts.append(f"seed={self.seed}")
        return " ".join(parts)


def train_curve(spec: RunSpec) -> dict[str, Any]:
    """Train ``spec`` and return its curve.

    Returns ``{"group": env_id, "label": spec.label, "work": float64[n] (timesteps, strictly
    increasing, > 0), "loss": float64[n] (finite, >= LOSS_FLOOR)}``. Sets
    ``torch.set_num_threads(1)`` for the process (needed for bit-identical reruns).
    """
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import VecNormalize

    from core_env.live.sb3_jobs import sb3_model

    class _CurveRecorder(BaseCallback):
        """Mean return of the episodes finished in each ``eval_every`` window; stops the run
        at the last point (so no update after it is paid for)."""

        def __init__(self) -> None:
            super().__init__()
            self.next_point = spec.eval_every
            self.window: list[float] = []
            self.work: list[float] = []
            self.returns: list[float] = []

        def _on_step(self) -> bool:
            self.window += [info["episode"]["r"] for info in self.locals["infos"]
                            if "episode" in info]
            if self.num_timesteps < self.next_point:
                return True
            if self.window:
                self.work.append(float(self.num_timesteps))
                self.returns.append(float(np.mean(self.window)))
            self.window = []
            while self.next_point <= self.num_timesteps:
                self.next_point += spec.eval_every
            return self.next_point <= spec.total_timesteps

    torch.set_num_threads(1)
    set_random_seed(spec.seed)
    env = make_vec_env(spec.env_id, n_envs=spec.n_envs, seed=spec.seed)
    if spec.normalize_obs or spec.normalize_reward:
        env = VecNormalize(env, norm_obs=spec.normalize_obs, norm_reward=spec.normalize_reward,
                           gamma=spec.gamma)
    policy_kwargs = {"net_arch": list(spec.net_arch), "ortho_init": spec.ortho_init,
                     "log_std_init": spec.log_std_init}
    common: dict[str, Any] = dict(
        learning_rate=spec.learning_rate, n_steps=spec.n_steps, gamma=spec.gamma,
        gae_lambda=spec.gae_lambda, ent_coef=spec.ent_coef, vf_coef=spec.vf_coef,
        use_sde=spec.use_sde, sde_sample_freq=spec.sde_sample_freq,
        policy_kwargs=policy_kwargs, seed=spec.seed, device="cpu", verbose=0)
    if spec.algo == "ppo":
        model = sb3_model("ppo", env, batch_size=spec.batch_size, n_epochs=spec.n_epochs,
                          **common)
    else:
        model = sb3_model("a2c", env, use_rms_prop=spec.use_rms_prop,
                          normalize_advantage=spec.normalize_advantage, **common)
    recorder = _CurveRecorder()
    model.learn(total_timesteps=spec.total_timesteps, callback=recorder)
    env.close()
    work = np.asarray(recorder.work, dtype=np.float64)
    return {"group": spec.env_id, "label": spec.label, "work": work,
            "loss": normalised_loss(np.asarray(recorder.returns), spec.env_id)}


def _family(base: RunSpec, variants: Iterable[dict[str, Any]],
            base_seeds: Sequence[int] = (0, 1)) -> tuple[RunSpec, ...]:
    """``base`` with each of ``base_seeds``, then each one-factor variant of it with seed 0."""
    runs = [dataclasses.replace(base, seed=s) for s in base_seeds]
    runs += [dataclasses.replace(base, seed=0, **v) for v in variants]
    return tuple(runs)


# Base configurations follow rl-baselines3-zoo (hyperparams/ppo.yml, a2c.yml), with constant
# learning rates instead of linear schedules and shorter runs.
_ZOO_A2C: dict[str, Any] = dict(algo="a2c", seed=0, learning_rate=7e-4, n_steps=5, gamma=0.99,
                                gae_lambda=1.0)
"""The zoo's A2C defaults (CartPole and Acrobot use them as they are)."""
_CARTPOLE_PPO = RunSpec(
    env_id="CartPole-v1", algo="ppo", seed=0, total_timesteps=40_000, eval_every=2_000,
    n_envs=8, learning_rate=1e-3, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98,
    gae_lambda=0.8)
_CARTPOLE_A2C = RunSpec(env_id="CartPole-v1", total_timesteps=80_000, eval_every=3_200,
                        n_envs=8, **_ZOO_A2C)
_ACROBOT_PPO = RunSpec(
    env_id="Acrobot-v1", algo="ppo", seed=0, total_timesteps=81_920, eval_every=4_096,
    n_envs=8, learning_rate=3e-4, n_steps=256, batch_size=64, n_epochs=4, gamma=0.99,
    gae_lambda=0.94, normalize_obs=True)
_ACROBOT_A2C = RunSpec(env_id="Acrobot-v1", total_timesteps=96_000, eval_every=3_200,
                       n_envs=16, **_ZOO_A2C)
_PENDULUM_PPO = RunSpec(
    env_id="Pendulum-v1", algo="ppo", seed=0, total_timesteps=49_152, eval_every=2_048,
    n_envs=4, learning_rate=1e-3, n_steps=1024, batch_size=64, n_epochs=10, gamma=0.9,
    gae_lambda=0.95, use_sde=True, sde_sample_freq=4)
_PENDULUM_A2C = RunSpec(
    env_id="Pendulum-v1", algo="a2c", seed=0, total_timesteps=150_000, eval_every=5_000,
    n_envs=8, learning_rate=7e-4, n_steps=8, gamma=0.9, gae_lambda=0.9, vf_coef=0.4,
    use_sde=True, log_std_init=-2.0, ortho_init=False, normalize_obs=True,
    normalize_reward=True)

SPECS: tuple[RunSpec, ...] = (
    *_family(_CARTPOLE_PPO, [dict(learning_rate=3e-3), dict(learning_rate=1e-4),
                             dict(n_epochs=4), dict(ent_coef=0.01), dict(net_arch=(16,)),
                             dict(gamma=0.999)]),
    *_family(_CARTPOLE_A2C, [dict(learning_rate=2e-3), dict(learning_rate=2e-4),
                             dict(n_steps=20), dict(ent_coef=0.01), dict(gamma=0.9),
                             dict(net_arch=(32, 32))]),
    *_family(_ACROBOT_PPO, [dict(learning_rate=1e-3), dict(learning_rate=1e-4),
                            dict(n_epochs=10), dict(ent_coef=0.01), dict(gamma=0.95),
                            dict(normalize_obs=False)]),
    *_family(_ACROBOT_A2C, [dict(learning_rate=2e-3), dict(learning_rate=2e-4),
                            dict(n_steps=16), dict(ent_coef=0.01), dict(gamma=0.95),
                            dict(use_rms_prop=False)]),
    *_family(_PENDULUM_PPO, [dict(learning_rate=3e-4), dict(learning_rate=3e-3),
                             dict(use_sde=False, sde_sample_freq=-1), dict(n_epochs=4),
                             dict(gamma=0.99), dict(net_arch=(32, 32))]),
    *_family(_PENDULUM_A2C, [dict(learning_rate=2e-3), dict(learning_rate=2e-4),
                             dict(n_steps=32), dict(use_sde=False), dict(gamma=0.99),
                             dict(normalize_obs=False, normalize_reward=False)]),
)
"""Every run of the bank, in bank order (see the module doc)."""


def generate(specs: Sequence[RunSpec] = SPECS, progress: bool = True) -> list[dict[str, Any]]:
    """Train every spec in order and return the curves (:func:`train_curve`; progress lines
    on stderr)."""
    return train_all(specs, train_curve, progress)


if __name__ == "__main__":  # --out FILE.npz [--limit N] [--quiet]
    generator_main(__doc__.splitlines()[0], SPECS, generate)
