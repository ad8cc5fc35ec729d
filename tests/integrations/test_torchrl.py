"""TorchRL (optional extra ``[torchrl]``): ``PettingZooWrapper`` on our env passes
``check_env_specs``, and a collector with a masked categorical actor emits only legal
actions (examples/torchrl_masked_rollout.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("torchrl", reason="the [torchrl] extra is not installed "
                    "(pip install -e '.[torchrl]')")

import torch  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from .conftest import load_example  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.usefixtures("one_torch_thread")]

ex = load_example("torchrl_masked_rollout")


@pytest.mark.parametrize("overrides", [{}, {"n_nodes": 3, "max_visible_tasks": 5}])
def test_check_env_specs_passes(overrides):
    env = ex.make_env(seed=0, **overrides)
    check_env_specs(env, seed=0)
    n = overrides.get("n_nodes", 4)
    k = overrides.get("max_visible_tasks", 8)
    assert env.group_map == {ex.GROUP: [f"node_{i}" for i in range(n)]}
    assert env.action_spec[ex.GROUP, "action"].shape == (n,)
    assert env.observation_spec[ex.GROUP, "action_mask"].shape == (n, k + 1)
    assert env.observation_spec[ex.GROUP, "action_mask"].dtype == torch.bool


def test_masks_follow_the_env():
    """The wrapper's mask is the env's mask (empty slots masked, idle legal)."""
    env = ex.make_env(seed=3)
    td = env.rollout(30, break_when_any_done=True)
    mask = td[ex.GROUP, "action_mask"]  # bool[T, N, K + 1]
    assert mask[..., 0].all()
    assert (~mask).any(), "some slots must be empty (masked) in 30 steps of the small preset"
    assert (mask.sum(-1) > 1).any(), "some task must be trainable"


def test_collector_with_masked_actor_emits_only_legal_actions():
    batch = ex.collect(frames=300, seed=0)
    action = batch[ex.GROUP, "action"]  # int64[T, N]
    mask = batch[ex.GROUP, "action_mask"]  # bool[T, N, K + 1]
    assert action.shape == (300, 4) and mask.shape == (300, 4, 9)
    legal = mask.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    assert legal.all()
    assert (action > 0).float().mean() > 0.3  # it trains tasks, not only idles
    assert batch["next", "done"].sum() >= 1  # it crossed an episode end and reset
    # masked-out actions have zero probability under the actor's distribution
    logp = batch[ex.GROUP, "action_log_prob"]
    assert torch.isfinite(logp).all()


def test_an_unmasked_actor_would_play_illegal_actions():
    """Control for the test above: the same network without the mask is not legal by luck."""
    env = ex.make_env(seed=0)
    actor = ex.make_actor(env)
    torch.manual_seed(0)
    td = env.rollout(100, actor, break_when_any_done=False)
    logits = td[ex.GROUP, "logits"]
    unmasked = torch.distributions.Categorical(logits=logits).sample()
    legal = td[ex.GROUP, "action_mask"].gather(-1, unmasked.unsqueeze(-1)).squeeze(-1)
    assert not legal.all()
