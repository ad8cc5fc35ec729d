"""Real reinforcement-learning learning curves: Stable-Baselines3 PPO and A2C on Gymnasium
classic control, for the scheduler simulator's curve bank.

Every :class:`RunSpec` of :data:`SPECS` is one real training run (environment, algorithm,
hyper-parameters, seed, length, evaluation cadence); :func:`train_curve` trains it on the CPU
and returns its learning curve, loss against work:

* **work**: environment timesteps consumed so far (all parallel environments together),
  recorded every ``eval_every`` timesteps (the first step at or past each multiple, so with
  ``eval_every`` a multiple of ``n_envs`` the points sit exactly on the multiples);
* **return** ``R``: the mean undiscounted return of the *training* episodes (stochastic
  policy, raw rewards from the ``Monitor`` wrapper, before any normalisation) that finished
  since the previous point. Windows do not overlap and nothing is smoothed, so the noise of
  the curve is the real episode-to-episode noise. A point whose window saw no finished
  episode is left out (in this bank every window has some). Like SB3's ``ep_rew_mean``, it
  counts finished episodes only, so where episodes are long compared with the window (the
  first Acrobot points) the short, successful ones are over-represented;
* **loss**: the normalised return gap

      loss = max((R_best - R) / (R_best - R_worst), LOSS_FLOOR),   LOSS_FLOOR = 0.01

  with fixed per-environment constants :data:`RETURN_RANGE` (``R_worst``, ``R_best``):
  CartPole-v1 (0, 500): the return is the episode length, capped at 500;
  Acrobot-v1 (-500, -60): -500 is an episode that never swings up (the 500-step time
  limit), -60 is slightly better than a well-trained agent (about -75);
  Pendulum-v1 (-1600, -150): -150 is a well-trained swing-up, -1600 is somewhat worse than
  the random policy (about -1200). So loss 1 is "as bad as a failing policy", 0 is
  "solved"; the floor keeps ``log(loss)`` finite where a run reaches or passes ``R_best``
  (CartPole at 500). There is no ceiling: a Pendulum run below -1600 has loss > 1.

The bank spans 3 environments x 2 algorithms, 8 runs each (48 runs, 20 to 30 points each,
about 14 minutes on one shared core): per (environment, algorithm) an RL-Zoo-like base
configuration with seeds 0 and 1, and six one-factor variants (learning rate up and down,
entropy bonus, discount, network size, rollout length, epochs, optimiser, gSDE,
normalisation) with seed 0, so curves differ in shape: fast, slow, plateauing, noisy,
collapsing after a peak. A2C barely learns Pendulum in 150k steps (the zoo trains it for
1M): those curves are mostly flat and noisy. Learning rates and clip ranges are constants (no
schedule depends on ``total_timesteps``), so the curve of a spec shortened with
``dataclasses.replace(spec, total_timesteps=k * spec.eval_every)`` is exactly the full
curve's points with ``work <= k * eval_every``: the property the regeneration test relies on.

Held-out split (:data:`HELD_OUT_GROUPS`): the group of a curve is its environment id, and
Acrobot-v1 is held out. It is of middle difficulty, so the held-out curves are neither
mostly flat (Pendulum A2C) nor mostly at the floor (CartPole), and its shapes are its own:
PPO sits at the -500 time limit for a few points and then drops sharply, A2C drops within
the first points and then keeps a long noisy tail. Training on CartPole (fast, noisy, often
collapsing) and Pendulum (slow, smooth or flat) keeps both action types (discrete and
continuous) and every behaviour of the bank in the training split.

Runs are deterministic: ``torch.set_num_threads(1)`` (set process-wide by
:func:`train_curve`), ``device="cpu"``, ``set_random_seed(seed)``, environments seeded with
``seed + rank``. Re-running a spec on the same machine and library versions gives
bit-identical curves; other CPUs or builds may differ in the last bits and so, after many
updates, in the trajectory.

    python -m benchmarks.data.rl_curves --out /tmp/banks_raw/sb3-rl.npz [--limit N]
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core_env.live.sb3_job import (LOSS_FLOOR, RETURN_RANGE,  # noqa: F401 (the bank's loss)
                                   normalised_loss)

HELD_OUT_GROUPS: frozenset[str] = frozenset({"Acrobot-v1"})
"""Groups (environment ids) of the held-out split."""


@dataclass(frozen=True)
class RunSpec:
    """One training run of the bank.

    ``algo`` is ``"PPO"`` or ``"A2C"``; ``batch_size`` and ``n_epochs`` are PPO-only (None for
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
            raise ValueError(f"env_id: expected one of {sorted(RETURN_RANGE)}, got {self.env_id!r}")
        if self.algo not in ("PPO", "A2C"):
            raise ValueError(f"algo: expected 'PPO' or 'A2C', got {self.algo!r}")
        if (self.algo == "PPO") != (self.batch_size is not None and self.n_epochs is not None):
            raise ValueError("batch_size and n_epochs: required for PPO, None for A2C")
        if not 0 < self.eval_every <= self.total_timesteps:
            raise ValueError(f"eval_every: expected in (0, total_timesteps], got {self.eval_every}")

    @property
    def label(self) -> str:
        """Unique, readable name: environment, algorithm, hyper-parameters and seed."""
        parts = [self.env_id, self.algo, f"lr={self.learning_rate:g}", f"n_envs={self.n_envs}",
                 f"n_steps={self.n_steps}"]
        if self.algo == "PPO":
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
        if self.algo == "A2C":
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
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import set_random_seed
    from stable_baselines3.common.vec_env import VecNormalize

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
    if spec.algo == "PPO":
        model = PPO("MlpPolicy", env, batch_size=spec.batch_size, n_epochs=spec.n_epochs,
                    **common)
    else:
        model = A2C("MlpPolicy", env, use_rms_prop=spec.use_rms_prop,
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
_CARTPOLE_PPO = RunSpec(
    env_id="CartPole-v1", algo="PPO", seed=0, total_timesteps=40_000, eval_every=2_000,
    n_envs=8, learning_rate=1e-3, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98,
    gae_lambda=0.8)
_CARTPOLE_A2C = RunSpec(
    env_id="CartPole-v1", algo="A2C", seed=0, total_timesteps=80_000, eval_every=3_200,
    n_envs=8, learning_rate=7e-4, n_steps=5, gamma=0.99, gae_lambda=1.0)
_ACROBOT_PPO = RunSpec(
    env_id="Acrobot-v1", algo="PPO", seed=0, total_timesteps=81_920, eval_every=4_096,
    n_envs=8, learning_rate=3e-4, n_steps=256, batch_size=64, n_epochs=4, gamma=0.99,
    gae_lambda=0.94, normalize_obs=True)
_ACROBOT_A2C = RunSpec(
    env_id="Acrobot-v1", algo="A2C", seed=0, total_timesteps=96_000, eval_every=3_200,
    n_envs=16, learning_rate=7e-4, n_steps=5, gamma=0.99, gae_lambda=1.0)
_PENDULUM_PPO = RunSpec(
    env_id="Pendulum-v1", algo="PPO", seed=0, total_timesteps=49_152, eval_every=2_048,
    n_envs=4, learning_rate=1e-3, n_steps=1024, batch_size=64, n_epochs=10, gamma=0.9,
    gae_lambda=0.95, use_sde=True, sde_sample_freq=4)
_PENDULUM_A2C = RunSpec(
    env_id="Pendulum-v1", algo="A2C", seed=0, total_timesteps=150_000, eval_every=5_000,
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
    """Train every spec in order and return the curves (see :func:`train_curve`); with
    ``progress``, print one line per run (index, seconds, points, final loss) to stderr."""
    curves = []
    for i, spec in enumerate(specs):
        start = time.perf_counter()
        curve = train_curve(spec)
        curves.append(curve)
        if progress:
            print(f"[{i + 1}/{len(specs)}] {time.perf_counter() - start:6.1f}s "
                  f"n={len(curve['work'])} final_loss={curve['loss'][-1]:.3f} {spec.label}",
                  file=sys.stderr, flush=True)
    return curves


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: generate the bank (or its first ``--limit`` runs) and write it as
    ``--out FILE.npz`` (``benchmarks.data.raw.generator_main``)."""
    from benchmarks.data.raw import generator_main

    generator_main(__doc__.splitlines()[0], SPECS, generate, argv)


if __name__ == "__main__":
    main()
