"""TorchRL: wrap the PettingZoo env, check its specs, and collect with a masked actor.

``PettingZooWrapper`` groups the nodes (``node_0 .. node_{N-1}``) into one group ``"node"``
and, because every observation carries an ``action_mask``, moves the mask to
``("node", "action_mask")`` (bool) and keeps the features at
``("node", "observation", "observation")``. A policy that samples from a
``MaskedCategorical`` over those logits only ever emits legal actions.

    pip install -e ".[torchrl]"
    python examples/torchrl_masked_rollout.py --frames 400 --seed 0
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs.libs.pettingzoo import PettingZooWrapper
from torchrl.modules import MLP, MaskedCategorical, ProbabilisticActor

import core_env

GROUP = "node"
"""TorchRL's group of the agents ``node_0 .. node_{N-1}``."""


def make_env(preset: str = "CoRE-Small-v0", seed: int = 0, **overrides: Any) -> PettingZooWrapper:
    """The parallel env wrapped for TorchRL (global ``state`` returned too)."""
    return PettingZooWrapper(core_env.parallel_env(preset=preset, **overrides),
                             return_state=True, categorical_actions=True, seed=seed)


def make_actor(env: PettingZooWrapper, hidden: int = 64) -> ProbabilisticActor:
    """A per-node MLP over the node's features, sampling from a masked categorical.

    Shapes: observation float32[..., N, D] -> logits float32[..., N, K + 1];
    mask bool[..., N, K + 1]; action int64[..., N].
    """
    obs_dim = env.observation_spec[GROUP, "observation", "observation"].shape[-1]
    n_actions = env.action_spec[GROUP, "action"].space.n
    net = MLP(in_features=obs_dim, out_features=n_actions, num_cells=[hidden, hidden])
    module = TensorDictModule(net, in_keys=[(GROUP, "observation", "observation")],
                              out_keys=[(GROUP, "logits")])
    return ProbabilisticActor(module, in_keys={"logits": (GROUP, "logits"),
                                               "mask": (GROUP, "action_mask")},
                              out_keys=[(GROUP, "action")], distribution_class=MaskedCategorical,
                              return_log_prob=True)


def collect(frames: int = 400, seed: int = 0, preset: str = "CoRE-Small-v0") -> Any:
    """Collect ``frames`` env steps with an untrained masked actor; returns the batch."""
    torch.manual_seed(seed)
    env = make_env(preset, seed)
    actor = make_actor(env)
    collector = Collector(env, actor, frames_per_batch=frames, total_frames=frames,
                          auto_register_policy_transforms=False)
    batch = next(iter(collector))
    collector.shutdown()
    return batch


def main(argv: list[str] | None = None) -> None:
    """Command line: collect, then report how many of the actions were legal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    batch = collect(args.frames, args.seed)
    action, mask = batch[GROUP, "action"], batch[GROUP, "action_mask"]
    legal = mask.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    print(f"{action.numel()} node actions, {int(legal.sum())} legal, "
          f"{int((action > 0).sum())} of them train a task; "
          f"{int(batch['next', 'done'].sum())} episodes ended")


if __name__ == "__main__":
    main()
