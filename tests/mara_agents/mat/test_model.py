"""MAT: autoregressive vs teacher-forced log-probs, masks, the MAT-Dec variant, inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import core_env
from core_env.forecast import LossForecastWrapper, WLSForecaster
from core_env.forecast.cache import ForecastCache
from core_env.masks import sequential_masks
from mara_agents.mat.checkpoint import wrapped_layout
from mara_agents.mat.ensemble import decode_scores, ensemble_act
from mara_agents.mat.inputs import inputs_from_batched, split_observations
from mara_agents.mat.model import MAT, Inputs, MATConfig, init_weights
from mara_agents.mat.numpy_infer import NumpyEnsemble, NumpyMAT

N, K = 6, 5


def _layout():
    return wrapped_layout(core_env.make_batched("CoRE-Small-v0", 1).layout.__class__(
        *_plain_fields()))


def _plain_fields():
    lay = core_env.make_batched("CoRE-Small-v0", 1).layout
    return (lay.global_features, lay.node_features, lay.task_features, 1, K, N)


def _random_inputs(b: int, seed: int) -> Inputs:
    """Random inputs with small caps (capacity runs out along the sequence) and random
    per-node masks (idle always legal)."""
    g = torch.Generator().manual_seed(seed)
    lay = _layout()
    tasks = torch.rand(b, K, lay.task_size, generator=g)
    present = torch.rand(b, K, generator=g) < 0.8
    tasks[..., 0] = present.float()
    mask = (torch.rand(b, N, K + 1, generator=g) < 0.8) & torch.cat(
        [torch.ones(b, 1, dtype=torch.bool), present], dim=1)[:, None, :]
    mask[..., 0] = True
    cap = torch.randint(1, 3, (b, K), generator=g).float()
    return Inputs(torch.rand(b, lay.global_size, generator=g),
                  torch.rand(b, N, lay.node_size, generator=g), tasks, mask, cap,
                  torch.rand(b, N, generator=g) + 0.5)


def _model(autoregressive: bool = True, seed: int = 0) -> MAT:
    m = MAT(MATConfig(d_model=16, heads=2, ff=32, dec_hidden=4,
                      autoregressive=autoregressive), _layout())
    init_weights(m, torch.Generator().manual_seed(seed))
    # sharpen the scores so that the test exercises non-uniform distributions
    with torch.no_grad():
        m.q_node.weight.mul_(30.0)
        m.a_node.weight.mul_(30.0)
    return m.eval()


@pytest.mark.parametrize("deterministic", [False, True])
def test_autoregressive_and_teacher_forced_log_probs_agree(deterministic):
    x = _random_inputs(64, seed=1)
    m = _model()
    with torch.no_grad():
        a, logp, v = m.act(x, deterministic=deterministic,
                           generator=torch.Generator().manual_seed(2))
        logp_tf, ent, v_tf = m.evaluate(x, a)
    assert torch.allclose(logp, logp_tf, atol=1e-5)
    assert torch.allclose(v, v_tf)
    assert (ent >= -1e-6).all()
    # the capacity rule really bites along the sequence in this batch
    counts = torch.nn.functional.one_hot(a, K + 1)[..., 1:].sum(1)
    assert (counts == x.cap.long()).any()


def test_sampled_actions_respect_the_sequential_masks_and_caps():
    x = _random_inputs(256, seed=3)
    m = _model()
    with torch.no_grad():
        a, logp, _ = m.act(x, generator=torch.Generator().manual_seed(4))
    seq = sequential_masks(x.mask.numpy().astype(np.int8), x.cap.numpy().astype(np.int64),
                           a.numpy())
    chosen = np.take_along_axis(seq, a.numpy()[..., None], axis=-1)[..., 0]
    assert (chosen == 1).all()
    counts = torch.nn.functional.one_hot(a, K + 1)[..., 1:].sum(1)
    assert (counts <= x.cap.long()).all()
    assert torch.isfinite(logp).all() and (logp <= 0).all()


def test_teacher_forcing_depends_on_earlier_actions_only():
    """Changing node j's action changes the log-probs of later nodes (through the
    conditioning) and never those of earlier ones."""
    x = _random_inputs(32, seed=5)
    x = x._replace(cap=torch.full_like(x.cap, 6.0), mask=torch.ones_like(x.mask))
    m = _model()
    a = torch.zeros(32, N, dtype=torch.long)
    b = a.clone()
    b[:, 2] = 1
    with torch.no_grad():
        la, _, _ = m.evaluate(x, a)
        lb, _, _ = m.evaluate(x, b)
    assert torch.equal(la[:, :2], lb[:, :2])
    assert not torch.allclose(la[:, 3:], lb[:, 3:])


def test_mat_dec_heads_ignore_earlier_actions():
    x = _random_inputs(32, seed=6)
    m = _model(autoregressive=False)
    a = torch.zeros(32, N, dtype=torch.long)
    b = a.clone()
    b[:, 0] = 1
    with torch.no_grad():
        la, _, _ = m.evaluate(x, a)
        lb, _, _ = m.evaluate(x, b)
    assert torch.equal(la[:, 1:], lb[:, 1:])


@pytest.mark.parametrize("autoregressive", [True, False])
def test_numpy_greedy_path_equals_the_torch_greedy_path(autoregressive):
    x = _random_inputs(128, seed=8)
    m = _model(autoregressive=autoregressive)
    with torch.no_grad():
        ref = m.act(x, deterministic=True)[0].numpy()
        h, tok, _ = m.encode(x)
    fast = NumpyMAT(m)
    h_np, tok_np, pad = fast.encode(x.glob.numpy(), x.nodes.numpy(), x.tasks.numpy())
    assert np.allclose(h_np, h.numpy(), atol=1e-5)
    present = ~pad  # padded task tokens are never chosen nor attended to
    assert np.allclose(tok_np[present], tok.numpy()[present], atol=1e-5)
    assert np.array_equal(fast.act(x), ref)
    # one environment at a time (how MARAPolicy calls it) gives the same actions
    one = [fast.act(Inputs(*(t[i:i + 1] for t in x))) for i in range(8)]
    assert np.array_equal(np.concatenate(one), ref[:8])


def test_numpy_snapshot_does_not_follow_later_weight_changes():
    x = _random_inputs(32, seed=12)
    m = _model()
    fast = NumpyMAT(m)
    before = fast.act(x)
    with torch.no_grad():
        m.q_node.weight.neg_()
        changed = m.act(x, deterministic=True)[0].numpy()
    assert not np.array_equal(changed, before)
    assert np.array_equal(fast.act(x), before)
    assert np.array_equal(NumpyMAT(m).act(x), changed)


def test_greedy_decoding_is_deterministic():
    x = _random_inputs(16, seed=7)
    m = _model()
    with torch.no_grad():
        a1 = m.act(x, deterministic=True)[0]
        a2 = m.act(x, deterministic=True, generator=torch.Generator().manual_seed(9))[0]
    assert torch.equal(a1, a2)


def test_batched_inputs_equal_wrapped_pettingzoo_inputs():
    """Training inputs (batched simulator + ForecastCache) are exactly the inputs MARA gets
    at evaluation (PettingZoo env + LossForecastWrapper(cache=True))."""
    seed = 11
    env = LossForecastWrapper(core_env.parallel_env(preset="CoRE-Small-v0"), WLSForecaster(),
                              cache=True)
    obs, _ = env.reset(seed=seed)
    benv = core_env.make_batched("CoRE-Small-v0", 1, seed=[seed])
    bobs, bmask = benv.reset()
    cache = ForecastCache(WLSForecaster(), 1, benv.layout.n_slots)
    rng = np.random.default_rng(0)
    agents = env.possible_agents
    for t in range(25):
        o = np.stack([obs[a]["observation"] for a in agents])[None]
        mk = np.stack([obs[a]["action_mask"] for a in agents])[None]
        x1 = split_observations(o, mk, env.layout)
        x2 = inputs_from_batched(bobs, bmask, benv.layout, cache.update(benv.sim))
        for f in Inputs._fields:
            assert torch.equal(getattr(x1, f), getattr(x2, f)), (t, f)
        acts = np.array([rng.integers(0, mk.shape[-1]) for _ in agents])
        obs, *_ = env.step({a: int(acts[i]) for i, a in enumerate(agents)})
        bobs, bmask, *_ = benv.step(acts[None])
        if not env.agents:
            break
    assert cache.forecasts > 0


def test_split_observations_rejects_a_wrong_layout():
    env = core_env.make_batched("CoRE-Small-v0", 2, seed=0)
    obs, mask = env.reset()
    with pytest.raises(ValueError, match="expected shape"):
        split_observations(obs, mask, wrapped_layout(env.layout))


def test_config_validation():
    with pytest.raises(ValueError, match="heads"):
        MATConfig(d_model=30, heads=4)
    with pytest.raises(ValueError, match="d_model"):
        MATConfig(d_model=0)
    with pytest.raises(ValueError, match="autoregressive"):
        MATConfig(autoregressive=1)


# ------------------------------------------------------------------------------ ensembles
def test_an_ensemble_of_one_decodes_like_its_member():
    x = _random_inputs(64, seed=11)
    m = _model(seed=3)
    with torch.no_grad():
        ref = m.act(x, deterministic=True)[0]
        assert torch.equal(ensemble_act([m], x), ref)
    assert np.array_equal(NumpyEnsemble([m]).act(x), ref.numpy())


def test_ensemble_greedy_maximises_the_summed_member_log_probs_at_every_position():
    """Checked against each member's own teacher-forced log-probs: at node i, with the
    ensemble's earlier choices, the chosen action has the largest sum of the members'
    log-probs among the actions the sequential mask allows (a geometric-mean ensemble)."""
    x = _random_inputs(48, seed=12)
    models = [_model(seed=s) for s in (4, 5, 6)]
    with torch.no_grad():
        a = ensemble_act(models, x)
        members = [m.act(x, deterministic=True)[0] for m in models]
        assert all(not torch.equal(a, b) for b in members)  # not any one member
        seq = torch.as_tensor(sequential_masks(x.mask.numpy().astype(np.int8),
                                               x.cap.numpy().astype(np.int64), a.numpy()))
        for i in range(N):
            scores = torch.full((48, K + 1), -float("inf"))
            for alt in range(K + 1):
                b = a.clone()
                b[:, i] = alt
                total = sum(m.evaluate(x, b)[0][:, i] for m in models)
                scores[:, alt] = torch.where(seq[:, i, alt] == 1, total, -float("inf"))
            chosen = scores.gather(1, a[:, i:i + 1]).squeeze(1)
            assert (chosen >= scores.max(1).values - 1e-4).all()


def test_numpy_ensemble_equals_the_torch_ensemble():
    x = _random_inputs(128, seed=13)
    models = [_model(seed=s) for s in (7, 8, 9, 10)]
    with torch.no_grad():
        ref = ensemble_act(models, x).numpy()
    assert np.array_equal(NumpyEnsemble(models).act(x), ref)


def test_sampled_ensemble_actions_respect_the_sequential_masks_and_caps():
    x = _random_inputs(256, seed=14)
    models = [_model(seed=s) for s in (1, 2)]
    with torch.no_grad():
        a = ensemble_act(models, x, deterministic=False,
                         generator=torch.Generator().manual_seed(0))
        again = ensemble_act(models, x, deterministic=False,
                             generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, again)
    assert not torch.equal(a, ensemble_act(models, x))  # it samples
    seq = sequential_masks(x.mask.numpy().astype(np.int8), x.cap.numpy().astype(np.int64),
                           a.numpy())
    assert (np.take_along_axis(seq, a.numpy()[..., None], axis=-1) == 1).all()


def test_decoding_members_with_inputs_of_their_own():
    """decode_scores with member j scored on its own inputs: one MAT on two inputs that
    differ only in the task features decodes like neither input alone, and like the
    two-member ensemble of that MAT on one input when both inputs are the same."""
    x = _random_inputs(64, seed=15)
    y = x._replace(tasks=x.tasks + 0.5 * torch.randn(x.tasks.shape,
                                                     generator=torch.Generator().manual_seed(1)))
    m = _model(seed=3)

    def parts(inp):
        h, tok, _ = m.encode(inp)
        return m._pointer(h, tok)

    with torch.no_grad():
        assert torch.equal(decode_scores([m, m], [parts(x), parts(x)], x),
                           m.act(x, deterministic=True)[0])
        both = decode_scores([m, m], [parts(x), parts(y)], x)
        assert not torch.equal(both, m.act(x, deterministic=True)[0])
        assert not torch.equal(both, m.act(y, deterministic=True)[0])
        with pytest.raises(ValueError, match="one \\(qk, a_node, a_tok\\) per member"):
            decode_scores([m, m], [parts(x)], x)


def test_ensembles_refuse_members_that_do_not_fit():
    with pytest.raises(ValueError, match="at least one"):
        NumpyEnsemble([])
    with pytest.raises(ValueError, match="at least one"):
        ensemble_act([], _random_inputs(2, seed=0))
    with pytest.raises(ValueError, match=r"models\[1\]: a MAT-Dec member"):
        NumpyEnsemble([_model(), _model(autoregressive=False)])
    wide = MAT(MATConfig(d_model=32, heads=2, ff=32, dec_hidden=4), _layout())
    with pytest.raises(ValueError, match=r"models\[1\]: sizes"):
        NumpyEnsemble([_model(), wide])
