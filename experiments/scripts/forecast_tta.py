"""Forecast test-time averaging for a MARA checkpoint (docs/experiments.md, "What was tried").

    python experiments/scripts/forecast_tta.py mara_agents/weights/mara_default.pt 1,4,2 100 48

Runs one episode per seed (``seed0 .. seed0 + n - 1``) of ``CoRE-v0`` on the batched
simulator with greedy MARA, once for every K in the list. K = 1 is plain MARA (the FM noise
seed 0, as in training). K > 1 computes the forecast columns K times with independent FM
noise (noise seeds 7 .. 6 + K) and decodes with the mean of the MAT's pointer scores over the
K inputs at every node position (the same conditioning and sequential mask), i.e. an
ensemble of one MAT over forecast draws. Prints each K's mean completion rate and the
paired difference of every K to the first, with its standard error.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

import core_env
from core_env.forecast.cache import ForecastCache
from mara_agents.forecast import FlowMatchingForecaster
from mara_agents.mat import MAT, Inputs
from mara_agents.mat.checkpoint import load_checkpoint, model_from_checkpoint, wrapped_layout
from mara_agents.mat.ensemble import decode_scores
from mara_agents.mat.inputs import inputs_from_batched


def act_over_inputs(model: MAT, xs: list[Inputs]) -> torch.Tensor:
    """Greedy joint action from the mean of one MAT's pointer scores over several inputs
    that differ only in their forecast columns (``mat.ensemble.decode_scores``, the decoding of
    ``mat.ensemble.ensemble_act``, with the same MAT as every member)."""
    parts = []
    for x in xs:
        h, tok, _ = model.encode(x)
        parts.append(model._pointer(h, tok))
    return decode_scores([model] * len(xs), parts, xs[0])


def completion_rates(blob: dict, k: int, seeds: list[int]) -> np.ndarray:
    cfg = blob["train_config"]
    env = core_env.make_batched("CoRE-v0", num_envs=len(seeds), seed=seeds)
    layout = wrapped_layout(env.layout)
    model = model_from_checkpoint(blob, layout)
    noise = [0] if k == 1 else list(range(7, 7 + k))
    caches = [ForecastCache(FlowMatchingForecaster.pretrained(
        seed=s, steps=cfg["fm_steps"], samples=cfg["fm_samples"]), len(seeds), layout.n_slots)
        for s in noise]
    obs, mask = env.reset()
    rate = np.full(len(seeds), np.nan)
    while np.isnan(rate).any():
        xs = [inputs_from_batched(obs, mask, env.layout, c.update(env.sim)) for c in caches]
        with torch.no_grad():
            a = model.act(xs[0], deterministic=True)[0] if k == 1 else act_over_inputs(model, xs)
        obs, mask, _, done, info = env.step(a.numpy())
        ep = info["episode"]
        for j, e in enumerate(ep["env"]):
            if np.isnan(rate[e]):
                rate[e] = ep["completion_rate"][j]
        if done.any():
            for c in caches:
                c.reset(done)
    return rate


def main() -> None:
    if len(sys.argv) != 5:
        raise SystemExit("usage: forecast_tta.py CHECKPOINT K1,K2,... FIRST_SEED N_SEEDS")
    torch.set_num_threads(1)
    path, ks = sys.argv[1], [int(k) for k in sys.argv[2].split(",")]
    first, n = int(sys.argv[3]), int(sys.argv[4])
    blob = load_checkpoint(path)
    seeds = list(range(first, first + n))
    res = {}
    for k in ks:
        t0 = time.perf_counter()
        res[k] = completion_rates(blob, k, seeds)
        print(f"K={k}: {100 * res[k].mean():.2f}% ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    for k in ks[1:]:
        d = 100 * (res[k] - res[ks[0]])
        print(f"K={k} - K={ks[0]}: {d.mean():+.2f} (standard error "
              f"{d.std(ddof=1) / np.sqrt(len(d)):.2f})")


if __name__ == "__main__":
    main()
