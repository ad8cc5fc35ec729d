"""The ``Policy`` protocol shared by every scheduler (SPEC §5), an episode runner, and the one
registry of policy names.

A policy takes the PettingZoo observation dict (one entry per node) and returns the action
dict, exactly what ``env.step`` takes::

    import core_env
    from mara_agents.policy import make_policy, run_episode

    env, policy = make_policy("lara", core_env.parallel_env(preset="CoRE-Small-v0"))
    stats = run_episode(env, policy, seed=0)      # the final info["episode"]
    print(stats["completion_rate"])

Policies that read forecast columns need the environment wrapped in
:class:`core_env.forecast.LossForecastWrapper`; :func:`make_policy` does that and returns
the environment to use.

**Your own scheduler** is a policy spec ``"package.module:Factory"``: ``Factory`` is a class
or function called as ``Factory(env)`` that returns a :class:`Policy`, or ``(env_to_use,
policy)`` when it wraps the environment (as :func:`make_policy` does). It may also have a
``make_env(env)`` attribute returning the environment to build it on. Every benchmark
suite takes such specs next to the built-in names (docs/benchmarks.md)::

    env, policy = make_policy("mypkg.sched:MyPolicy", core_env.parallel_env())
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mara_agents.marl import ALGORITHMS as MARL
from mara_agents.marl import MODELS_DIR

PEERS = ("las", "successive_halving", "optimus", "slaq", "laira")
"""The schedulers a user would pick instead of MARA (docs/baselines.md, "Peer schedulers")."""

BASELINES = ("random", "round_robin", "fifo", "edf", "least_laxity", "shortest_predicted",
             "las", "successive_halving", "optimus", "slaq", "lara", "laira", "oracle_greedy")
"""The baseline schedulers of :mod:`mara_agents.baselines`, in the order of the tables."""

FAIR = ("fair_lara",)
"""The fairness-aware schedulers (SPEC §10; not in the default suites' tables, where no
preset has tenants and they equal LARA: the ``fairness`` suite runs them)."""

MARA = "mara"
"""The shipped MARA (``mara_agents/weights/mara_default.pt``)."""

MARA_FAIR = "mara_fair"
"""MARA-fair (SPEC §10): MARA fine-tuned under the constraint that every tenant's completion
rate stays at least a fraction f of the overall rate. ``mara_fair`` is f = 0.8
(:data:`DEFAULT_FAIR_FRACTION`); ``mara_fair@<f>`` another shipped setting
(:data:`FAIR_FRACTIONS`)."""

FAIR_FRACTIONS = (0.6, 0.8, 0.9)
"""The fractions f with a shipped MARA-fair checkpoint (``mara_fair_<f>.pt``)."""

DEFAULT_FAIR_FRACTION = 0.8

POLICY_NAMES = (*BASELINES, *FAIR, MARA, MARA_FAIR, *MARL)
"""Every built-in policy name :func:`make_policy` accepts. The MARL names
(:data:`mara_agents.marl.ALGORITHMS`) run the models ``mara-bench marl`` trained into
``results/marl/models``; ``<name>@<folder>`` runs those of another models folder."""


@runtime_checkable
class Policy(Protocol):
    """A scheduler: one action per node from every node's observation."""

    def reset(self, seed: int | None = None) -> None:
        """Start an episode; ``seed`` seeds the policy's own generator (if it has one)."""

    def act(self, observations: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
        """Actions ``{agent: int}`` for the observations ``{agent: {"observation",
        "action_mask"}}`` of the live agents."""


def run_episode(env: Any, policy: Policy, seed: int | None = None,
                options: dict | None = None) -> dict[str, Any]:
    """Run one episode of a parallel env (plain or wrapped) with a policy.

    Args:
        env: a PettingZoo parallel environment (e.g. ``core_env.parallel_env(...)`` or a
            ``LossForecastWrapper`` around one).
        policy: any :class:`Policy`; it is reset with the same seed.
        seed: the episode seed (the workload depends on it alone).
        options: passed to ``env.reset`` (e.g. ``{"workload": w}``).

    Returns:
        The final ``info["episode"]`` dict (completion_rate, utilization, illegal_actions,
        capacity_conflicts, ...; see ``docs/env.md``).

    Raises:
        ValueError: ``policy`` does not implement :class:`Policy`.
        RuntimeError: the episode ended without episode statistics.
    """
    if not isinstance(policy, Policy):
        raise ValueError(f"policy: expected an object with reset(seed) and "
                         f"act(observations), got {type(policy).__name__}")
    observations, infos = env.reset(seed=seed, options=options)
    policy.reset(seed)
    while env.agents:
        actions = policy.act(observations)
        observations, _, _, _, infos = env.step(actions)
    for info in infos.values():
        if "episode" in info:
            return dict(info["episode"])
    raise RuntimeError("the episode ended without info['episode'] (was it already over?)")


def resolve_factory(spec: str) -> Any:
    """The callable of a ``"package.module:Factory"`` spec (the current directory is on the
    import path, as with ``python -m``).

    Raises:
        ValueError: the spec is malformed, the module does not import, or it has no
            callable of that name (the message says which).
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"policy {spec!r}: expected a built-in name (one of "
                         f"{', '.join(POLICY_NAMES)}) or 'package.module:Factory'")
    if os.getcwd() not in sys.path and "" not in sys.path:  # as `python -m` would
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"policy {spec!r}: cannot import {module_name!r} ({e}); is it on "
                         f"the Python path?") from e
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise ValueError(f"policy {spec!r}: {module_name} has no {attr!r}")
    if not callable(factory):
        raise ValueError(f"policy {spec!r}: {attr} is not callable")
    return factory


def policy_fingerprint(spec: str) -> str | None:
    """What identifies the trained weights behind a policy spec, or None for code alone.

    ``mara``: the first 16 hex digits of SHA-256 of the shipped checkpoint file. A
    ``module:Factory`` spec: the factory's ``fingerprint`` attribute (a string, or a callable
    returning one), if it has one. The benchmark store keeps this with every episode and
    recomputes stored episodes whose policy has changed since.
    """
    if spec == MARA:
        from mara_agents.mat.checkpoint import shipped

        return file_fingerprint(shipped())
    if spec in BASELINES or spec in FAIR:
        return None
    fair = fair_spec(spec)
    if fair is not None:
        return file_fingerprint(fair_checkpoint(fair))
    marl = marl_spec(spec)
    if marl is not None:
        files = sorted(Path(marl[1]).glob(f"*/{marl[0]}-seed0.pt"))
        return file_fingerprint(*files) if files else None
    mark = getattr(resolve_factory(check_policy_spec(spec)), "fingerprint", None)
    value = mark() if callable(mark) else mark
    if value is not None and not isinstance(value, str):
        raise ValueError(f"policy {spec!r}: fingerprint must be a string, got {value!r}")
    return value


def file_fingerprint(*paths: Any) -> str:
    """The first 16 hex digits of SHA-256 over the bytes of ``paths`` (in order)."""
    digest = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def check_policy_spec(spec: Any) -> str:
    """``spec`` if it names a built-in policy or an importable ``module:Factory``, else a
    ``ValueError`` listing the valid names (nothing is built)."""
    if not isinstance(spec, str):
        raise ValueError(f"policy: expected a name or 'package.module:Factory', got {spec!r}")
    if spec not in POLICY_NAMES and marl_spec(spec) is None and fair_spec(spec) is None:
        resolve_factory(spec)
    return spec


def fair_spec(spec: str) -> float | None:
    """The fraction f of a MARA-fair name (``"mara_fair"``: :data:`DEFAULT_FAIR_FRACTION`;
    ``"mara_fair@0.9"``), else None.

    Raises:
        ValueError: ``mara_fair@<f>`` with an f that is not a number in (0, 1]."""
    name, sep, text = spec.partition("@")
    if name != MARA_FAIR:
        return None
    if not sep:
        return DEFAULT_FAIR_FRACTION
    try:
        return check_fraction(float(text))
    except ValueError:
        raise ValueError(f"policy {spec!r}: fraction: expected a number in (0, 1] after "
                         f"'@', got {text!r}") from None


def check_fraction(fraction: Any) -> float:
    """``fraction`` as a float if it is a number in (0, 1], else ``ValueError``."""
    if (isinstance(fraction, bool) or not isinstance(fraction, (int, float))
            or not 0 < fraction <= 1):
        raise ValueError(f"fraction: expected a number in (0, 1], got {fraction!r}")
    return float(fraction)


def fair_checkpoint(fraction: float) -> Path:
    """The shipped MARA-fair checkpoint of a fraction.

    Raises:
        ValueError: no checkpoint is shipped for it (the message lists those that are and
            how to train one)."""
    from mara_agents.mat.checkpoint import shipped

    fraction = check_fraction(fraction)
    if fraction not in FAIR_FRACTIONS:
        raise ValueError(f"fraction: no MARA-fair checkpoint is shipped for {fraction} "
                         f"(shipped: {', '.join(map(str, FAIR_FRACTIONS))}); train one with "
                         f"`mara-train --preset CoRE-Tenants-v0 --fair-fraction {fraction} "
                         f"--init {shipped()} --lr 3e-4 --ent-coef 0.01 --env-steps 600000 "
                         f"--members 1` and pass checkpoint=<its last.pt>")
    return shipped(f"mara_fair_{fraction}.pt")


def marl_spec(spec: str) -> tuple[str, Path] | None:
    """``(algorithm, models folder)`` of a MARL policy name (``"mappo"``: the default folder
    :data:`mara_agents.marl.MODELS_DIR`; ``"mappo@<folder>"``), else None."""
    name, sep, folder = spec.partition("@")
    if name not in MARL or (sep and not folder):
        return None
    return name, Path(folder) if sep else MODELS_DIR


def make_policy(name: str, env: Any, *, forecaster: Any = None, **kwargs: Any
                ) -> tuple[Any, Policy]:
    """A policy by name or spec, with the environment it must run in.

    Args:
        name: one of :data:`POLICY_NAMES`, or ``"package.module:Factory"`` (see the module
            docstring).
        env: a parallel environment (plain, or already wrapped in a
            ``LossForecastWrapper``).
        forecaster: for the forecast-reading baselines (``least_laxity``,
            ``shortest_predicted``, ``lara``, ``oracle_greedy``), the forecaster to wrap a
            plain ``env`` with. Default: ``WLSForecaster()``, and
            ``OracleForecaster.for_env(env)`` for ``oracle_greedy``. If ``env`` is already
            wrapped, its forecaster is used (pass none); ``oracle_greedy`` then requires an
            ``OracleForecaster``.
        **kwargs: passed to the policy's constructor (e.g. ``explore_obs=4`` for ``lara``;
            for MARA ``checkpoint=`` a file or a list of files (an ensemble),
            ``deterministic=``, and ``fm_steps=`` the ODE steps of the FM forecaster it
            builds, default the checkpoint's; for ``mara_fair`` also ``fraction=`` f, one of
            :data:`FAIR_FRACTIONS`, or ``checkpoint=`` your own).

    Returns:
        ``(env_to_use, policy)``: ``env`` itself, or ``env`` wrapped for forecasts.

    Raises:
        ValueError: unknown name, or a forecaster/wrapper that does not fit the policy.
    """
    if name == MARA:
        return _make_mara(env, forecaster, **kwargs)
    fair = fair_spec(name) if isinstance(name, str) else None
    if fair is not None:
        if "fraction" in kwargs:
            fair = check_fraction(kwargs.pop("fraction"))
        if kwargs.get("checkpoint") is None:
            kwargs["checkpoint"] = str(fair_checkpoint(fair))
        return _make_mara(env, forecaster, **kwargs)
    if name in BASELINES or name in FAIR:
        return _make_baseline(name, env, forecaster, **kwargs)
    marl = marl_spec(name)
    if marl is not None:
        return _make_marl(env, forecaster, *marl, **kwargs)
    factory = resolve_factory(check_policy_spec(name))
    if forecaster is not None:
        raise ValueError(f"forecaster: a user policy ({name}) builds its own environment")
    hook = getattr(factory, "make_env", None)
    if callable(hook):
        env = hook(env)
    made = factory(env, **kwargs)
    if isinstance(made, tuple) and len(made) == 2:
        env, made = made
    if not isinstance(made, Policy):
        raise ValueError(f"policy {name!r}: {type(made).__name__} has no reset(seed) and "
                         f"act(observations)")
    return env, made


def _make_baseline(name: str, env: Any, forecaster: Any, **kwargs: Any) -> tuple[Any, Policy]:
    from core_env.forecast import (
        LossForecastWrapper,
        OracleForecaster,
        WLSForecaster,
        forecast_wrapper,
    )
    from mara_agents import baselines

    cls = baselines.BY_NAME[name]
    if cls.needs_forecast:
        wrapped = forecast_wrapper(env)
        if wrapped is not None:
            if forecaster is not None:
                raise ValueError("forecaster: the env already has a LossForecastWrapper; pass "
                                 "a plain env to choose the forecaster, or no forecaster")
            if name == "oracle_greedy" and not isinstance(wrapped.forecaster, OracleForecaster):
                raise ValueError(f"oracle_greedy needs an OracleForecaster wrapper, got "
                                 f"{type(wrapped.forecaster).__name__}")
        else:
            if forecaster is None:
                forecaster = (OracleForecaster.for_env(env) if name == "oracle_greedy"
                              else WLSForecaster())
            elif name == "oracle_greedy" and not isinstance(forecaster, OracleForecaster):
                raise ValueError(f"forecaster: oracle_greedy needs an OracleForecaster, got "
                                 f"{type(forecaster).__name__}")
            env = LossForecastWrapper(env, forecaster)
    elif forecaster is not None:
        raise ValueError(f"forecaster: {name} reads no forecasts, got "
                         f"{type(forecaster).__name__}")
    return env, cls(env, **kwargs)


def _make_mara(env: Any, forecaster: Any = None, fm_steps: int | None = None,
               **kwargs: Any) -> tuple[Any, Policy]:
    """MARA in the cached forecast wrapper its checkpoint was trained with (see
    :func:`mara_agents.mat.mara_policy.mara_env`)."""
    from core_env.forecast import LossForecastWrapper, forecast_wrapper
    from mara_agents.mat.mara_policy import MARAPolicy, mara_env

    if forecaster is not None:
        if forecast_wrapper(env) is not None or fm_steps is not None:
            raise ValueError("forecaster: pass a plain env and either a forecaster or "
                             "fm_steps, not a wrapped env")
        env = LossForecastWrapper(env, forecaster, cache=True)
    else:
        env = mara_env(env, kwargs.get("checkpoint"), fm_steps)
    return env, MARAPolicy(env, **kwargs)


def _make_marl(env: Any, forecaster: Any, algorithm: str, models: Path, **kwargs: Any
               ) -> tuple[Any, Policy]:
    """A trained MARL model: the one trained on ``env``'s preset, else on CoRE-v0
    (:func:`mara_agents.marl.model_path`)."""
    from core_env.presets import preset_of
    from mara_agents.marl import make_marl_policy, model_path

    if forecaster is not None:
        raise ValueError(f"forecaster: {algorithm} reads no forecasts, got "
                         f"{type(forecaster).__name__}")
    path = model_path(models, preset_of(env.unwrapped.config), algorithm)
    return env, make_marl_policy(env, algorithm, path, **kwargs)
