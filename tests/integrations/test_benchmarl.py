"""BenchMARL (mara_agents.marl.benchmarl_task): the CoRE task's specs, and MAPPO and IPPO
training briefly on CoRE-Small-v0 without a forbidden action. BenchMARL pins torchrl<0.12, so
these run in .venv-benchmarl (`make test-benchmarl`) and skip elsewhere."""

from __future__ import annotations

import math

import pytest

import core_env
from core_env import dynamics
from core_env.presets import make_config

pytest.importorskip("benchmarl", reason="BenchMARL lives in .venv-benchmarl: make test-benchmarl")
torch = pytest.importorskip("torch")

from mara_agents.marl.benchmarl_task import TASK_PRESETS, CoreTask, TrainingLog, make_experiment


def test_every_preset_is_a_task():
    assert {t.name for t in CoreTask} == set(TASK_PRESETS)
    assert set(TASK_PRESETS.values()) == set(core_env.PRESETS)


@pytest.mark.parametrize("member,batched", [("CORE_SMALL_V0", True), ("CORE_V0", True),
                                            ("CORE_SMALL_V0", False)])
def test_task_specs_have_masks_and_state(member, batched):
    task = CoreTask[member].get_task({"batched": batched})
    config = make_config(TASK_PRESETS[member])
    n, k1 = config.cluster.n_nodes, config.cluster.max_visible_tasks + 1
    env = task.get_env_fun(num_envs=3, continuous_actions=False, seed=0, device="cpu")()
    assert tuple(env.batch_size) == ((3,) if batched else ())
    assert task.supports_discrete_actions() and not task.supports_continuous_actions()
    assert task.group_map(env) == {"node": [f"node_{i}" for i in range(n)]}
    assert task.max_steps(env) == config.max_steps
    mask = task.action_mask_spec(env)[("node", "action_mask")]
    assert mask.shape == (n, k1) and mask.dtype == torch.bool
    assert task.state_spec(env)["state"].shape[-1] > 0
    obs = task.observation_spec(env)
    assert set(obs.keys(True, True)) == {("node", "observation", "observation")}
    assert task.action_spec(env)[("node", "action")].space.n == k1


def _forbidden(td):
    action = td.get(("node", "action"))
    return int((~td.get(("node", "action_mask")).gather(-1, action.unsqueeze(-1))).sum())


@pytest.mark.parametrize("algorithm,batched", [("mappo", True), ("ippo", True),
                                               ("mappo", False)])
def test_tiny_experiment_trains_within_the_masks(algorithm, batched, tmp_path):
    log = TrainingLog()
    frames, per_batch = (4000, 2000) if batched else (1000, 1000)
    exp = make_experiment(algorithm, "CoRE-Small-v0", frames=frames, frames_per_batch=per_batch,
                          n_envs=10 if batched else 5, minibatch_size=500, epochs=2,
                          folder=tmp_path, evaluation_episodes=2 if batched else 0,
                          batched=batched, callbacks=[log])
    exp.run()
    assert exp.total_frames == frames
    assert len(log.rows) == frames // per_batch
    for row in log.rows:
        assert row["frames"] == per_batch
        assert row["masked_fraction"] > 0.2  # the masks forbid much: obeying them is no accident
        assert row["forbidden_actions"] == 0
        for key in ("loss_objective", "loss_critic", "loss_entropy"):
            assert math.isfinite(row[key]), (key, row)
    assert any(tmp_path.rglob("*.csv"))

    # the trained policy on core_env's own PettingZoo env: the env counts no illegal action;
    # one that ignores the masks, in the same env, is counted
    task = CoreTask.CORE_SMALL_V0.get_task({"batched": False})
    env = task.get_env_fun(num_envs=1, continuous_actions=False, seed=1, device="cpu")()
    raw = env._env
    td = env.rollout(task.max_steps(env), policy=exp.policy, break_when_any_done=True)
    stats = dynamics.episode_stats(raw.sim, 0)
    assert stats["length"] == td.shape[0] > 0 and bool(td["next", "done"][-1])
    assert stats["illegal_actions"] == 0 and _forbidden(td) == 0

    k1 = make_config("CoRE-Small-v0").cluster.max_visible_tasks + 1

    def ignore_masks(td):
        return td.set(("node", "action"), torch.randint(0, k1, td.get(("node", "action_mask"))
                                                        .shape[:-1]))

    td = env.rollout(task.max_steps(env), policy=ignore_masks, break_when_any_done=True)
    assert dynamics.episode_stats(raw.sim, 0)["illegal_actions"] == _forbidden(td) > 0
