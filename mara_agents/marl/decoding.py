"""Sequential decoding for the MARL adapters (SPEC §12): a shared actor's per-node logits
decoded node by node under sequential masks (:mod:`core_env.sequential`), so a joint action
never exceeds a task's cap.

The actor scores each node from its own observation, so its logits do not depend on the
earlier nodes' choices; decoding node by node then changes only each node's mask (its own,
with the tasks whose caps nodes 0..i-1 used up removed). The adapters store that *realised*
mask in place of the env's: the library's PPO loss rebuilds every node's masked
distribution from it, so the per-node log-probabilities of the update are the conditional
ones of the rollout, and their sum is the joint log-probability (the ratio is exact, as
SPEC §5 asks of MAT).

* :func:`decode`: torch logits and masks in, actions and realised masks out.
* :class:`SequentialActor`: a TorchRL policy module for a collector, writing the action,
  its log-probability and the realised mask (MAPPO, IPPO).
* ``DECODINGS``: ``"sequential"`` (the default of the trainers) or ``"simultaneous"`` (every
  node samples from its own mask; the earlier models).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from core_env import sequential
from core_env.layout import observation_layout

DECODINGS = ("sequential", "simultaneous")
"""How the nodes of a slot choose: in index order under sequential masks, or all at once
from their own masks (then the env idles the nodes beyond a cap: capacity conflicts)."""


def check_decoding(decoding: Any) -> str:
    """``decoding`` if it is one of :data:`DECODINGS`, else ``ValueError``."""
    if decoding not in DECODINGS:
        raise ValueError(f"decoding: expected one of {DECODINGS}, got {decoding!r}")
    return str(decoding)


def decode(logits: torch.Tensor, mask: torch.Tensor, capacity: np.ndarray,
           greedy: bool = False, generator: torch.Generator | None = None
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """A joint action decoded node by node.

    Args:
        logits: float[B, N, K + 1] unmasked scores.
        mask: bool[B, N, K + 1] each node's own mask.
        capacity: int[B, K] the visible tasks' caps.
        greedy: each node's most probable legal action instead of a sample.
        generator: the torch generator of the uniforms (None: torch's global one).

    Returns:
        ``(actions int64[B, N], realised masks bool[B, N, K + 1])``.
    """
    u = None
    if not greedy:
        u = torch.rand(logits.shape[:2], generator=generator, dtype=torch.float64).numpy()
    out = sequential.sample(logits.detach().numpy(), mask.numpy(), capacity, u,
                            greedy=greedy)
    return torch.from_numpy(out.actions), torch.from_numpy(out.masks.astype(bool))


def observation_capacity(obs: np.ndarray, n_nodes: int, n_slots: int) -> np.ndarray:
    """int64[B, K] caps from the nodes' observations float32[B, N, D] (node 0's task
    table)."""
    return _layout(n_nodes, n_slots).capacity(obs[:, 0])


@functools.lru_cache(maxsize=16)
def _layout(n_nodes: int, n_slots: int) -> Any:
    """The observation layout (built once per size: building one is not free)."""
    return observation_layout(n_nodes, n_slots)


try:
    from tensordict.nn import TensorDictModuleBase
except ImportError:  # the torchrl extra is not installed
    TensorDictModuleBase = torch.nn.Module


class SequentialActor(TensorDictModuleBase):  # type: ignore[misc, valid-type]
    """A TorchRL collector's policy that decodes a shared actor node by node.

    Reads ``obs_key`` float32[B, N, D] and ``mask_key`` bool[B, N, K + 1]; writes
    ``action_key`` int64[B, N], ``log_prob_key`` float32[B, N] (each node's conditional
    log-probability) and the realised sequential masks over ``mask_key``, so that the PPO
    loss, which rebuilds the distribution from the stored mask, scores the same
    conditional distributions. ``logits_net`` maps the observation to logits (the network
    the loss's ``ProbabilisticActor`` wraps).
    """

    def __init__(self, logits_net: torch.nn.Module, obs_key: Any, mask_key: Any,
                 action_key: Any, log_prob_key: Any, n_nodes: int, n_slots: int) -> None:
        super().__init__()
        self.net = logits_net
        self.in_keys = [obs_key, mask_key]
        self.out_keys = [action_key, log_prob_key, mask_key]
        self.keys = (obs_key, mask_key, action_key, log_prob_key)
        self.n_nodes, self.n_slots = n_nodes, n_slots

    def forward(self, td: Any) -> Any:
        from torchrl.modules import MaskedCategorical

        obs_key, mask_key, action_key, log_prob_key = self.keys
        obs, mask = td.get(obs_key), td.get(mask_key)
        lead = obs.shape[:-2]  # the collector may call it with [B] or with no env dim
        flat_obs = obs.reshape(-1, *obs.shape[-2:])
        with torch.no_grad():
            logits = self.net(flat_obs)
        cap = observation_capacity(flat_obs.numpy(), self.n_nodes, self.n_slots)
        actions, realised = decode(logits, mask.reshape(-1, *mask.shape[-2:]), cap)
        log_prob = MaskedCategorical(logits=logits, mask=realised).log_prob(actions)
        td.set(action_key, actions.reshape(*lead, -1))
        td.set(log_prob_key, log_prob.reshape(*lead, -1))
        td.set(mask_key, realised.reshape(mask.shape))
        return td
