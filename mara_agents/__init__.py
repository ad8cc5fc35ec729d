"""MARA and the schedulers it is compared with, for the CoRE-Learning environment (``core_env``).

Every scheduler is a :class:`Policy` built by name (or from your own ``package.module:Factory``)
and run through the environment's own API::

    import core_env
    from mara_agents import make_policy, run_episode

    env, policy = make_policy("mara", core_env.parallel_env(preset="CoRE-v0"))
    print(run_episode(env, policy, seed=0)["completion_rate"])

Subpackages: :mod:`mara_agents.baselines` (heuristics, LARA, the peer schedulers),
:mod:`mara_agents.forecast` (the flow-matching forecaster), :mod:`mara_agents.mat` (the
Multi-Agent Transformer and its checkpoints), :mod:`mara_agents.train` (``mara-train``),
:mod:`mara_agents.marl` (standard MARL libraries on the environment).
"""

from mara_agents.policy import POLICY_NAMES, Policy, make_policy, run_episode

__all__ = ["POLICY_NAMES", "Policy", "make_policy", "run_episode"]
