"""The AEC form of the environment: the nodes of a slot act in turn (node_0 first), each
node's ``action_mask`` the *sequential* mask given the earlier nodes' choices in that slot
(:func:`core_env.masks.sequential_mask`: its own mask with the tasks whose cap they used up
removed), so a policy that samples from the masks never exceeds a cap (SPEC §12); the slot's
dynamics run when the last node has acted. Built on PettingZoo's conversion of the parallel
env (rewards, ``_cumulative_rewards``, terminations as its AEC conventions give them), with
every action checked when it is given::

    import pettingzoo, core_env
    env = pettingzoo.make("aec", "core_env/CoRE-v0")
    env.reset(seed=0)
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        legal = obs["action_mask"].nonzero()[0]
        env.step(None if term or trunc else int(legal[-1]))

PettingZoo's ``parallel_to_aec`` stores each agent's action and hands the joint action to
the parallel env after the last agent; a malformed action was therefore only refused at the
last agent's ``step``, and stayed stored, so every later ``step`` raised the same error
until ``reset()``. Here ``step`` refuses it at once (the error names the agent) and stores
nothing, so the agent can act again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from core_env.masks import sequential_mask


class CoreAECWrapper(parallel_to_aec_wrapper):
    """``parallel_to_aec_wrapper`` with sequential masks in :meth:`observe` and each live
    agent's action checked in :meth:`step`."""

    def observe(self, agent: Any) -> Any:
        """The agent's observation; its ``action_mask`` is the sequential mask given the
        actions the nodes before it took in this slot (those that have acted: for a node
        after the one to act, only the nodes before the one to act count)."""
        obs = super().observe(agent)
        order = self._agent_selector.agent_order
        if (not isinstance(obs, dict) or agent not in order or self.agent_selection not in order
                or self.terminations.get(agent) or self.truncations.get(agent)):
            return obs
        acted = order[:min(order.index(agent), order.index(self.agent_selection))]
        if not acted:
            return obs
        cap = self.env.unwrapped.task_caps(obs)
        earlier = np.array([self._actions[a] for a in acted], dtype=np.int64)
        mask = sequential_mask(obs["action_mask"], cap, earlier)
        return {**obs, "action_mask": mask.astype(obs["action_mask"].dtype, copy=False)}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if not (self.terminations[agent] or self.truncations[agent]):
            self.env.unwrapped.check_action(agent, action)
        super().step(action)


def aec_env(par_env: Any) -> OrderEnforcingWrapper:
    """The AEC environment of a ``CoreSchedulerEnv`` (PettingZoo's order enforcing wrapper
    around :class:`CoreAECWrapper`)."""
    return OrderEnforcingWrapper(CoreAECWrapper(par_env))
