"""``FlowMatchingForecaster``: protocol, fallbacks, determinism, crossings, checkpoints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from core_env.forecast import REMAINING_CAP, CurveHistory, Forecaster
from core_env.forecast.cases import make_cases
from mara_agents.forecast import (
    CHECKPOINT_DIR,
    FlowForecastNet,
    FlowMatchingForecaster,
    ModelConfig,
    SamplerConfig,
    crossing_offsets,
)
from mara_agents.forecast.crossing import crossing_offsets_numpy
from mara_agents.forecast.forecaster import sorted_quantiles, widen

SMALL = ModelConfig(history_len=4, horizon=8, enc_hidden=16, ctx_dim=8, hidden=16)


def small_fm(seed: int = 0, **sampler) -> FlowMatchingForecaster:
    """A randomly initialised network whose samples vary (non-zero output layer)."""
    net = FlowForecastNet.create(SMALL, torch.Generator().manual_seed(0))
    with torch.no_grad():
        net.out.weight.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(1))
        net.out.bias.fill_(-0.5)  # trajectories drift down: most samples cross
    return FlowMatchingForecaster(net, SamplerConfig(**{"samples": 16, "steps": 4,
                                                        "tail_points": 2, **sampler}), seed)


@pytest.fixture(scope="module")
def cases():
    return make_cases(np.random.default_rng(0), "train", 40, (0.1, 0.5))


def _histories(cases, idx):
    b = cases.batch
    return [CurveHistory(np.exp(b.log_work[i, :b.length[i]]),
                         np.exp(b.log_loss[i, :b.length[i]])) for i in idx]


def test_protocol_and_output(cases):
    fm = small_fm()
    assert isinstance(fm, Forecaster)
    n = 10
    rw = fm.predict(_histories(cases, range(n)), np.exp(cases.log_targets[:n]),
                    np.full(n, 50.0))
    rw.check(n)
    assert all(np.asarray(a).shape == (n,) for a in rw)
    assert np.all(rw.q10 <= rw.q50) and np.all(rw.q50 <= rw.q90)


def test_fallbacks():
    """Never observed: the cap with p_reach 0; already at the target: 0 with p_reach 1."""
    fm = small_fm()
    hist = [CurveHistory(np.array([]), np.array([])),
            CurveHistory(np.array([1.0, 2.0]), np.array([1.0, 0.4])),
            CurveHistory(np.array([1.0, 2.0]), np.array([1.0, 0.8]))]
    rw = fm.predict(hist, np.array([0.5, 0.5, 0.5]), np.full(3, 100.0))
    for f in ("mean", "q10", "q50", "q90"):
        assert getattr(rw, f)[0] == REMAINING_CAP and getattr(rw, f)[1] == 0.0
    assert rw.p_reach[0] == 0.0 and rw.p_reach[1] == 1.0
    assert 0.0 < rw.q50[2] <= REMAINING_CAP


def test_same_seed_same_output_other_seed_differs(cases):
    args = (cases.batch, cases.log_targets, np.full(cases.batch.size, 30.0))
    a = small_fm(seed=5).predict_batch(*args)
    b = small_fm(seed=5).predict_batch(*args)
    c = small_fm(seed=6).predict_batch(*args)
    for x, y in zip(a, b, strict=False):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.q50, c.q50)
    # repeated calls on one forecaster are identical too (the generator is seeded per call)
    fm = small_fm(seed=5)
    np.testing.assert_array_equal(fm.predict_batch(*args).mean, fm.predict_batch(*args).mean)


def test_p_reach_is_monotone_in_the_budget(cases):
    fm = small_fm()
    n = cases.batch.size
    ps = [fm.predict_batch(cases.batch, cases.log_targets, np.full(n, b)).p_reach
          for b in (0.0, 1.0, 5.0, 20.0, 100.0, 1e9)]
    assert np.all(np.diff(np.stack(ps), axis=0) >= 0)
    assert ps[-1].max() > ps[0].max()


def test_crossing_offsets_by_hand():
    """Grid d = 1, 2, 3, 4 (d_0 = 0, x_0 = 0), tail slope over the last 2 intervals.

    a: x = -0.5 d reaches -1.25 at d = 2.5 (between grid points 2 and 3);
    b: reaches level -0.2 inside the first interval (0, 1] at d = 0.4;
    c: censored, tail slope (-1.0 + 0.8) / 2 = -0.1 -> d = 4 + (-1.5 + 1.0) / -0.1 = 9;
    d: censored with a flat tail -> inf.
    """
    offsets = np.array([1.0, 2.0, 3.0, 4.0])
    x = np.array([[[-0.5, -1.0, -1.5, -2.0]],
                  [[-0.5, -1.0, -1.5, -2.0]],
                  [[-0.6, -0.8, -0.9, -1.0]],
                  [[-0.3, -0.5, -0.5, -0.5]]])
    for fn in (crossing_offsets, crossing_offsets_numpy):
        d = fn(x, np.array([-1.25, -0.2, -1.5, -1.0]), offsets, tail_points=2)
        np.testing.assert_allclose(d[:3, 0], [2.5, 0.4, 9.0])
        assert d[3, 0] == np.inf


@pytest.mark.parametrize("solver", ["euler", "midpoint"])
def test_compiled_sampler_passes_are_numpys_bit_for_bit(monkeypatch, solver):
    """With numba, the numpy sampler's elementwise passes run compiled: the same samples, bit
    for bit, as numpy's passes, on the shipped network for 1 to 40 tasks."""
    pytest.importorskip("numba")
    from mara_agents.forecast import numpy_sampler

    assert numpy_sampler.KERNELS == "numba"
    sampler = FlowMatchingForecaster.pretrained(backend="numpy")._numpy
    rng = np.random.default_rng(5)
    for m in (1, 3, 40):
        feats = rng.standard_normal((m, sampler.encoder[0][0].shape[0])).astype(np.float32)
        x0 = rng.standard_normal((m, 32, 32)).astype(np.float32)
        compiled = sampler.sample(feats, x0, 10, solver)
        with monkeypatch.context() as mp:
            mp.setattr(numpy_sampler, "_kernels", None)
            reference = sampler.sample(feats, x0, 10, solver)
        assert np.array_equal(compiled.view(np.int32), reference.view(np.int32))


@pytest.mark.parametrize("seed", range(4))
def test_compiled_crossings_are_numpys_bit_for_bit(seed):
    """The compiled kernel (with numba) gives the numpy reference's bits: random walks that
    cross at the first point, inside, exactly on a grid value, or never (tails decreasing,
    flat or rising), and the shipped FM's own samples."""
    pytest.importorskip("numba")
    from mara_agents.forecast import crossing

    assert crossing.CROSSING == "numba"
    rng = np.random.default_rng(seed)
    offsets = ModelConfig().offsets
    x = np.cumsum(rng.normal(-0.04, 0.08, size=(50, 32, offsets.size)), axis=2)
    x[:5, :, 3:] = x[:5, :, 3:4]  # flat tails
    x[5:10] = -x[5:10]  # rising walks
    level = -rng.uniform(0.0, 1.5, 50)
    level[10:15] = x[10:15, 0, 7]  # exactly on a grid value of the first sample
    for tail in (1, 8, offsets.size - 1):
        want = crossing.crossing_offsets_numpy(x, level, offsets, tail)
        got = crossing.crossing_offsets(x, level, offsets, tail)
        assert np.array_equal(got.view(np.int64), want.view(np.int64))
    assert np.isinf(want).any() and (np.isfinite(want) & (want > offsets[-1])).any()
    fm = FlowMatchingForecaster.pretrained()
    batch = make_cases(np.random.default_rng(seed), "train", 40, 0.2).batch
    samples = fm.sample_trajectories(batch, np.full(40, -0.9), np.arange(40))
    lev = -0.9 - batch.last()[1]
    assert np.array_equal(crossing.crossing_offsets(samples, lev, offsets, 8),
                          crossing.crossing_offsets_numpy(samples, lev, offsets, 8))


def test_widen():
    r = np.array([[1.0, math.e, math.e ** 2, REMAINING_CAP]])
    np.testing.assert_array_equal(widen(r, 1.0), r)
    # median of the uncapped-as-inf row is between e and e^2 -> ln-median 1.5
    w = widen(r, 2.0)
    np.testing.assert_allclose(np.log(w[0, :3]), [1.5 + 2 * (0 - 1.5), 1.5 + 2 * (1 - 1.5),
                                                  1.5 + 2 * (2 - 1.5)])
    assert w[0, 3] == REMAINING_CAP


@pytest.mark.parametrize("s", [1, 2, 5, 32])
def test_presorted_widen_and_quantiles_equal_numpys(s):
    """Sorting first, as predict_batch does, gives np.quantile's numbers bit for bit: the
    widened rows stay sorted and the quantiles use numpy's interpolation."""
    rng = np.random.default_rng(s)
    r = np.exp(rng.normal(2.0, 2.0, size=(40, s)))
    r[rng.random(r.shape) < 0.3] = REMAINING_CAP
    for spread in (1.0, 0.7, 1.3):
        ref = np.quantile(widen(r, spread), (0.1, 0.5, 0.9), axis=1)
        rs = widen(np.sort(r, axis=1), spread, presorted=True)
        assert np.all(np.diff(rs, axis=1) >= 0)
        np.testing.assert_array_equal(sorted_quantiles(rs, (0.1, 0.5, 0.9)), ref)
        np.testing.assert_array_equal(np.sort(widen(r, spread), axis=1), rs)


def test_checkpoint_round_trip(tmp_path, cases):
    fm = small_fm(spread=1.3)
    path = tmp_path / "fm.pt"
    fm.save(path)
    loaded = FlowMatchingForecaster.load(path)
    assert loaded.sampler == fm.sampler and loaded.config == fm.config
    args = (cases.batch, cases.log_targets, np.full(cases.batch.size, 30.0))
    for x, y in zip(fm.predict_batch(*args), loaded.predict_batch(*args), strict=False):
        np.testing.assert_array_equal(x, y)
    assert FlowMatchingForecaster.load(path, samples=4, seed=3).sampler.samples == 4
    with pytest.raises(ValueError, match="unknown fields"):
        FlowMatchingForecaster.load(path, temperature=2.0)


def test_bad_checkpoints_are_rejected(tmp_path):
    fm = small_fm()
    good = fm.checkpoint()

    def write(obj, name):
        p = tmp_path / name
        torch.save(obj, p)
        return p

    wrong_size = {**good, "model_config": json.dumps({**SMALL.to_dict(), "hidden": 32})}
    with pytest.raises(ValueError, match="do not match"):
        FlowMatchingForecaster.load(write(wrong_size, "a.pt"))
    unknown = {**good, "model_config": json.dumps({**SMALL.to_dict(), "depth": 3})}
    with pytest.raises(ValueError, match="unknown"):
        FlowMatchingForecaster.load(write(unknown, "b.pt"))
    missing = {k: v for k, v in good.items() if k != "state_dict"}
    with pytest.raises(ValueError, match="state_dict"):
        FlowMatchingForecaster.load(write(missing, "c.pt"))
    with pytest.raises(ValueError, match="format"):
        FlowMatchingForecaster.load(write({**good, "format": "other/9"}, "d.pt"))
    extra = {**good, "state_dict": {**good["state_dict"], "extra.weight": torch.zeros(2)}}
    with pytest.raises(ValueError, match="extra.weight"):
        FlowMatchingForecaster.load(write(extra, "e.pt"))
    (tmp_path / "f.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable"):
        FlowMatchingForecaster.load(tmp_path / "f.pt")
    with pytest.raises(FileNotFoundError):
        FlowMatchingForecaster.load(tmp_path / "missing.pt")


@pytest.mark.parametrize("name", ["fm_v1", "fm_default"])
def test_pretrained_checkpoint(cases, name):
    path = CHECKPOINT_DIR / f"{name}.pt"
    assert path.stat().st_size <= 5 * 1024 * 1024
    ckpt = torch.load(path, map_location="cpu", weights_only=True)  # plain data only
    assert ckpt["format"] == "mara-fm-forecaster/1"
    assert json.loads((CHECKPOINT_DIR / f"{name}.json").read_text())["sampler_config"] \
        == json.loads(ckpt["sampler_config"])
    fm = FlowMatchingForecaster.pretrained(name)
    n = cases.batch.size
    rw = fm.predict_batch(cases.batch, cases.log_targets, np.full(n, 1e9)).check(n)
    ok = np.isfinite(cases.remaining) & (cases.remaining > 0)
    assert rw.q50[ok].min() > 0


def test_fm_v1_is_what_the_train_command_builds_with_real_curves():
    """``fm_v1.json`` records mara-train-forecaster's defaults but for the real weight and
    the output file (``--real-weight 0.25 --out .../fm_v1.pt``)."""
    from dataclasses import asdict

    from mara_agents.forecast.train import TrainConfig

    want = json.loads(json.dumps(asdict(TrainConfig(
        real_weight=0.25, out=str(Path("mara_agents/forecast/weights/fm_v1.pt"))))))
    v1 = json.loads((CHECKPOINT_DIR / "fm_v1.json").read_text())["train_config"]
    mine = ("sampler", "progress")  # the fitted spread; a progress bar
    assert {k: v for k, v in v1.items() if k not in mine} \
        == {k: v for k, v in want.items() if k not in mine}
    v0 = json.loads((CHECKPOINT_DIR / "fm_default.json").read_text())["train_config"]
    assert v0.get("real_weight", 0.0) == TrainConfig().real_weight == 0  # recorded before
    # the field existed


def test_forecasters_by_name_keep_their_checkpoints():
    """A MARA checkpoint names its forecaster: ``fm`` and ``fm-v1`` are two different
    networks, so a checkpoint trained on one never reads the other's columns."""
    from mara_agents.forecast.registry import DEFAULT_FORECASTER, FM_CHECKPOINTS, make_forecaster

    assert DEFAULT_FORECASTER in FM_CHECKPOINTS
    nets = {name: make_forecaster(name).net for name in FM_CHECKPOINTS}
    for name, net in nets.items():
        want = FlowMatchingForecaster.pretrained(FM_CHECKPOINTS[name]).net
        assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(),
                                                     want.state_dict().values(), strict=False))
    a, b = (list(n.state_dict().values()) for n in nets.values())
    assert not all(torch.equal(x, y) for x, y in zip(a, b, strict=False))
    with pytest.raises(ValueError, match="fm-v1"):
        make_forecaster("fm-v2")


@pytest.mark.parametrize("solver", ["euler", "midpoint"])
def test_numpy_backend_matches_torch(cases, solver):
    """The numpy sampler integrates the same ODE: the same trajectories to float32 rounding
    (on the shipped network and on a small one with 3 velocity layers), hence the same
    forecasts up to the rounding that extrapolated crossings amplify; the snapshot is of the
    weights at construction."""
    cfg = ModelConfig(history_len=4, horizon=8, enc_hidden=16, enc_layers=2, ctx_dim=8,
                      hidden=16, layers=3)
    small = FlowForecastNet.create(cfg, torch.Generator().manual_seed(3))
    with torch.no_grad():
        small.out.weight.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(4))
    shipped = FlowMatchingForecaster.pretrained().net
    for net in (small, shipped):
        smp = SamplerConfig(samples=8, steps=5, solver=solver, tail_points=2)
        fms = [FlowMatchingForecaster(net, smp, seed=2, backend=b) for b in ("torch", "numpy")]
        rows = np.flatnonzero(cases.batch.length > 0)
        xs = [fm.sample_trajectories(cases.batch, cases.log_targets, rows) for fm in fms]
        assert xs[0].shape == xs[1].shape == (rows.size, 8, net.cfg.horizon)
        scale = np.abs(xs[0]).max()
        assert scale > 0.1 and np.abs(xs[0] - xs[1]).max() <= 1e-5 * scale
        n = cases.batch.size
        rws = [fm.predict_batch(cases.batch, cases.log_targets, np.full(n, 50.0)) for fm in fms]
        for f in ("q10", "q50", "q90", "mean"):  # extrapolated crossings amplify rounding
            np.testing.assert_allclose(getattr(rws[1], f), getattr(rws[0], f), rtol=2e-3)
    fm = FlowMatchingForecaster(small, SamplerConfig(samples=4, steps=2, tail_points=2),
                                backend="numpy")
    before = fm.sample_trajectories(cases.batch, cases.log_targets, rows[:3])
    with torch.no_grad():
        small.out.bias.add_(1.0)
    assert np.array_equal(fm.sample_trajectories(cases.batch, cases.log_targets, rows[:3]),
                          before)


def test_bad_backend_is_rejected():
    with pytest.raises(ValueError, match="backend"):
        small_fm().__class__(small_fm().net, backend="jax")


def test_numpy_sampler_rejects_bad_solver_settings():
    from mara_agents.forecast.numpy_sampler import NumpySampler

    ns = NumpySampler(small_fm().net)
    feats = np.zeros((1, SMALL.feature_dim), dtype=np.float32)
    x0 = np.zeros((1, 2, SMALL.horizon), dtype=np.float32)
    with pytest.raises(ValueError, match="solver"):
        ns.sample(feats, x0, 2, solver="rk4")
    with pytest.raises(ValueError, match="steps"):
        ns.sample(feats, x0, 0)
    assert ns.sample(feats, x0, 2).shape == x0.shape
