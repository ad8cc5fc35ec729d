"""PPO pieces against hand-computed values, an end-to-end smoke run, checkpoints, MARAPolicy."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import core_env
from mara_agents.mat.checkpoint import input_columns, load_checkpoint, model_from_checkpoint
from mara_agents.mat.mara_policy import MARAPolicy
from mara_agents.policy import make_policy, run_episode
from mara_agents.safe_io import save
from mara_agents.train.ppo import RunningNorm, clipped_surrogate, explained_variance, gae
from mara_agents.train.recipe import main, parse_args
from mara_agents.train.trainer import PPOConfig, Trainer


def test_gae_on_a_tiny_trajectory():
    rewards = torch.tensor([[1.0], [0.0], [2.0]])
    values = torch.tensor([[[0.5]], [[1.0]], [[1.5]]])
    dones = torch.tensor([[False], [True], [False]])
    adv, ret = gae(rewards, values, dones, torch.tensor([[3.0]]), gamma=1.0, lam=0.5)
    # t=2: 2 + 3 - 1.5 = 3.5; t=1 (terminal): 0 - 1 = -1; t=0: 1 + 1 - 0.5 + 0.5 * -1 = 1
    assert torch.allclose(adv.flatten(), torch.tensor([1.0, -1.0, 3.5]))
    assert torch.allclose(ret.flatten(), torch.tensor([1.5, 0.0, 5.0]))


def test_gae_lambda_one_gamma_one_is_the_return_to_go_minus_value():
    g = torch.Generator().manual_seed(0)
    r = torch.rand(6, 2, generator=g)
    v = torch.rand(6, 2, 3, generator=g)
    adv, ret = gae(r, v, torch.zeros(6, 2, dtype=torch.bool), torch.zeros(2, 3), 1.0, 1.0)
    togo = torch.flip(torch.cumsum(torch.flip(r, [0]), 0), [0])
    assert torch.allclose(ret, togo[..., None].expand(-1, -1, 3), atol=1e-6)


def test_clipped_surrogate_by_hand():
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1]))
    loss, frac = clipped_surrogate(logp, torch.zeros(3), torch.tensor([1.0, 1.0, -1.0]), 0.2)
    assert math.isclose(float(loss), -(1.2 + 0.5 - 1.1) / 3, rel_tol=1e-6)
    assert math.isclose(float(frac), 2 / 3, rel_tol=1e-6)


def test_running_norm_matches_numpy():
    g = np.random.default_rng(0)
    chunks = [g.normal(3.0, 2.0, size=n) for n in (10, 200, 37)]
    norm = RunningNorm()
    for c in chunks:
        norm.update(torch.from_numpy(c))
    allx = np.concatenate(chunks)
    assert math.isclose(norm.mean, allx.mean(), rel_tol=1e-4)
    assert math.isclose(norm.var, allx.var(), rel_tol=1e-3)


def test_explained_variance():
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(y, y) == 1.0
    assert explained_variance(torch.zeros(4), y) == pytest.approx(0.0)
    assert explained_variance(y + 1.0, y) == pytest.approx(1.0)
    assert explained_variance(-y, y) == pytest.approx(1.0 - 4.0)
    assert explained_variance(y, torch.ones(4)) == 0.0


TINY = ["--preset", "CoRE-Small-v0", "--forecaster", "wls", "--num-envs", "4",
        "--rollout-len", "16", "--minibatches", "2", "--epochs", "2", "--env-steps", "192",
        "--imitation-iters", "2", "--imitation-steps", "8", "--imitation-epochs", "1",
        "--critic-warmup", "1", "--model-d-model", "16", "--model-ff", "16",
        "--checkpoint-every", "1", "--no-progress",
        "--members", "1"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mara") / "a"
    assert main([*TINY, "--out", str(out)]) == 0
    return out


def test_smoke_run_writes_checkpoints_logs_and_curve(tiny_run):
    assert (tiny_run / "last.pt").is_file() and (tiny_run / "imitation.pt").is_file()
    curve = json.loads((tiny_run / "curve.json").read_text())
    assert len(curve["imitation"]) == 2 and curve["imitation"][0]["beta"] == 1.0
    acc = EventAccumulator(str(tiny_run / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"loss/policy", "loss/value", "loss/entropy", "ppo/approx_kl", "ppo/clip_frac",
            "ppo/explained_variance", "imitation/loss", "imitation/agreement"} <= tags
    blob = load_checkpoint(tiny_run / "last.pt")
    assert blob["update"] == 3 and blob["env_steps"] == 192


def test_same_seed_same_weights_and_resume(tiny_run, tmp_path):
    out_b = tmp_path / "b"
    assert main([*TINY, "--out", str(out_b)]) == 0
    a = load_checkpoint(tiny_run / "last.pt")["state_dict"]
    b = load_checkpoint(out_b / "last.pt")["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    # resume to more env steps continues from update 3
    cfg = parse_args([*TINY, "--out", str(tmp_path / "c"), "--env-steps", "256",
                      "--resume", str(tiny_run / "last.pt")])
    trainer = Trainer(cfg)
    assert trainer.update == 3
    summary = trainer.run()
    assert summary["updates"] == 4 and summary["env_steps"] == 256
    # a different config cannot resume this checkpoint
    with pytest.raises(ValueError, match="different config"):
        Trainer(parse_args([*TINY, "--lr", "0.01", "--resume", str(tiny_run / "last.pt")]))


def test_policy_round_trip_and_deterministic_greedy(tiny_run):
    env, pol = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                           checkpoint=tiny_run / "last.pt")
    assert isinstance(pol, MARAPolicy)
    s1 = run_episode(env, pol, seed=3)
    s2 = run_episode(env, pol, seed=3)
    assert s1 == s2
    assert s1["capacity_conflicts"] == 0 and s1["illegal_actions"] == 0


def test_layout_mismatch_is_rejected(tiny_run):
    # a size outside the checkpoint's own and SIZES (8-64 nodes, 16-64 slots)
    with pytest.raises(ValueError, match="different observation layout.*n_nodes.*n_slots"):
        make_policy("mara", core_env.parallel_env(preset="CoRE-256-v0"),
                    checkpoint=tiny_run / "last.pt")
    with pytest.raises(ValueError, match="n_nodes: checkpoint 16, env 4"):
        make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"))
    # other features (here: no forecast columns)
    blob = load_checkpoint(tiny_run / "last.pt")
    base = core_env.parallel_env(preset="CoRE-Small-v0").layout
    with pytest.raises(ValueError, match=r"task features .*missing \['fc_mean'"):
        model_from_checkpoint(blob, base)


def test_a_checkpoint_of_fewer_features_reads_them_by_name(tiny_run):
    """A checkpoint trained before the env gained features (here: one recorded without the
    switching-cost columns) runs on the env's layout, reading its own columns, and decodes the
    same actions as the full model on the same features."""
    blob = load_checkpoint(tiny_run / "last.pt")
    env, policy = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                              checkpoint=tiny_run / "last.pt")
    assert policy.columns is None
    old = dict(blob, layout=dict(blob["layout"]))
    old["layout"]["task"] = [f for f in blob["layout"]["task"]
                             if f not in ("switch_cost", "holders")]
    cols = input_columns(old, policy.layout)
    names = [f.name for f in policy.layout.task_features]
    assert [names[i] for i in cols.tasks] == old["layout"]["task"]
    assert cols.globals.tolist() == list(range(len(blob["layout"]["global"])))
    old["layout"]["task"] = ["no_such_feature"]
    with pytest.raises(ValueError, match="missing \\['no_such_feature'\\]"):
        input_columns(old, policy.layout)


def test_one_checkpoint_runs_on_every_size_within_sizes(tiny_run):
    """The tiny 4-node checkpoint's weights fit 8 and 64 nodes: one token per node and slot."""
    for preset in ("CoRE-8-v0", "CoRE-64-v0"):
        env, pol = make_policy("mara", core_env.parallel_env(preset=preset, max_steps=12),
                               checkpoint=tiny_run / "last.pt")
        stats = run_episode(env, pol, seed=1)
        assert stats["illegal_actions"] == 0 and stats["capacity_conflicts"] == 0


def test_unsafe_or_broken_checkpoints_are_refused(tmp_path, tiny_run):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps({"format": "mara-mat/1", "x": Evil()}))
    with pytest.raises(ValueError, match="evil.pt"):
        load_checkpoint(evil)
    cut = tmp_path / "cut.pt"
    cut.write_bytes((tiny_run / "last.pt").read_bytes()[:500])
    with pytest.raises(ValueError, match="cut.pt"):
        load_checkpoint(cut)
    other = tmp_path / "other.pt"
    torch.save({"format": "something-else"}, other)
    with pytest.raises(ValueError, match="not a MARA checkpoint"):
        load_checkpoint(other)


def test_mara_needs_the_cached_forecast_wrapper(tiny_run):
    from core_env.forecast import LossForecastWrapper, WLSForecaster
    env = LossForecastWrapper(core_env.parallel_env(preset="CoRE-Small-v0"), WLSForecaster())
    with pytest.raises(ValueError, match="cache=True"):
        MARAPolicy(env, tiny_run / "last.pt")


@pytest.mark.parametrize("flag,value,field", [
    ("--gamma", "1.5", "gamma"), ("--num-envs", "0", "num_envs"),
    ("--forecaster", "oracle", "forecaster"), ("--preset", "nope", "preset"),
    ("--minibatches", "3", "minibatches"), ("--model-heads", "3", "heads")])
def test_bad_config_values_name_the_field(flag, value, field, capsys):
    with pytest.raises(SystemExit):
        parse_args([flag, value])
    assert field in capsys.readouterr().err


def test_init_from_a_checkpoint_skips_stage_one(tiny_run, tmp_path):
    cfg = parse_args([*TINY, "--out", str(tmp_path / "d"),
                      "--init", str(tiny_run / "imitation.pt")])
    trainer = Trainer(cfg)
    ref = load_checkpoint(tiny_run / "imitation.pt")["state_dict"]
    assert all(torch.equal(trainer.model.state_dict()[k], ref[k]) for k in ref)
    summary = trainer.run()
    assert summary["updates"] == 3
    curve = json.loads((tmp_path / "d" / "curve.json").read_text())
    assert len(curve["imitation"]) == 2  # carried over, not re-run
    assert not (tmp_path / "d" / "imitation.pt").exists()


def test_init_refuses_a_checkpoint_of_other_model_sizes(tiny_run, tmp_path):
    """The MAT's sizes are part of the config: --init of a checkpoint with other sizes names
    the flags that match it instead of silently training another shape."""
    cfg = parse_args([*TINY, "--out", str(tmp_path / "d"), "--model-d-model", "32",
                      "--init", str(tiny_run / "imitation.pt")])
    with pytest.raises(ValueError, match="--model-d-model 16"):
        Trainer(cfg)
    cfg = parse_args([*TINY, "--out", str(tmp_path / "d"), "--no-model-autoregressive",
                      "--init", str(tiny_run / "imitation.pt")])
    with pytest.raises(ValueError, match="--model-autoregressive"):
        Trainer(cfg)


def test_critic_warmup_leaves_the_policy_untouched(tiny_run, tmp_path):
    """During the warm-up updates only the value head changes."""
    cfg = parse_args([*TINY, "--out", str(tmp_path / "w"), "--critic-warmup", "5",
                      "--init", str(tiny_run / "imitation.pt")])
    trainer = Trainer(cfg)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.run()
    after = trainer.model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("value_head.") for k in changed)


def test_critic_warmup_steps_the_value_head_at_critic_lr(tiny_run, tmp_path):
    """Adam's steps are at most its learning rate per element: the warm-up moves the value
    head by up to critic_lr per step, far beyond what the PPO lr would allow."""
    steps = 2 * 2  # epochs * minibatches of TINY, one warm-up update
    cfg = parse_args([*TINY, "--out", str(tmp_path / "w"), "--critic-warmup", "1",
                      "--env-steps", "64", "--lr", "1e-5", "--critic-lr", "0.02",
                      "--init", str(tiny_run / "imitation.pt")])
    trainer = Trainer(cfg)
    before = {k: v.clone() for k, v in trainer.model.value_head.state_dict().items()}
    trainer.run()
    moved = max(float((v - before[k]).abs().max())
                for k, v in trainer.model.value_head.state_dict().items())
    assert 100 * steps * cfg.lr < moved <= steps * cfg.critic_lr * 1.001


def test_critic_lr_must_be_positive():
    with pytest.raises(ValueError, match="critic_lr"):
        PPOConfig(critic_lr=0.0)


@pytest.mark.parametrize("entry,texts", [
    ("mara_agents.train.recipe", ("--seed", "--members", "--distill-iterations ",
                                  "DAgger iterations")),
    ("mara_agents.forecast.train", ("--seed",)),
    ("mara_agents.train.distill", ("--seed", "--iterations ", "DAgger iterations"))])
def test_help_lists_every_flag(entry, texts, capsys):
    import importlib

    with pytest.raises(SystemExit) as e:
        importlib.import_module(entry).main(["--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in texts:  # flags, and the docstrings of inherited and nested fields
        assert text in out


def test_fm_sampler_settings_travel_with_the_checkpoint(tmp_path):
    """A run trained on cheaper FM columns is evaluated on the same columns (through the
    numpy sampler); a checkpoint without the fields is refused, naming them."""
    from mara_agents.forecast import FlowMatchingForecaster

    out = tmp_path / "fm"
    flags = [a for a in TINY if a not in ("wls",)]
    flags[flags.index("--forecaster") + 1:flags.index("--forecaster") + 1] = ["fm"]
    assert main([*flags, "--env-steps", "64", "--imitation-iters", "0", "--fm-steps", "2",
                 "--fm-samples", "4", "--out", str(out)]) == 0
    env, pol = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                           checkpoint=out / "last.pt")
    assert isinstance(env.forecaster, FlowMatchingForecaster)
    assert (env.forecaster.sampler.steps, env.forecaster.sampler.samples) == (2, 4)
    assert env.forecaster.backend == "numpy"  # one environment: the numpy sampler
    assert run_episode(env, pol, seed=1)["capacity_conflicts"] == 0
    env, _ = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                         checkpoint=out / "last.pt", fm_steps=5)
    assert (env.forecaster.sampler.steps, env.forecaster.sampler.samples) == (5, 4)
    blob = torch.load(out / "last.pt", weights_only=True)
    del blob["train_config"]["fm_steps"]
    save(tmp_path / "old.pt", blob)
    with pytest.raises(ValueError, match="fm_steps"):
        load_checkpoint(tmp_path / "old.pt")


def test_a_checkpoint_of_the_old_vocabulary_resumes_as_the_same_config():
    """Checkpoints before 2026-12-06 stored the entropy weight as ``entropy_coef``; it is
    ``ent_coef`` now, and the stored name still matches the field."""
    cfg = PPOConfig()
    old = cfg.to_dict()
    old["entropy_coef"] = old.pop("ent_coef")
    assert cfg.differences(old) == []
    old["entropy_coef"] = 0.5
    assert cfg.differences(old) == ["ent_coef"]


def test_a_checkpoint_from_before_placement_resumes_as_the_same_config():
    """Checkpoints before placement existed trained with the model's own placement."""
    old = PPOConfig().to_dict()
    del old["placement"]
    assert PPOConfig().differences(old) == []
    assert PPOConfig(placement="keep").differences(old) == ["placement"]


@pytest.mark.parametrize("bad", ["kept", "", None, 1])
def test_bad_placement_is_refused_naming_it(bad, tiny_run):
    with pytest.raises(ValueError, match="placement"):
        PPOConfig(placement=bad)
    with pytest.raises(ValueError, match="placement"):
        make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                    checkpoint=tiny_run / "last.pt", placement=bad)


def _mara_steps(env, policies, seed):
    """Run ``policies[0]``'s episode; yield every step's observations and each policy's
    actions on them."""
    obs, _ = env.reset(seed=seed)
    for p in policies:
        p.reset(seed)
    while env.agents:
        acts = [p.act(obs) for p in policies]
        yield obs, [np.array([a[n] for n in env.possible_agents]) for a in acts]
        obs, *_ = env.step(acts[0])


def test_keep_placement_moves_nodes_only_where_counts_change(tiny_run):
    """``placement="keep"`` executes the decoded node counts, with every node that can stay
    on its last task staying; ``auto`` is ``keep`` where a switch costs something and the
    decoded actions where it does not."""
    ckpt = tiny_run / "last.pt"
    env, keep = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0",
                                                          switch_cost=0.3),
                            checkpoint=ckpt, placement="keep")
    model = MARAPolicy(env, ckpt, placement="model")
    auto = MARAPolicy(env, ckpt)
    k1 = env.layout.n_slots + 1
    moved = 0
    for obs, (a_keep, a_model, a_auto) in _mara_steps(env, [keep, model, auto], seed=1):
        np.testing.assert_array_equal(np.bincount(a_keep, minlength=k1),
                                      np.bincount(a_model, minlength=k1))
        np.testing.assert_array_equal(a_auto, a_keep)
        last = np.array([int(np.rint(obs[n]["observation"][env.layout.index("last_slot")]
                                     * (k1 - 1))) for n in env.possible_agents])
        for slot in set(last[last > 0].tolist()):
            wanted = int((a_keep == slot).sum())  # last_slot reads slot + 1 as action
            stayed = int(((last == slot) & (a_keep == slot)).sum())
            assert stayed == min(wanted, int((last == slot).sum()))
        moved += int((a_model != a_keep).sum())
    assert moved > 0  # the decoded placement differs, so the test can tell them apart
    free_env, free_auto = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                                      checkpoint=ckpt)
    free_model = MARAPolicy(free_env, ckpt, placement="model")
    for _, (a_auto, a_model) in _mara_steps(free_env, [free_auto, free_model], seed=1):
        np.testing.assert_array_equal(a_auto, a_model)


def test_a_run_trained_with_keep_placement_keeps_it(tmp_path):
    out = tmp_path / "keep"
    assert main([*TINY, "--placement", "keep", "--out", str(out)]) == 0
    assert load_checkpoint(out / "last.pt")["train_config"]["placement"] == "keep"
    _, pol = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                         checkpoint=out / "last.pt")
    assert pol.placement == "keep"


def test_the_training_rollout_executes_the_kept_placement():
    from core_env.forecast import WLSForecaster
    from mara_agents.baselines.placement import keep_nodes, node_slots
    from mara_agents.train.rollout import Rollout

    ro = Rollout(core_env.make_config("CoRE-Small-v0", switch_cost=0.3), 3, WLSForecaster(),
                 "keep")
    ro.reset(0)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(12):
        mask = ro.mask.copy()
        act = np.array([[rng.choice(np.flatnonzero(m)) for m in env] for env in mask])
        last, held = node_slots(ro.obs, ro.plain_layout)
        want = np.stack([keep_nodes(a, la, h, m) for a, la, h, m in zip(act, last, held, mask, strict=False)])
        _, done, _ = ro.step(act)
        new_last, _ = node_slots(ro.obs, ro.plain_layout)
        seen = (new_last >= 0) & ~done[:, None]  # trained a task that is still visible
        np.testing.assert_array_equal(new_last[seen], want[seen] - 1)
        checked += int(seen.sum())
    assert checked > 0
    with pytest.raises(ValueError, match="placement"):
        Rollout(core_env.make_config("CoRE-Small-v0"), 1, WLSForecaster(), "kept")


def test_auto_placement_keeps_nodes_on_the_live_wall_clock(tiny_run):
    """A live env on the wall clock charges every move in real time (its configuration
    charges none in work), so ``auto`` keeps nodes there and decodes on the work clock."""
    from core_env.live import LiveSchedulerEnv

    ckpt = tiny_run / "last.pt"
    wall_env, wall = make_policy("mara", LiveSchedulerEnv(preset="Live-Small-v0", clock="wall",
                                                          slot_seconds=0.05), checkpoint=ckpt)
    _, work = make_policy("mara", LiveSchedulerEnv(preset="Live-Small-v0"), checkpoint=ckpt)
    env, keep = make_policy("mara", core_env.parallel_env(preset="CoRE-Small-v0"),
                            checkpoint=ckpt, placement="keep")
    model = MARAPolicy(env, ckpt, placement="model")
    differ = 0
    for obs, (a_keep, a_model) in _mara_steps(env, [keep, model], seed=1):
        a_wall = np.array([wall.act(obs)[n] for n in env.possible_agents])
        a_work = np.array([work.act(obs)[n] for n in env.possible_agents])
        np.testing.assert_array_equal(a_wall, a_keep)
        np.testing.assert_array_equal(a_work, a_model)
        differ += int((a_keep != a_model).any())
    assert differ > 0
    wall_env.close()
