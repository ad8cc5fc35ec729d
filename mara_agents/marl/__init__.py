"""Standard MARL algorithms trained on the benchmark, and their trained models as policies.

==============  ===========================================  =======================
name            what                                         library (extra)
==============  ===========================================  =======================
maskable_ppo    MaskablePPO on the centralised view          sb3-contrib (``sb3``)
mappo           shared actor, centralised critic (state)     TorchRL (``torchrl``)
ippo            shared actor, per-node critic                TorchRL (``torchrl``)
rllib_ppo       RLlib PPO, one policy shared by the nodes    RLlib (own venv)
==============  ===========================================  =======================

:func:`train` trains one and writes a checked model file
(:mod:`mara_agents.marl.common`); :func:`make_marl_policy` runs a model file as a
:class:`~mara_agents.policy.Policy`. In every suite the policy names ``maskable_ppo``,
``mappo``, ... (or ``mappo@<folder>``) run the models ``mara-bench marl`` trained
(:func:`model_path` says which file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core_env.utils.checks import check_int

ALGORITHMS = ("maskable_ppo", "mappo", "ippo", "rllib_ppo")
"""The MARL algorithms, in the order of the tables."""

MODELS_DIR = Path("results/marl/models")
"""Where ``mara-bench marl`` writes its models by default (relative to the current folder)."""

PORTABLE_TORCH = {"ATEN_CPU_CAPABILITY": "default", "OPENBLAS_CORETYPE": "Prescott"}
"""Environment variables that make torch's CPU arithmetic the same on every x86-64 machine:
ATen's kernels and OpenBLAS's at their baseline (SSE2/SSE3, no FMA) instead of the CPU's
widest SIMD level, which rounds differently. They act only when set before torch loads, so
``python -m mara_agents.marl train`` starts itself again with them unless ``--native``.
Measured (docs/integrations.md): a run trains the same weights with numpy and glibc
restricted to an older CPU's kernels, about 7% slower; without them, one command and seed
gave 53.3%, 55.0% and 56.7% at three SIMD levels of one machine."""

SHIPPED_MODELS = Path(__file__).resolve().parent.parent / "weights" / "marl"
"""The trained models that ship with the package (``<preset>/<algorithm>.pt``, each written
by ``python -m mara_agents.marl train``, its training seed in the file, and integrity-checked
when it loads): the plain MARL names run them where :data:`MODELS_DIR` has no model of that
preset (:func:`shipped_model`)."""


def shipped_model(preset: str, algorithm: str) -> Path:
    """The shipped model of ``algorithm`` on ``preset`` (the file may not exist)."""
    return SHIPPED_MODELS / preset / f"{algorithm}.pt"

TRAINING_PRESET = "CoRE-v0"
"""The preset whose model runs on a preset that has none of its own."""


def model_file(models: str | Path, preset: str, algorithm: str, seed: int = 0) -> Path:
    """``<models>/<preset>/<algorithm>-seed<seed>.pt``."""
    return Path(models) / preset / f"{algorithm}-seed{seed}.pt"


def model_path(models: str | Path, preset: str | None, algorithm: str) -> Path:
    """The model of ``algorithm`` trained on ``preset`` (seed 0) if there is one, else the
    one trained on :data:`TRAINING_PRESET`.

    Raises:
        ValueError: neither exists (naming the files and the command that trains them).
    """
    tried = [model_file(models, p, algorithm) for p in dict.fromkeys(
        [x for x in (preset, TRAINING_PRESET) if x is not None])]
    for path in tried:
        if path.is_file():
            return path
    raise ValueError(f"{algorithm}: no trained model ({', '.join(map(str, tried))}); "
                     f"`mara-bench marl --out {Path(models).parent}` trains it")


def train(algorithm: str, preset: str, env_steps: int, seed: int, out: str | Path,
          threads: int = 1) -> Path:
    """Train ``algorithm`` on ``preset`` for ``env_steps`` slots with its default settings
    and write the model file ``out``.

    Raises:
        ValueError: an unknown algorithm or preset, or a budget below one update.
    """
    import core_env

    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: expected one of {ALGORITHMS}, got {algorithm!r}")
    if preset not in core_env.PRESETS:
        raise ValueError(f"preset: expected one of {sorted(core_env.PRESETS)}, got {preset!r}")
    check_int("env_steps", env_steps, 1, exact=True)
    if algorithm == "maskable_ppo":
        from mara_agents.marl import sb3
        return sb3.train(preset, env_steps, seed, out, threads=threads)
    if algorithm == "rllib_ppo":
        from mara_agents.marl import rllib
        return rllib.train(preset, env_steps, seed, out, threads=threads)
    from mara_agents.marl import torchrl_ppo
    return torchrl_ppo.train(algorithm, preset, env_steps, seed, out, threads=threads)


def make_marl_policy(env: Any, algorithm: str, path: str | Path, **kwargs: Any) -> Any:
    """The model file ``path`` of ``algorithm`` as a policy on ``env`` (``deterministic=``
    overrides the default: greedy for MaskablePPO, sampled for the shared actors)."""
    if algorithm == "maskable_ppo":
        from mara_agents.marl.sb3 import MaskablePPOPolicy
        return MaskablePPOPolicy(env, path, **kwargs)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: expected one of {ALGORITHMS}, got {algorithm!r}")
    from mara_agents.marl.common import SharedActorPolicy
    return SharedActorPolicy(env, path, algorithm, **kwargs)
