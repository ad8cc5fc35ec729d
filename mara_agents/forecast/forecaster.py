"""``FlowMatchingForecaster``: remaining work from sampled future loss trajectories (SPEC §4).

For every task that has been observed and has not yet reached its target:

1. encode the prefix (:func:`~mara_agents.forecast.model.prefix_features`) once;
2. draw S noise vectors ``x0 ~ N(0, I)`` from a ``torch.Generator`` seeded with ``seed`` at
   every call (same inputs and seed give identical outputs) and integrate the learned
   velocity field with a fixed-step ODE solver (``steps`` Euler or midpoint steps) to S
   future log-loss trajectories on the offsets ``d_1 < ... < d_H`` (d_0 = 0, x_0 = 0);
3. per sample, the remaining work is ``s_now * (exp(d*) - 1)`` where ``d*`` is the first
   crossing of the level ``ln eps - ln y_now``, linearly interpolated between grid points;
4. **censored samples** (no crossing within the horizon ``d_H``): if the sample's log-log
   slope over its last ``tail_points`` grid intervals is decreasing (below
   ``-MIN_TAIL_SLOPE`` of :mod:`.crossing`), the crossing is extrapolated along that slope,
   ``d* = d_H + (level - x_H) / slope``; otherwise the sample is "not within sight" and its
   remaining work is :data:`~core_env.forecast.REMAINING_CAP`;
5. calibration (:func:`widen`): the spread of ``ln remaining`` around the task's median
   sample is multiplied by ``spread`` (a temperature fitted on a validation split of the
   *train* mix and stored in the checkpoint; 1 = raw samples); capped samples stay capped;
6. report over the S samples, clipped to [0, REMAINING_CAP]: the mean, the 10/50/90%
   quantiles (``np.quantile``'s, read off the sorted samples by :func:`sorted_quantiles`)
   and ``p_reach``, the fraction of samples with remaining work <= budget and below the
   cap.

Fallbacks (as :class:`~core_env.forecast.WLSForecaster`): a task never observed (length 0)
gets REMAINING_CAP with p_reach 0; a task whose latest loss is at or below its target gets 0
with p_reach 1.

Checkpoints are plain dicts (a format tag, JSON configs, a state dict of tensors) loaded with
``torch.load(..., weights_only=True)``; :meth:`FlowMatchingForecaster.pretrained` loads the
one shipped in ``mara_agents/forecast/weights/``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core_env.forecast.protocol import REMAINING_CAP, BaseForecaster, HistoryBatch, RemainingWork
from core_env.utils.checks import check_int, check_ints
from mara_agents import safe_io
from mara_agents.forecast.crossing import crossing_offsets
from mara_agents.forecast.model import SOLVERS, FlowForecastNet, ModelConfig, prefix_features
from mara_agents.forecast.numpy_sampler import NumpySampler

CHECKPOINT_DIR = Path(__file__).resolve().parent / "weights"
"""Where the shipped checkpoints live."""

DEFAULT_CHECKPOINT = "fm_default"
"""Name (without ``.pt``) of the checkpoint :meth:`FlowMatchingForecaster.pretrained` loads
(the shipped ones: :data:`mara_agents.forecast.registry.FM_CHECKPOINTS`)."""

CHECKPOINT_FORMAT = "mara-fm-forecaster/1"
"""Format tag of the checkpoint dict."""

BACKENDS = ("torch", "numpy")
"""How :class:`FlowMatchingForecaster` integrates the ODE (see its ``backend``)."""

@dataclass(frozen=True)
class SamplerConfig:
    """How trajectories are sampled and turned into remaining work (stored in checkpoints)."""

    samples: int = 32
    """S: trajectories per task."""
    steps: int = 10
    """Fixed ODE solver steps."""
    solver: str = "euler"
    """``"euler"`` or ``"midpoint"``."""
    spread: float = 1.0
    """Calibration temperature: multiplies the spread of ln remaining work around each task's
    median sample (1 = raw samples)."""
    tail_points: int = 8
    """Grid intervals at the end of the horizon whose slope extrapolates censored samples."""

    def __post_init__(self) -> None:
        check_ints(self, ("samples", "steps", "tail_points"), 1)
        if self.solver not in SOLVERS:
            raise ValueError(f"solver: expected one of {SOLVERS}, got {self.solver!r}")
        if not (isinstance(self.spread, (int, float)) and math.isfinite(self.spread)
                and self.spread > 0):
            raise ValueError(f"spread: expected a finite number > 0, got {self.spread!r}")

    @classmethod
    def from_dict(cls, d: dict) -> SamplerConfig:
        """Inverse of ``asdict``; raises ValueError on missing or unknown fields."""
        names = {f.name for f in fields(cls)}
        if not isinstance(d, dict) or set(d) != names:
            got = sorted(d) if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"sampler config: expected fields {sorted(names)}, got {got}")
        return cls(**d)


class FlowMatchingForecaster(BaseForecaster):
    """MARA's conditional flow-matching forecaster (see the module docstring).

    Args:
        net: the trained network (put in eval mode; not modified).
        sampler: sampling settings.
        seed: seeds the noise of every call.
        backend: ``"torch"`` integrates the ODE with the network itself; ``"numpy"`` with a
            numpy snapshot of its weights taken here
            (:class:`~mara_agents.forecast.numpy_sampler.NumpySampler`: the same samples to
            float32 rounding, faster for the few tasks of one environment; the network must
            not change afterwards).
    """

    def __init__(self, net: FlowForecastNet, sampler: SamplerConfig | None = None,
                 seed: int = 0, backend: str = "torch") -> None:
        if not isinstance(net, FlowForecastNet):
            raise ValueError(f"net: expected a FlowForecastNet, got {type(net).__name__}")
        check_int("seed", seed, 0, exact=True)
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        self.net = net.eval()
        self.backend = backend
        self._numpy = NumpySampler(net) if backend == "numpy" else None
        self.sampler = sampler if sampler is not None else SamplerConfig()
        self.seed = seed
        if self.sampler.tail_points >= net.cfg.horizon:
            raise ValueError(f"tail_points: expected < horizon {net.cfg.horizon}, got "
                             f"{self.sampler.tail_points}")

    @property
    def config(self) -> ModelConfig:
        return self.net.cfg

    # ------------------------------------------------------------------ checkpoints
    @classmethod
    def pretrained(cls, name: str = DEFAULT_CHECKPOINT, seed: int = 0, backend: str = "torch",
                   **sampler_overrides: Any) -> FlowMatchingForecaster:
        """The forecaster shipped in ``mara_agents/forecast/weights/<name>.pt``.

        Args:
            name: checkpoint name.
            seed: noise seed.
            backend: ``"torch"`` or ``"numpy"`` (see the class).
            **sampler_overrides: fields of :class:`SamplerConfig` to change (e.g.
                ``samples=64``); the stored ``spread`` was calibrated for the stored values.
        """
        return cls.load(CHECKPOINT_DIR / f"{name}.pt", seed=seed, backend=backend,
                        **sampler_overrides)

    @classmethod
    def load(cls, path: str | Path, seed: int = 0, backend: str = "torch",
             **sampler_overrides: Any) -> FlowMatchingForecaster:
        """Load a checkpoint written by :meth:`save` (``torch.load(weights_only=True)``;
        ``backend`` as for the class).

        The file is checked before it is trusted (:func:`mara_agents.safe_io.load`:
        every zip record's CRC-32, a ``weights_only`` unpickling that refuses code, the
        integrity record and finite weights), then its format and shapes.

        Raises:
            FileNotFoundError: if there is no such file.
            ValueError: naming the file, if it is truncated, corrupted, not a torch zip
                checkpoint, carries anything but tensors and plain data, is not a
                checkpoint of this format, or its config does not match its weights.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no FM forecaster checkpoint at {path}")
        ckpt = safe_io.load(path, "FM forecaster checkpoint")
        net, sampler = from_checkpoint(ckpt, str(path))
        unknown = sorted(set(sampler_overrides) - {f.name for f in fields(SamplerConfig)})
        if unknown:
            raise ValueError(f"sampler overrides: unknown fields {unknown}; expected fields "
                             f"of SamplerConfig")
        return cls(net, replace(sampler, **sampler_overrides), seed=seed, backend=backend)

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint dict: format tag, JSON configs and a state dict of tensors."""
        return {"format": CHECKPOINT_FORMAT,
                "model_config": json.dumps(self.net.cfg.to_dict(), sort_keys=True),
                "sampler_config": json.dumps(asdict(self.sampler), sort_keys=True),
                "state_dict": {k: v.detach().clone().contiguous()
                               for k, v in self.net.state_dict().items()}}

    def save(self, path: str | Path) -> None:
        """Write :meth:`checkpoint` to ``path`` (``.pt``)."""
        safe_io.save(path, self.checkpoint())

    # ------------------------------------------------------------------ forecasting
    def sample_trajectories(self, batch: HistoryBatch, log_targets: np.ndarray,
                            rows: np.ndarray) -> np.ndarray:
        """Sampled future trajectories of selected tasks.

        The noise of task i is row i of one float32[n, S, H] draw from a generator seeded
        with ``seed``, so a task's samples depend only on its inputs and its position.

        Args:
            batch: n padded histories.
            log_targets: float[n] ln eps.
            rows: int[m] tasks to sample (with length > 0).

        Returns:
            float64[m, S, H] trajectories ln l(s_now e^{d_j}) - ln y_now.
        """
        cfg, smp = self.net.cfg, self.sampler
        gen = torch.Generator().manual_seed(self.seed)
        noise = torch.randn((batch.size, smp.samples, cfg.horizon), generator=gen)
        feats = prefix_features(_take(batch, rows), np.asarray(log_targets)[rows], cfg)
        if self._numpy is not None:
            x = self._numpy.sample(feats, noise.numpy()[rows], smp.steps, smp.solver)
        else:
            with torch.inference_mode():
                x = self.net.sample(torch.from_numpy(feats), noise[torch.from_numpy(rows)],
                                    smp.steps, smp.solver).numpy()
        return x.astype(np.float64) * cfg.x_scale

    def sample_remaining(self, batch: HistoryBatch, log_targets: np.ndarray,
                         rows: np.ndarray) -> np.ndarray:
        """Raw remaining work of every sample of the selected tasks (steps 2-4 of the module
        docstring, no calibration): float64[m, S] in (0, REMAINING_CAP]."""
        x = self.sample_trajectories(batch, log_targets, rows)
        x_now, y_now = batch.last()
        level = np.asarray(log_targets)[rows] - y_now[rows]
        d = crossing_offsets(x, level, self.net.cfg.offsets, self.sampler.tail_points)
        s_now = np.exp(x_now[rows])[:, None]
        capped = ~np.isfinite(d) | (d > math.log(2.0 * REMAINING_CAP))
        r = s_now * np.expm1(np.where(capped, 0.0, d))
        return np.where(capped, REMAINING_CAP, np.clip(r, 0.0, REMAINING_CAP))

    def predict_batch(self, batch: HistoryBatch, log_targets: np.ndarray,
                      budgets: np.ndarray) -> RemainingWork:
        """Forecast n tasks (see the module docstring); every field float64[n]."""
        n = batch.size
        _, y_now = batch.last()
        observed = batch.length > 0
        done = observed & (y_now <= log_targets)
        rows = np.flatnonzero(observed & ~done)
        mean, q10, q50, q90 = (np.full(n, REMAINING_CAP) for _ in range(4))
        p_reach = np.zeros(n)
        for arr in (mean, q10, q50, q90):
            arr[done] = 0.0
        p_reach[done] = 1.0
        if rows.size:  # sorted once: widen keeps each row's order
            r = widen(np.sort(self.sample_remaining(batch, log_targets, rows), axis=1),
                      self.sampler.spread, presorted=True)
            q = sorted_quantiles(r, (0.1, 0.5, 0.9))
            mean[rows] = np.clip(r.mean(axis=1), 0.0, REMAINING_CAP)
            q10[rows], q50[rows], q90[rows] = q
            b = np.asarray(budgets, dtype=np.float64)[rows, None]
            p_reach[rows] = np.mean((r <= b) & (r < REMAINING_CAP), axis=1)
        return RemainingWork(mean=mean, q10=q10, q50=q50, q90=q90, p_reach=p_reach)


def sorted_quantiles(r: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    """``np.quantile(r, qs, axis=1)`` (its default linear method, the same arithmetic) of
    rows already sorted in ascending order, without numpy's per-call partitioning:
    float64[len(qs), m]."""
    s = r.shape[1]
    out = np.empty((len(qs), r.shape[0]))
    for i, q in enumerate(qs):
        v = q * (s - 1)
        lo = min(int(math.floor(v)), s - 1)
        hi = min(lo + 1, s - 1)
        t = v - lo
        a, b = r[:, lo], r[:, hi]
        d = b - a  # numpy's _lerp: from the nearer end for t >= 0.5
        out[i] = b - d * (1.0 - t) if t >= 0.5 else a + d * t
    return out


def widen(r: np.ndarray, spread: float, presorted: bool = False) -> np.ndarray:
    """Calibrate samples: scale the spread of ln r around each task's median sample.

    Args:
        r: float[m, S] remaining work per sample in (0, REMAINING_CAP]; samples at the cap
            are "not within sight" and stay there.
        spread: the temperature (1 returns ``r`` unchanged).
        presorted: rows are sorted in ascending order (the median is read off the middle;
            the result is then sorted too, since the map is increasing in r).

    Returns:
        float64[m, S] in [0, REMAINING_CAP]; rows whose median sample is capped are
        unchanged.
    """
    r = np.asarray(r, dtype=np.float64)
    if spread == 1.0:
        return r
    capped = r >= REMAINING_CAP
    log_r = np.log(np.maximum(r, 1e-300))
    censored = np.where(capped, np.inf, log_r)
    if presorted:
        s = r.shape[1]
        med = censored[:, (s - 1) // 2: s // 2 + 1].mean(axis=1, keepdims=True)
    else:
        med = np.median(censored, axis=1, keepdims=True)
    ok = np.isfinite(med)
    med = np.where(ok, med, 0.0)
    widened = np.exp(np.minimum(med + spread * (log_r - med), 50.0))
    out = np.where(ok & ~capped, widened, r)
    return np.clip(out, 0.0, REMAINING_CAP)


def from_checkpoint(ckpt: Any, where: str = "checkpoint") -> tuple[FlowForecastNet,
                                                                    SamplerConfig]:
    """Build the network and sampler settings of a checkpoint dict.

    Raises:
        ValueError: naming what is missing or does not match.
    """
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        fmt = ckpt.get("format") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ValueError(f"{where}: expected a dict with format {CHECKPOINT_FORMAT!r}, "
                         f"got {fmt!r}")
    for key in ("model_config", "sampler_config", "state_dict"):
        if key not in ckpt:
            raise ValueError(f"{where}: missing {key!r}")
    try:
        model_cfg = ModelConfig.from_dict(json.loads(ckpt["model_config"]))
        sampler = SamplerConfig.from_dict(json.loads(ckpt["sampler_config"]))
    except (TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"{where}: malformed config ({e})") from e
    state = ckpt["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"{where}: state_dict: expected a dict of tensors")
    with torch.device("meta"):
        net = FlowForecastNet(model_cfg)
    expected = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}
    if expected != got or len(got) != len(state):
        missing = sorted(set(expected) - set(got))
        unknown = sorted(set(state) - set(expected))
        shapes = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])
        raise ValueError(f"{where}: weights do not match the model config (missing "
                         f"{missing}, unknown {unknown}, wrong shapes {shapes})")
    net = net.to_empty(device="cpu")
    net.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})
    net.freqs.copy_(math.pi * 2.0 ** torch.arange(model_cfg.time_freqs, dtype=torch.float32))
    return net.eval(), sampler


def _take(batch: HistoryBatch, rows: np.ndarray) -> HistoryBatch:
    return HistoryBatch(batch.log_work[rows], batch.log_loss[rows], batch.length[rows],
                        batch.key[rows])
