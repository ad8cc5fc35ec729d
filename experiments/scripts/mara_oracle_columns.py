"""MARA trained and run on the true remaining work (docs/experiments.md, "MARA with perfect
forecasts"): how much of MARA's distance to the oracle-informed greedy scheduler is the
forecaster's.

    python experiments/scripts/mara_oracle_columns.py check CoRE-v0 100 3
    python experiments/scripts/mara_oracle_columns.py train --members 1 --seed 0 --out runs/oracle_s0
    python experiments/scripts/mara_oracle_columns.py score CoRE-v0 100 48 runs/oracle_s0/last.pt ...
    python experiments/scripts/mara_oracle_columns.py train --noise 0.5 --members 1 --out runs/n05
    python experiments/scripts/mara_oracle_columns.py score CoRE-v0 100 48 runs/n05/last.pt --noise 0.5
    python experiments/scripts/mara_oracle_columns.py train --observed --members 1 --out runs/obs_0

``train`` is ``mara-train`` (every flag) with the forecast columns of the batched
simulator replaced by :func:`cached_oracle_columns` (the true remaining work, as the cached
oracle wrapper shows it) in the imitation stage and in PPO; the FM forecaster is never
called. The checkpoint's ``train_config`` still names its ``forecaster`` flag: load it only
through ``score``. ``score`` runs greedy MARA for each checkpoint (``mara``: the shipped one)
in ``LossForecastWrapper(env, OracleForecaster.for_env(env), cache=True)`` on the seeds
``offset .. offset + n - 1`` of a preset, with LARA (WLS columns) and the oracle-informed
greedy scheduler on the same seeds, and prints each policy's mean and its paired difference
to LARA (95% t interval). ``check`` runs the oracle-informed greedy scheduler in that wrapper
and asserts that its columns equal :func:`cached_oracle_columns` of the env's own simulator
state at every slot (to 1e-4), i.e. that ``score`` shows a checkpoint the inputs it was
trained on.

``--noise SIGMA`` (train and score) replaces the truth by a calibrated forecaster of known
accuracy: every forecast's median is the true remaining work times ``exp(SIGMA * z)``, ``z``
standard normal and drawn afresh when a task is new or has a new observation, and its
quantiles are those of that log-normal (:func:`noisy_quantiles`), i.e. a median
``|ln(forecast / truth)|`` of ``0.674 * SIGMA``. ``--observed`` (train, score, check) gives
the (noisy) truth only for tasks with at least one observation and FM's answer for a task
never run (remaining work at the cap), as a forecaster that reads histories must.
"""

from __future__ import annotations

import sys

import numpy as np
from scipy import stats

import core_env
from core_env.forecast import LossForecastWrapper, OracleForecaster
from core_env.forecast.cache import Z90, lognormal_p_reach
from core_env.forecast.protocol import REMAINING_CAP, RemainingWork
from core_env.state import BatchState
from mara_agents.mat.inputs import inputs_from_batched
from mara_agents.policy import make_policy, run_episode
from mara_agents.train import recipe
from mara_agents.train.imitation import true_remaining
from mara_agents.train.rollout import Rollout


NOISE = 0.0
"""sigma of the log-normal error of the noisy oracle (``--noise``; 0: the truth)."""

OBSERVED = False
"""``--observed``: the (noisy) oracle answers only for tasks with at least one observation;
a task not yet run gets the FM forecaster's answer for it (remaining work at the cap, i.e.
unknown), as a forecaster that reads histories must."""


def observed_only(r: np.ndarray, n_obs: np.ndarray) -> np.ndarray:
    """``r`` with tasks never observed at the cap (unknown) under ``--observed``."""
    return np.where(n_obs > 0, r, REMAINING_CAP) if OBSERVED else r


def noisy_quantiles(r: np.ndarray, z: np.ndarray, sigma: float) -> np.ndarray:
    """float64[n, 4] (mean, q10, q50, q90) of a calibrated log-normal forecaster whose median
    is ``r * exp(sigma * z)`` (``r`` the true remaining work, ``z`` standard normal); a task
    the oracle calls unreachable (``r`` at the cap) keeps its answer. ``sigma = 0``: ``r``."""
    med = r * np.exp(sigma * z)
    q = np.stack([med * np.exp(sigma ** 2 / 2), med * np.exp(-Z90 * sigma), med,
                  med * np.exp(Z90 * sigma)], axis=1)
    return np.where((r >= REMAINING_CAP)[:, None], r[:, None], np.minimum(q, REMAINING_CAP))


def cached_oracle_columns(sim: BatchState, z: np.ndarray | None = None,
                          sigma: float = 0.0) -> np.ndarray:
    """float32[B, K, 5]: what ``LossForecastWrapper(env, forecaster, cache=True)`` shows for
    the oracle (``sigma = 0``) or the noisy oracle with errors ``z[B, K]``
    (:class:`NoisyOracleForecaster`), for a batch: ``ForecastCache``'s columns, i.e. the
    quantiles normalised by the achievable work and ``fc_p_reach`` from their log-normal
    (of width 0.05 for a certain forecast)."""
    out = np.zeros(sim.slot_task.shape + (5,), dtype=np.float32)
    env, slot, r, budget = true_remaining(sim)
    r = observed_only(r, sim.slot_n_obs[env, slot])
    q = noisy_quantiles(r, np.zeros_like(r) if z is None else z[env, slot], sigma)
    out[env, slot, :4] = np.minimum(q / np.maximum(budget, 1e-9)[:, None], 2.0) * 0.5
    out[env, slot, 4] = lognormal_p_reach(q[:, 1], q[:, 2], q[:, 3], budget)
    return out


class NoisyOracleForecaster(OracleForecaster):
    """The oracle with a fresh log-normal error of width ``sigma`` on every forecast (run
    with ``cache=True``, a task keeps it until its next observation)."""

    def __init__(self, tables, sigma: float, seed: int) -> None:
        super().__init__(tables)
        self.sigma = sigma
        self.rng = np.random.default_rng(seed)

    def predict_batch(self, batch, log_targets, budgets):
        r = observed_only(super().predict_batch(batch, log_targets, budgets).q50, batch.length)
        q = noisy_quantiles(r, self.rng.standard_normal(r.shape[0]), self.sigma)
        return RemainingWork(mean=q[:, 0], q10=q[:, 1], q50=q[:, 2], q90=q[:, 3],
                             p_reach=(q[:, 2] <= budgets).astype(np.float64))


def _noisy_inputs(self: Rollout):
    """The batched simulator's columns from the noisy oracle, with ForecastCache's rules: a
    new error when a task is new or has a new observation, the columns of the cache."""
    sim = self.sim
    if not hasattr(self, "_z"):
        self._z = np.zeros(sim.slot_task.shape)
        self._key = np.full(sim.slot_task.shape + (2,), -1, dtype=np.int64)
        self._rng = np.random.default_rng(int(self._seed))
    key = np.stack([sim.slot_task, sim.slot_n_obs], axis=-1)
    stale = (sim.slot_task >= 0) & (key != self._key).any(-1)
    self._z[stale] = self._rng.standard_normal(int(stale.sum()))
    self._key[stale] = key[stale]
    return inputs_from_batched(self.obs, self.mask, self.plain_layout,
                               cached_oracle_columns(sim, self._z, NOISE))


_reset, _step = Rollout.reset, Rollout.step


def _step_keys(self: Rollout, actions):
    reward, done, episodes = _step(self, actions)
    if done.any() and hasattr(self, "_key"):
        self._key[done] = -1  # restarted environments: task ids start again
    return reward, done, episodes


def _reset_keys(self: Rollout, seed: int) -> None:
    _reset(self, seed)
    self._seed = seed + 10_000  # the error's own stream
    for name in ("_z", "_key", "_rng"):
        self.__dict__.pop(name, None)


def _oracle_inputs(self: Rollout):
    return inputs_from_batched(self.obs, self.mask, self.plain_layout,
                               cached_oracle_columns(self.sim))


def train(argv: list[str]) -> int:
    if NOISE > 0 or OBSERVED:
        Rollout.inputs = _noisy_inputs
        Rollout.reset = _reset_keys
        Rollout.step = _step_keys
    else:
        Rollout.inputs = _oracle_inputs  # every stage of the run reads the true columns
    return recipe.main(argv)


def check(preset: str, offset: int, n: int) -> None:
    base = core_env.parallel_env(preset=preset)
    env, pol = make_policy("oracle_greedy", LossForecastWrapper(base, _forecaster(base),
                                                                cache=True))
    slots = 0
    for seed in range(offset, offset + n):
        obs, _ = env.reset(seed=seed)
        pol.reset(seed)
        while env.agents:
            want = cached_oracle_columns(base.sim)[0]
            if not np.allclose(env._extra, want, rtol=1e-4, atol=1e-4):
                bad = np.argwhere(~np.isclose(env._extra, want, rtol=1e-4, atol=1e-4))
                raise AssertionError(f"seed {seed}, slot {slots}: the cached oracle columns "
                                     f"differ from cached_oracle_columns at (slot, column) "
                                     f"{bad[:5].tolist()}: {env._extra[tuple(bad[0])]} vs "
                                     f"{want[tuple(bad[0])]}")
            obs, *_ = env.step(pol.act(obs))
            slots += 1
    print(f"{slots} slots of oracle_greedy: the cached oracle columns equal cached_oracle_columns")


def _forecaster(base) -> OracleForecaster:
    """The forecaster ``score`` and ``check`` show: the oracle, noisy and/or observed-only."""
    if NOISE > 0 or OBSERVED:
        return NoisyOracleForecaster(lambda b=base.unwrapped: b.workload.log_loss, NOISE, 12345)
    return OracleForecaster.for_env(base)


def score(preset: str, offset: int, n: int, checkpoints: list[str]) -> None:
    seeds = range(offset, offset + n)
    rates: dict[str, list[float]] = {}
    for name in ("lara", "oracle_greedy"):
        env, pol = make_policy(name, core_env.parallel_env(preset=preset))
        rates[name] = [run_episode(env, pol, seed=s)["completion_rate"] for s in seeds]
    for ck in checkpoints:
        base = core_env.parallel_env(preset=preset)
        kw = {} if ck == "mara" else {"checkpoint": ck}
        env, pol = make_policy("mara", base, forecaster=_forecaster(base), **kw)
        rates[ck] = [run_episode(env, pol, seed=s)["completion_rate"] for s in seeds]
    lara = 100 * np.asarray(rates["lara"])
    for name, r in rates.items():
        d = 100 * np.asarray(r) - lara
        lo, hi = (stats.t.interval(0.95, len(d) - 1, d.mean(), stats.sem(d))
                  if d.any() else (0.0, 0.0))
        print(f"{name:40s} {100 * np.mean(r):6.2f}%  - LARA {d.mean():+6.2f} "
              f"({lo:+.2f}, {hi:+.2f})")


if __name__ == "__main__":
    usage = ("usage: mara_oracle_columns.py {train [--noise S] [--observed] MARA-TRAIN-FLAGS | "
             "check PRESET OFFSET N | score PRESET OFFSET N CHECKPOINT... [--noise S] "
             "[--observed]}")
    if len(sys.argv) < 2:
        raise SystemExit(usage)
    cmd, rest = sys.argv[1], sys.argv[2:]
    if "--noise" in rest:
        i = rest.index("--noise")
        try:
            NOISE = float(rest[i + 1])
        except (IndexError, ValueError):
            raise SystemExit(f"--noise: expected a number, got {rest[i + 1:i + 2]}") from None
        if not (np.isfinite(NOISE) and 0 <= NOISE <= 5):
            raise SystemExit(f"--noise: expected a sigma in [0, 5], got {NOISE}")
        del rest[i:i + 2]
    if "--observed" in rest:
        OBSERVED = True
        rest.remove("--observed")
    if cmd in ("check", "score") and (len(rest) < (3 if cmd == "check" else 4)
                                      or not all(a.isdigit() for a in rest[1:3])):
        raise SystemExit(usage)
    if cmd == "train":
        raise SystemExit(train(rest))
    if cmd == "check":
        if NOISE:
            raise SystemExit("check: compares the truth's columns; --noise does not apply")
        check(rest[0], int(rest[1]), int(rest[2]))
    elif cmd == "score":
        score(rest[0], int(rest[1]), int(rest[2]), rest[3:])
    else:
        raise SystemExit(f"unknown command {cmd!r}: expected train, check or score")
