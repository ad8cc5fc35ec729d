"""Stable-Baselines3 (optional extra ``[sb3]``): MaskablePPO on the centralised view and
parameter-shared MaskablePPO over SuperSuit's vector env both learn to beat the masked random
policy on CoRE-Small-v0 (paired over 20 evaluation seeds), and the SuperSuit adapter fixes
seeding, truncation and the ``info["episode"]`` clash (examples/sb3_*.py).

Measured on the 2-core development machine with torch on one thread (see docs/integrations.md):
MaskablePPO (central) after 2048 steps and shared MaskablePPO after 65536 node-steps.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib", reason="the [sb3] extra is not installed "
                    "(pip install -e '.[sb3]')")
pytest.importorskip("supersuit", reason="the [sb3] extra is not installed "
                    "(pip install -e '.[sb3]')")

from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from .conftest import load_example  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.usefixtures("one_torch_thread")]

central = load_example("sb3_maskable_ppo")
shared = load_example("sb3_supersuit_ppo")
from core_env.integrations import sb3  # noqa: E402  (the adapter the example uses)

EVAL_SEEDS = tuple(range(10_000, 10_040))
"""40 evaluation seeds (the examples' 20 and 20 more): a tighter paired comparison."""


def _paired(trained: np.ndarray, rand: np.ndarray) -> tuple[float, float]:
    """Mean paired difference and its t statistic."""
    d = trained - rand
    return float(d.mean()), float(d.mean() / (d.std(ddof=1) / np.sqrt(len(d)) + 1e-12))


# ---------------------------------------------------------------- fast checks
def test_central_view_exposes_masks_to_maskable_ppo():
    env = central.make_env()
    venv = DummyVecEnv([central.make_env])
    assert is_masking_supported(env) and is_masking_supported(venv)
    obs, _ = env.reset(seed=0)
    masks = get_action_masks(env)
    assert masks.dtype == bool and masks.shape == (4 * 9,)
    assert np.array_equal(masks, obs["action_mask"].astype(bool).ravel())


def test_supersuit_adapter_seeds_reproducibly():
    def first_steps(seed):
        venv = sb3.make_vec_env(num_copies=2)
        venv.seed(seed)
        obs = [venv.reset()["observation"].copy()]
        for _ in range(5):
            venv.step_async(np.zeros(venv.num_envs, dtype=np.int64))
            obs.append(venv.step_wait()[0]["observation"].copy())
        return np.stack(obs)

    a, b, c = first_steps(3), first_steps(3), first_steps(4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    # the two copies get different seeds (seed + i), so different workloads
    assert not np.array_equal(a[:, :4], a[:, 4:8])


def test_supersuit_adapter_marks_truncation_and_serves_masks():
    venv = sb3.make_vec_env(num_copies=1, max_steps=7)  # every episode truncates at 7
    venv.seed(0)
    obs = venv.reset()
    rng = np.random.default_rng(0)
    truncations = 0
    for t in range(1, 15):
        masks = np.stack(venv.env_method("action_masks"))
        assert np.array_equal(masks, obs["action_mask"].astype(bool))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        venv.step_async(actions)
        obs, rewards, dones, infos = venv.step_wait()
        if t % 7 == 0:
            assert dones.all()
            for info in infos:
                assert info["TimeLimit.truncated"] is True
                assert "terminal_observation" in info
                assert info["episode"]["r"] == info["episode"]["return"]
                assert info["episode"]["l"] == 7
            truncations += 1
        else:
            assert not dones.any()
    assert truncations == 2
    assert venv.has_attr("action_masks")
    with pytest.raises(AttributeError, match="action_masks"):
        venv.env_method("render")


def test_supersuit_adapter_sets_truncation_for_envs_that_do_not():
    """An env that truncates without ``TimeLimit.truncated`` in its infos still gets it
    (SB3 then bootstraps the value instead of treating the cut as a true end)."""
    import supersuit as ss

    import core_env

    class Silent(core_env.CoreSchedulerEnv):
        def step(self, actions):
            obs, rew, term, trunc, infos = super().step(actions)
            for info in infos.values():
                info.pop("TimeLimit.truncated", None)
            return obs, rew, term, trunc, infos

    vec = ss.pettingzoo_env_to_vec_env_v1(Silent(preset="CoRE-Small-v0", max_steps=5))
    venv = sb3.SeededSB3VecEnv(ss.concat_vec_envs_v1(vec, 1, num_cpus=0,
                                                        base_class="gymnasium"))
    venv.seed(1)
    venv.reset()
    for _ in range(5):
        venv.step_async(np.zeros(venv.num_envs, dtype=np.int64))
        _, _, dones, infos = venv.step_wait()
    assert dones.all()
    assert all(info.get("TimeLimit.truncated") is True for info in infos)


# ---------------------------------------------------------------- learning
@pytest.mark.slow
def test_maskable_ppo_central_beats_random():
    rand = central.evaluate("random", EVAL_SEEDS)
    model = central.train(timesteps=2048, seed=0)
    trained = central.evaluate(model, EVAL_SEEDS)
    diff, t = _paired(trained, rand)
    assert diff > 0.03 and t > 2.0, (trained.mean(), rand.mean(), diff, t)


@pytest.mark.slow
def test_shared_maskable_ppo_supersuit_beats_random():
    rand = shared.evaluate("random", EVAL_SEEDS)
    model = shared.train(timesteps=65_536, seed=0)
    trained = shared.evaluate(model, EVAL_SEEDS)
    diff, t = _paired(trained, rand)
    assert diff > 0.03 and t > 2.0, (trained.mean(), rand.mean(), diff, t)


@pytest.mark.parametrize("monitor", [False, True])
def test_a_plain_dummy_vec_env_trains_and_logs(monitor, tmp_path):
    """``DummyVecEnv([lambda: gymnasium.make(...)])`` with MaskablePPO, with or without
    ``Monitor``: training logs ``rollout/ep_rew_mean`` (SB3 reads the env's ``r`` and ``l``)
    and ``completion_rate`` reaches the episode buffer."""
    import gymnasium
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.monitor import Monitor

    def make():
        env = gymnasium.make("core_env:core_env/CoRE-Small-v0")
        return Monitor(env, info_keywords=("completion_rate",)) if monitor else env

    model = MaskablePPO("MultiInputPolicy", DummyVecEnv([make]), n_steps=256, batch_size=64,
                        n_epochs=1, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(1024)  # several episodes of 40-79 steps
    assert model.ep_info_buffer, "no episode reached SB3's buffer"
    for ep in model.ep_info_buffer:
        assert {"r", "l", "completion_rate"} <= set(ep)
        assert 0.0 <= ep["completion_rate"] <= 1.0 and ep["l"] >= 40
    log = (tmp_path / "progress.csv").read_text()
    assert "rollout/ep_rew_mean" in log.splitlines()[0]
