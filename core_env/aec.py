"""The AEC form of the environment: PettingZoo's conversion of the parallel env, with every
action checked when it is given.

PettingZoo's ``parallel_to_aec`` stores each agent's action and hands the joint action to
the parallel env after the last agent; a malformed action was therefore only refused at the
last agent's ``step``, and stayed stored, so every later ``step`` raised the same error
until ``reset()``. Here ``step`` refuses it at once (the error names the agent) and stores
nothing, so the agent can act again.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper


class CoreAECWrapper(parallel_to_aec_wrapper):
    """``parallel_to_aec_wrapper`` with each live agent's action checked in :meth:`step`."""

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if not (self.terminations[agent] or self.truncations[agent]):
            self.env.unwrapped.check_action(agent, action)
        super().step(action)


def aec_env(par_env: Any) -> OrderEnforcingWrapper:
    """The AEC environment of a ``CoreSchedulerEnv`` (PettingZoo's order enforcing wrapper
    around :class:`CoreAECWrapper`)."""
    return OrderEnforcingWrapper(CoreAECWrapper(par_env))
