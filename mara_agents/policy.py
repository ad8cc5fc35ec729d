"""The ``Policy`` protocol shared by every scheduler (SPEC §5), an episode runner, and
:func:`make_policy`, which builds a policy from its name (parsed once into a
:class:`~mara_agents.policy_spec.PolicySpec`; the registry of names lives there).

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

import inspect
import warnings
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mara_agents import baselines as _baselines
from mara_agents.policy_spec import (
    BASELINES,
    DEFAULT_FAIR_FRACTION,
    FAIR,
    FAIR_FRACTIONS,
    KINDS,
    MARA,
    MARA_FAIR,
    MARL,
    PEERS,
    POLICY_NAMES,
    PolicySpec,
    check_fraction,
    check_policy_spec,
    fair_checkpoint,
    fair_spec,
    file_fingerprint,
    marl_spec,
    policy_fingerprint,
    resolve_factory,
)

__all__ = ["BASELINES", "DEFAULT_FAIR_FRACTION", "FAIR", "FAIR_FRACTIONS", "KINDS", "MARA",
           "MARA_FAIR", "MARL", "PEERS", "POLICY_NAMES", "Policy", "PolicySpec",
           "check_fraction", "check_policy_spec", "fair_checkpoint", "fair_spec",
           "file_fingerprint", "make_policy", "marl_model", "marl_spec", "policy_fingerprint",
           "resolve_factory", "run_episode"]


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


def make_policy(name: str | PolicySpec, env: Any, *, forecaster: Any = None,
                preset: str | None = None, **kwargs: Any) -> tuple[Any, Policy]:
    """A policy by name or spec, with the environment it must run in.

    Args:
        name: one of :data:`POLICY_NAMES`, ``"package.module:Factory"`` (see the module
            docstring), or a :class:`PolicySpec`.
        env: a parallel environment (plain, or already wrapped in a
            ``LossForecastWrapper``).
        forecaster: for the forecast-reading baselines (``least_laxity``,
            ``shortest_predicted``, ``lara``, ``oracle_greedy``), the forecaster to wrap a
            plain ``env`` with. Default: ``WLSForecaster()``, and
            ``OracleForecaster.for_env(env)`` for ``oracle_greedy``. If ``env`` is already
            wrapped, its forecaster is used (pass none); ``oracle_greedy`` then requires an
            ``OracleForecaster``.
        preset: the id of the preset ``env`` was made from; a MARL name needs it to choose
            its model (:func:`marl_model`), the other policies ignore it.
        **kwargs: passed to the policy's constructor (e.g. ``explore_obs=4`` for ``lara``;
            for MARA ``checkpoint=`` a file or a list of files (an ensemble),
            ``deterministic=``, and ``fm_steps=`` the ODE steps of the FM forecaster it
            builds, default the checkpoint's; for ``mara_fair`` also ``fraction=`` f, one of
            :data:`FAIR_FRACTIONS`, or ``checkpoint=`` your own).

    Returns:
        ``(env_to_use, policy)``: ``env`` itself, or ``env`` wrapped for forecasts.

    Raises:
        ValueError: unknown name, a factory that does not take ``(env, **kwargs)``, or a
            forecaster/wrapper that does not fit the policy.
    """
    spec = PolicySpec.parse(name)
    if spec.kind == "mara":
        return _make_mara(env, forecaster, **kwargs)
    if spec.kind == "mara_fair":
        fair = check_fraction(kwargs.pop("fraction")) if "fraction" in kwargs else spec.fraction
        if kwargs.get("checkpoint") is None:
            kwargs["checkpoint"] = str(fair_checkpoint(fair))
        return _make_mara(env, forecaster, **kwargs)
    if spec.kind == "baseline":
        return _make_baseline(spec.name, env, forecaster, **kwargs)
    if spec.kind == "marl":
        if forecaster is not None:
            raise ValueError(f"forecaster: {spec.name} reads no forecasts, got "
                             f"{type(forecaster).__name__}")
        from mara_agents.marl import make_marl_policy

        return env, make_marl_policy(env, spec.name, marl_model(spec, preset), **kwargs)
    return _make_factory(spec, env, forecaster, **kwargs)


def marl_model(spec: str | PolicySpec, preset: str | None) -> Path:
    """The model file a MARL spec runs on ``preset``: the spec's file if it names one, else
    the one trained on ``preset`` (in the spec's models folder; for a plain name, in
    :data:`mara_agents.marl.MODELS_DIR`, else the one shipped,
    :data:`mara_agents.marl.SHIPPED_MODELS`), else (with a
    warning naming the file) the one trained on its base preset (for an id with overrides,
    ``CoRE-Small-v0:load=2``), else the one trained on
    :data:`mara_agents.marl.TRAINING_PRESET`.

    Raises:
        ValueError: no preset given, or no model (naming the files and the command)."""
    from core_env.presets import split_preset
    from mara_agents.marl import model_file, model_path, shipped_model

    spec = PolicySpec.parse(spec)
    if spec.models.is_file():  # one model file: its layout is checked when it loads
        return spec.models
    if preset is None:
        raise ValueError(f"preset: {spec.text} runs the model trained on a preset; pass "
                         f"preset=<the env's preset id> to make_policy")
    base = split_preset(preset)[0]
    owns = [model_file(spec.models, base, spec.name)]
    if spec.argument is None:
        owns.append(shipped_model(base, spec.name))
    path = next((p for p in owns if p.is_file()), None) or model_path(spec.models, base,
                                                                      spec.name)
    if path not in owns or base != preset:
        warnings.warn(f"{spec.text} on {preset}: no model trained on it, running {path}",
                      stacklevel=3)
    return path


def _make_factory(spec: PolicySpec, env: Any, forecaster: Any, **kwargs: Any
                  ) -> tuple[Any, Policy]:
    factory = spec.factory()
    if forecaster is not None:
        raise ValueError(f"forecaster: a user policy ({spec.text}) builds its own environment")
    try:
        inspect.signature(factory).bind(env, **kwargs)
    except TypeError as e:
        raise ValueError(f"policy {spec.text!r}: the factory must take (env, **kwargs) "
                         f"({e})") from None
    except ValueError:  # no signature to check (a builtin); calling it will tell
        pass
    hook = getattr(factory, "make_env", None)
    if callable(hook):
        env = hook(env)
    made = factory(env, **kwargs)
    if isinstance(made, tuple) and len(made) == 2:
        env, made = made
    if not isinstance(made, Policy):
        raise ValueError(f"policy {spec.text!r}: {type(made).__name__} has no reset(seed) "
                         f"and act(observations)")
    return env, made


def _make_baseline(name: str, env: Any, forecaster: Any, **kwargs: Any) -> tuple[Any, Policy]:
    from core_env.forecast import (
        LossForecastWrapper,
        OracleForecaster,
        WLSForecaster,
        forecast_wrapper,
    )

    cls = _baselines.BY_NAME[name]
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
