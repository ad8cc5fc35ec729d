"""MAPPO and IPPO with TorchRL's losses: a short run writes a model whose policy plays legal
actions, the same run twice gives the same weights, and the two critics differ as they
should (MAPPO's reads the global state, IPPO's each node's features)."""

from __future__ import annotations

import pytest

pytest.importorskip("torchrl", reason="the [torchrl] extra is not installed")

import torch  # noqa: E402

import core_env  # noqa: E402
from mara_agents.marl import make_marl_policy, torchrl_ppo, train  # noqa: E402
from mara_agents.marl.common import load_model  # noqa: E402
from mara_agents.policy import run_episode  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning")]

PRESET = "CoRE-Small-v0"
SMALL = torchrl_ppo.TorchRLPPOConfig(steps_per_update=128, minibatch_size=64, epochs=1)


@pytest.mark.parametrize("algorithm", ["mappo", "ippo"])
def test_short_run_gives_a_reproducible_legal_policy(tmp_path, algorithm):
    before = torch.get_num_threads()
    a = torchrl_ppo.train(algorithm, PRESET, 256, 0, tmp_path / "a.pt", SMALL)
    b = torchrl_ppo.train(algorithm, PRESET, 256, 0, tmp_path / "b.pt", SMALL)
    torch.set_num_threads(before)
    wa, wb = load_model(a, algorithm), load_model(b, algorithm)
    for k, v in wa["actor_state"].items():
        assert torch.equal(v, wb["actor_state"][k]), k
    assert wa["config"]["steps_per_update"] == 128 and wa["env_steps"] == 256
    env = core_env.parallel_env(preset=PRESET)
    policy = make_marl_policy(env, algorithm, a)
    stats = run_episode(env, policy, seed=11)
    assert stats["illegal_actions"] == 0 and stats == run_episode(env, policy, seed=11)


def test_central_value_is_one_value_per_state_for_every_node():
    v = torchrl_ppo.CentralValue(torch.nn.Linear(6, 1), n_nodes=4)
    out = v(torch.randn(3, 5, 6))
    assert out.shape == (3, 5, 4, 1)
    assert torch.equal(out[..., 0, :], out[..., 3, :])


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="algorithm"):
        train("qmix", PRESET, 10, 0, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="env_steps"):
        train("mappo", PRESET, 0, 0, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="minibatch"):
        torchrl_ppo.TorchRLPPOConfig(steps_per_update=100, minibatch_size=64)
