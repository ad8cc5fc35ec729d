"""The ``Policy`` protocol shared by every scheduler (SPEC §5), an episode runner and the
baseline registry.

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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

POLICY_NAMES = ("random", "round_robin", "fifo", "edf", "least_laxity", "shortest_predicted",
                "lara", "oracle_greedy")
"""Names accepted by :func:`make_policy`, in the order of the documentation tables."""

MARA_CHECKPOINTS: dict[str, str | tuple[str, ...]] = {
    "mara": "mara_default.pt",
    "mara-fast": "ablation/mara_fast.pt",
    "mara-d32": "ablation/mara_d32.pt",
    "mara-staged": "ablation/mara_staged.pt",
    "mara-2m": "ablation/mara_2m.pt",
    "mara-ft": "ablation/mara_ft.pt",
    "mara-wls": "ablation/mara_wls.pt",
    "mara-noshaping": "ablation/mara_noshaping.pt",
    "mat-dec": "ablation/mat_dec.pt",
    "mara-ens5": tuple(f"ensemble/seed{k}.pt" for k in range(5)),
    "mara-distill": "distill/mara_distill.pt",
}
"""MARA and its ablations (shipped checkpoints in ``mara_agents/checkpoints``). ``mara-fast``
is ``mara-d32``'s recipe trained and run on a cheaper FM sampler (``--fm-steps 5 --fm-samples
16``): within 3x LARA's inference time, 3.9 points lower than MARA at the training load.
``mara-d32`` is the previous default: the same command with a MAT half as wide (width 32) and
1.9M PPO steps. ``mara-staged`` is the default before it (94 minutes of training in six steps).
``mara-2m`` is MARA after 2.0M PPO steps (the default before ``mara-staged``); each
ablation continues it for the same 300k PPO steps with one change (``mara-ft``: none, the
control; ``mara-wls``: WLS forecast columns instead of FM; ``mara-noshaping``: beta = 0;
``mat-dec``: independent per-node heads, no conditioning on earlier nodes). See
``mara_agents/checkpoints/ablation/README.json`` and docs/mara.md. ``mara-ens5`` is an
ensemble (a tuple of files): five runs of the default ``mara-train`` command, seeds 0-4
(``mara_agents/checkpoints/ensemble/README.json``). ``mara-distill`` is one MAT: ``mara-ens5``
distilled into the shipped checkpoint by ``mara-distill`` (``mara_agents.distill``;
``mara_agents/checkpoints/distill/README.json``)."""


def shipped_checkpoint(name: str) -> Path | list[Path]:
    """The shipped file of a name in :data:`MARA_CHECKPOINTS`, or the list of an ensemble's
    files."""
    from mara_agents.mara import checkpoint_path

    files = MARA_CHECKPOINTS[name]
    if isinstance(files, tuple):
        return [checkpoint_path(f) for f in files]
    return checkpoint_path(files)


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


def _forecast_wrapper(env: Any) -> Any | None:
    """The ``LossForecastWrapper`` in ``env``'s wrapper chain, if any."""
    from core_env.forecast import LossForecastWrapper

    e = env
    while e is not None:
        if isinstance(e, LossForecastWrapper):
            return e
        e = getattr(e, "env", None)
    return None


def make_policy(name: str, env: Any, *, forecaster: Any = None, **kwargs: Any
                ) -> tuple[Any, Policy]:
    """A baseline by name, with the environment it must run in.

    Args:
        name: one of :data:`POLICY_NAMES`.
        env: a parallel environment (plain, or already wrapped in a
            ``LossForecastWrapper``).
        forecaster: for the forecast-reading policies (``least_laxity``,
            ``shortest_predicted``, ``lara``, ``oracle_greedy``), the forecaster to wrap a
            plain ``env`` with. Default: ``WLSForecaster()``, and
            ``OracleForecaster.for_env(env)`` for ``oracle_greedy``. If ``env`` is already
            wrapped, its forecaster is used (pass none); ``oracle_greedy`` then requires an
            ``OracleForecaster``.
        **kwargs: passed to the policy's constructor (e.g. ``explore_obs=4`` for ``lara``;
            ``checkpoint=`` and ``deterministic=`` for MARA). For MARA, ``fm_steps=``
            sets the ODE steps of the FM forecaster it builds (default: what the MARA
            checkpoint was trained with; fewer are faster and cost completions, see
            docs/mara.md).

    Returns:
        ``(env_to_use, policy)``: ``env`` itself, or ``env`` wrapped for forecasts.

    Raises:
        ValueError: unknown name, or a forecaster/wrapper that does not fit the policy.
    """
    from core_env.forecast import LossForecastWrapper, OracleForecaster, WLSForecaster
    if name in MARA_CHECKPOINTS:
        if name != "mara" and "checkpoint" not in kwargs:
            kwargs["checkpoint"] = shipped_checkpoint(name)
        return _make_mara(env, forecaster, **kwargs)
    from mara_agents.baselines import (EDFPolicy, FIFOPolicy, LARAPolicy, LeastLaxityPolicy,
                                       OracleGreedyPolicy, RandomPolicy, RoundRobinPolicy,
                                       ShortestPredictedPolicy)

    classes = {"random": RandomPolicy, "round_robin": RoundRobinPolicy, "fifo": FIFOPolicy,
               "edf": EDFPolicy, "least_laxity": LeastLaxityPolicy,
               "shortest_predicted": ShortestPredictedPolicy, "lara": LARAPolicy,
               "oracle_greedy": OracleGreedyPolicy}
    if name not in classes:
        raise ValueError(f"name: expected one of {list(POLICY_NAMES) + list(MARA_CHECKPOINTS)}, "
                         f"got {name!r}")
    cls = classes[name]
    if cls.needs_forecast:
        wrapped = _forecast_wrapper(env)
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
    """MARA (``checkpoint=`` a path, default the shipped one) in the cached forecast wrapper
    its checkpoint was trained with (see :mod:`mara_agents.mara`), with the FM sampler
    settings it was trained with (``fm_steps`` overrides the ODE steps), integrated by the
    numpy sampler (the same columns to float32 rounding, faster for one environment)."""
    from core_env.forecast import LossForecastWrapper
    from mara_agents.mara import MARAPolicy, checkpoint_forecaster
    from mara_agents.ppo import make_forecaster

    wrapped = _forecast_wrapper(env)
    if fm_steps is not None and (wrapped is not None or forecaster is not None):
        raise ValueError("fm_steps: only applies to the FM forecaster make_policy builds; "
                         "pass a plain env and no forecaster, or set the steps on yours")
    if wrapped is None:
        if forecaster is None:
            name, steps, samples = checkpoint_forecaster(kwargs.get("checkpoint"))
            if fm_steps is not None and name != "fm":
                raise ValueError(f"fm_steps: this checkpoint reads {name} forecasts, which "
                                 f"have no ODE steps")
            forecaster = make_forecaster(name, fm_steps=steps if fm_steps is None else fm_steps,
                                         fm_samples=samples, fm_backend="numpy")
        env = LossForecastWrapper(env, forecaster, cache=True)
    elif forecaster is not None:
        raise ValueError("forecaster: the env already has a LossForecastWrapper; pass a plain "
                         "env to choose the forecaster, or no forecaster")
    return env, MARAPolicy(env, **kwargs)
