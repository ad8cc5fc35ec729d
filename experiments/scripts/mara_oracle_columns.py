"""MARA trained and run on the true remaining work (docs/experiments.md, "MARA with perfect
forecasts"): how much of MARA's distance to the oracle-informed greedy scheduler is the
forecaster's.

    python experiments/scripts/mara_oracle_columns.py check CoRE-v0 100 3
    python experiments/scripts/mara_oracle_columns.py train --members 1 --seed 0 --out runs/oracle_s0
    python experiments/scripts/mara_oracle_columns.py score CoRE-v0 100 48 runs/oracle_s0/last.pt ...
    python experiments/scripts/mara_oracle_columns.py train --noise 0.5 --members 1 --out runs/n05
    python experiments/scripts/mara_oracle_columns.py score CoRE-v0 100 48 runs/n05/last.pt --noise 0.5
    python experiments/scripts/mara_oracle_columns.py train --observed --members 1 --out runs/obs_0
    python experiments/scripts/mara_oracle_columns.py train --observed --curve --members 1 --out runs/c0
    python experiments/scripts/mara_oracle_columns.py score CoRE-v0 100 48 runs/c0/last.pt --observed --curve
    python experiments/scripts/mara_oracle_columns.py score CoRE-v0 0 50 runs/c0/last.pt,runs/c1/last.pt --observed --curve --bounds results/schedule/bounds.csv

``train`` is ``mara-train`` (every flag) with the forecast columns of the batched simulator
replaced by :func:`cached_oracle_columns` (the true remaining work, as the cached oracle
wrapper shows it) in the imitation stage and in PPO; the FM forecaster is never called. The
checkpoint's ``train_config`` still names its ``forecaster`` flag: load it only through
``score``. ``score`` runs greedy MARA for each checkpoint (``mara``: the shipped one;
``a.pt,b.pt``: their ensemble) in ``LossForecastWrapper(env, OracleForecaster.for_env(env),
cache=True)`` on the seeds ``offset .. offset + n - 1`` of a preset, with LARA (WLS columns)
and the oracle-informed greedy scheduler on the same seeds, and prints each policy's mean
and its paired difference to LARA (95% t interval). ``check`` runs the oracle-informed
greedy scheduler in that wrapper and asserts that its columns equal
:func:`cached_oracle_columns` of the env's own simulator state at every slot (to 1e-4), i.e.
that ``score`` shows a checkpoint the inputs it was trained on.

``--noise SIGMA`` (train and score) replaces the truth by a calibrated forecaster of known
accuracy: every forecast's median is the true remaining work times ``exp(SIGMA * z)``, ``z``
standard normal and drawn afresh when a task is new or has a new observation, and its
quantiles are those of that log-normal (:func:`noisy_quantiles`), i.e. a median
``|ln(forecast / truth)|`` of ``0.674 * SIGMA``. ``--observed`` (train, score, check) gives
the (noisy) truth only for tasks with at least one observation and FM's answer for a task
never run (remaining work at the cap), as a forecaster that reads histories must.
``--noise S1,S2,S3,S5,S9,S17`` (with ``--observed``) gives a sigma for each bucket of
1, 2, 3-4, 5-8, 9-16 and 17+ observations, e.g. the median errors of an FM checkpoint by
observation count (``fm_env_cases.py error``) divided by 0.674.
``--curve`` (train, score, check) makes the truth the noise-free curve's: the work until
the task's noise-free loss (``Workload.true_log_loss``) reaches its target, where the
environment completes a task when its observed, noisy loss does, i.e. a forecaster that
knows every curve exactly but not the noise still to come.
``--per-task`` (train, score, with ``--noise``) draws ``z`` once per task and keeps it for
the task's life, i.e. errors as persistent as a forecaster's that misreads a curve family,
where the default's errors are independent from one observation to the next.
``--bounds BOUNDS.CSV`` (score) adds each policy's mean share of the clairvoyant bound
(completed / bound per seed, 95% t interval), the bounds read from the ``bounds.csv`` of a
``mara-bench schedule`` run that covers the seeds (docs/bound.md).
"""

from __future__ import annotations

import csv
import importlib
import sys

import numpy as np
from scipy import stats

import core_env
from core_env import batched
from core_env.forecast import LossForecastWrapper, OracleForecaster
from core_env.forecast.cache import Z90, lognormal_p_reach
from core_env.forecast.protocol import REMAINING_CAP, RemainingWork
from core_env.state import BatchState
from mara_agents.mat.inputs import inputs_from_batched
from mara_agents.policy import make_policy, run_episode
from mara_agents.train import recipe
from mara_agents.train.imitation import true_remaining
from mara_agents.train.rollout import Rollout

NOISE: float | tuple[float, ...] = 0.0
"""sigma of the log-normal error of the noisy oracle (``--noise``; 0: the truth), or one
sigma for each bucket of :data:`OBS_BUCKETS`."""

OBS_BUCKETS = (1, 2, 3, 5, 9, 17)
"""Lower edges of the observation-count buckets of a ``--noise`` profile (1, 2, 3-4, 5-8,
9-16, 17+ observations: those of ``fm_env_cases.py error``)."""


def sigma_of(n_obs: np.ndarray, noise: float | tuple[float, ...]) -> np.ndarray | float:
    """The noisy oracle's sigma for tasks with ``n_obs`` observations."""
    if isinstance(noise, tuple):
        return np.asarray(noise)[np.clip(np.searchsorted(OBS_BUCKETS, n_obs, "right") - 1,
                                         0, None)]
    return noise

OBSERVED = False
"""``--observed``: the (noisy) oracle answers only for tasks with at least one observation;
a task not yet run gets the FM forecaster's answer for it (remaining work at the cap, i.e.
unknown), as a forecaster that reads histories must."""


CURVE = False
"""``--curve``: the oracle reads the task's noise-free curve (``Workload.true_log_loss``)
instead of the observed loss path the environment completes tasks on: a forecaster that
knows each curve exactly but not the noise still to come."""

_TRUE_TABLES: dict[int, np.ndarray] = {}
"""The noise-free log-loss tables of each simulator's workloads (``--curve``), by id."""


def _load_workload(s, row, wl) -> None:
    """``load_workload`` that also keeps the workload's noise-free tables (``--curve``)."""
    _load(s, row, wl)
    true = _TRUE_TABLES.setdefault(id(s), np.zeros_like(s.w_log_loss))
    true[row] = 0.0
    true[row, :wl.n_tasks] = wl.true_log_loss


def _remaining(sim: BatchState):
    """:func:`true_remaining`, of the noise-free curves under ``--curve``."""
    if not CURVE:
        return true_remaining(sim)
    observed = sim.w_log_loss
    sim.w_log_loss = _TRUE_TABLES[id(sim)]
    try:
        return true_remaining(sim)
    finally:
        sim.w_log_loss = observed


PER_TASK = False
"""``--per-task``: one error ``z`` per task for its whole life instead of one per observation."""


def observed_only(r: np.ndarray, n_obs: np.ndarray) -> np.ndarray:
    """``r`` with tasks never observed at the cap (unknown) under ``--observed``."""
    return np.where(n_obs > 0, r, REMAINING_CAP) if OBSERVED else r


def noisy_quantiles(r: np.ndarray, z: np.ndarray, sigma: float | np.ndarray) -> np.ndarray:
    """float64[n, 4] (mean, q10, q50, q90) of a calibrated log-normal forecaster whose median
    is ``r * exp(sigma * z)`` (``r`` the true remaining work, ``z`` standard normal); a task
    the oracle calls unreachable (``r`` at the cap) keeps its answer. ``sigma = 0``: ``r``."""
    med = r * np.exp(sigma * z)
    q = np.stack([med * np.exp(sigma ** 2 / 2), med * np.exp(-Z90 * sigma), med,
                  med * np.exp(Z90 * sigma)], axis=1)
    return np.where((r >= REMAINING_CAP)[:, None], r[:, None], np.minimum(q, REMAINING_CAP))


def cached_oracle_columns(sim: BatchState, z: np.ndarray | None = None,
                          sigma: float | tuple[float, ...] = 0.0) -> np.ndarray:
    """float32[B, K, 5]: what ``LossForecastWrapper(env, forecaster, cache=True)`` shows for
    the oracle (``sigma = 0``) or the noisy oracle with errors ``z[B, K]``
    (:class:`NoisyOracleForecaster`), for a batch: ``ForecastCache``'s columns, i.e. the
    quantiles normalised by the achievable work and ``fc_p_reach`` from their log-normal
    (of width 0.05 for a certain forecast)."""
    out = np.zeros(sim.slot_task.shape + (5,), dtype=np.float32)
    env, slot, r, budget = _remaining(sim)
    n_obs = sim.slot_n_obs[env, slot]
    r = observed_only(r, n_obs)
    q = noisy_quantiles(r, np.zeros_like(r) if z is None else z[env, slot],
                        sigma_of(n_obs, sigma))
    out[env, slot, :4] = np.minimum(q / np.maximum(budget, 1e-9)[:, None], 2.0) * 0.5
    out[env, slot, 4] = lognormal_p_reach(q[:, 1], q[:, 2], q[:, 3], budget)
    return out


class NoisyOracleForecaster(OracleForecaster):
    """The oracle with a log-normal error of width ``sigma`` (or a sigma per observation
    bucket), fresh on every forecast (run with ``cache=True``, a task keeps it until its
    next observation) or, under ``--per-task``, one per task of the episode."""

    def __init__(self, tables, sigma: float | tuple[float, ...], seed: int) -> None:
        super().__init__(tables)
        self.sigma = sigma
        self.rng = np.random.default_rng(seed)
        self._episode, self._task_z = None, {}

    def _errors(self, batch) -> np.ndarray:
        """A fresh z per forecast, or (``--per-task``) one per task of the episode."""
        if not PER_TASK:
            return self.rng.standard_normal(batch.size)
        table = self._tables()
        if table is not self._episode:  # a new episode: its task rows start again
            self._episode, self._task_z = table, {}
        for k in batch.key.tolist():
            if k not in self._task_z:
                self._task_z[k] = self.rng.standard_normal()
        return np.array([self._task_z[k] for k in batch.key.tolist()])

    def predict_batch(self, batch, log_targets, budgets):
        r = observed_only(super().predict_batch(batch, log_targets, budgets).q50, batch.length)
        q = noisy_quantiles(r, self._errors(batch), sigma_of(batch.length, self.sigma))
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
    n_obs = np.zeros_like(sim.slot_n_obs) if PER_TASK else sim.slot_n_obs  # z per task
    key = np.stack([sim.slot_task, n_obs], axis=-1)
    stale = (sim.slot_task >= 0) & (key != self._key).any(-1)
    self._z[stale] = self._rng.standard_normal(int(stale.sum()))
    self._key[stale] = key[stale]
    return inputs_from_batched(self.obs, self.mask, self.plain_layout,
                               cached_oracle_columns(sim, self._z, NOISE))


_reset, _step = Rollout.reset, Rollout.step
_load = batched.load_workload
env_module = importlib.import_module("core_env.env")  # core_env.env is also a function


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
    if CURVE:
        batched.load_workload = _load_workload
    if NOISE or OBSERVED:
        Rollout.inputs = _noisy_inputs
        Rollout.reset = _reset_keys
        Rollout.step = _step_keys
    else:
        Rollout.inputs = _oracle_inputs  # every stage of the run reads the true columns
    return recipe.main(argv)


def check(preset: str, offset: int, n: int) -> None:
    if CURVE:
        env_module.load_workload = _load_workload
    base = core_env.parallel_env(preset=preset)
    env, pol = make_policy("oracle_greedy", LossForecastWrapper(base, _forecaster(base),
                                                                cache=True))
    driver = "oracle_greedy"
    if OBSERVED:  # oracle_greedy would start nothing on "unknown" columns: random legal moves
        driver, rng = "random legal actions", np.random.default_rng(offset)
    slots = observed = 0
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
            observed += int((base.sim.slot_n_obs[0] > 0).sum())
            if OBSERVED:
                act = {a: int(rng.choice(np.flatnonzero(o["action_mask"])))
                       for a, o in obs.items()}
            else:
                act = pol.act(obs)
            obs, *_ = env.step(act)
            slots += 1
    if not observed:
        raise AssertionError(f"{slots} slots of {driver} and no task ever observed: nothing "
                             f"was checked beyond the unknown columns")
    print(f"{slots} slots of {driver} ({observed} observed task-slots): the cached oracle "
          f"columns equal cached_oracle_columns")


def _forecaster(base) -> OracleForecaster:
    """The forecaster ``score`` and ``check`` show: the oracle, noisy and/or observed-only."""
    if CURVE:
        return NoisyOracleForecaster(lambda b=base.unwrapped: b.workload.true_log_loss,
                                     NOISE, 12345)
    if NOISE or OBSERVED:
        return NoisyOracleForecaster(lambda b=base.unwrapped: b.workload.log_loss, NOISE, 12345)
    return OracleForecaster.for_env(base)


def read_bounds(path: str, preset: str, seeds: range) -> np.ndarray:
    """The clairvoyant bound of each seed: the ``bound`` column of a ``bounds.csv`` that
    ``mara-bench schedule`` wrote (docs/bound.md), for ``preset``."""
    with open(path, newline="") as f:
        found = {int(r["seed"]): int(r["bound"]) for r in csv.DictReader(f)
                 if r["preset"] == preset}
    missing = [s for s in seeds if s not in found]
    if missing:
        raise SystemExit(f"--bounds: {path} has no {preset} bound for seeds {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''}")
    return np.array([found[s] for s in seeds], dtype=float)


def score(preset: str, offset: int, n: int, checkpoints: list[str],
          bounds: str | None = None) -> None:
    seeds = range(offset, offset + n)
    bound = None if bounds is None else read_bounds(bounds, preset, seeds)
    episodes: dict[str, list[dict]] = {}
    for name in ("lara", "oracle_greedy"):
        env, pol = make_policy(name, core_env.parallel_env(preset=preset))
        episodes[name] = [run_episode(env, pol, seed=s) for s in seeds]
    for ck in checkpoints:
        base = core_env.parallel_env(preset=preset)
        kw = {} if ck == "mara" else {"checkpoint": ck.split(",")}  # a,b: an ensemble
        env, pol = make_policy("mara", base, forecaster=_forecaster(base), **kw)
        episodes[ck] = [run_episode(env, pol, seed=s) for s in seeds]
    lara = 100 * np.array([e["completion_rate"] for e in episodes["lara"]])
    for name, eps in episodes.items():
        r = 100 * np.array([e["completion_rate"] for e in eps])
        d = r - lara
        lo, hi = (stats.t.interval(0.95, len(d) - 1, d.mean(), stats.sem(d))
                  if d.any() else (0.0, 0.0))
        line = f"{name:40s} {r.mean():6.2f}%  - LARA {d.mean():+6.2f} ({lo:+.2f}, {hi:+.2f})"
        if bound is not None:
            share = np.array([e["completed"] for e in eps]) / bound
            slo, shi = stats.t.interval(0.95, len(share) - 1, share.mean(), stats.sem(share))
            line += f"  of bound {share.mean():.3f} ({slo:.3f}, {shi:.3f})"
        print(line)


if __name__ == "__main__":
    usage = ("usage: mara_oracle_columns.py {train [--noise S] [--observed] [--per-task] "
             "[--curve] MARA-TRAIN-FLAGS | check PRESET OFFSET N [--observed] [--curve] | "
             "score PRESET OFFSET N CHECKPOINT... [--noise S] [--observed] [--per-task] "
             "[--curve] [--bounds BOUNDS.CSV]}")
    if len(sys.argv) < 2:
        raise SystemExit(usage)
    cmd, rest = sys.argv[1], sys.argv[2:]
    if "--noise" in rest:
        i = rest.index("--noise")
        try:
            values = tuple(float(v) for v in rest[i + 1].split(","))
        except (IndexError, ValueError):
            raise SystemExit(f"--noise: expected a number or {len(OBS_BUCKETS)} numbers "
                             f"separated by commas, got {rest[i + 1:i + 2]}") from None
        if len(values) not in (1, len(OBS_BUCKETS)) or not all(
                np.isfinite(v) and 0 <= v <= 5 for v in values):
            raise SystemExit(f"--noise: expected one sigma or {len(OBS_BUCKETS)} (one per "
                             f"bucket of 1, 2, 3-4, 5-8, 9-16, 17+ observations), each in "
                             f"[0, 5], got {rest[i + 1]}")
        NOISE = values[0] if len(values) == 1 else values
        del rest[i:i + 2]
    if "--observed" in rest:
        OBSERVED = True
        rest.remove("--observed")
    if "--curve" in rest:
        CURVE = True
        rest.remove("--curve")
    if "--per-task" in rest:
        if not NOISE:
            raise SystemExit("--per-task: draws the error of --noise; give --noise SIGMA too")
        PER_TASK = True
        rest.remove("--per-task")
    bounds = None
    if "--bounds" in rest:
        i = rest.index("--bounds")
        if cmd != "score" or i + 1 >= len(rest):
            raise SystemExit("--bounds: score only, followed by a bounds.csv of mara-bench "
                             "schedule")
        bounds = rest[i + 1]
        del rest[i:i + 2]
    if isinstance(NOISE, tuple) and not OBSERVED:
        raise SystemExit("--noise: a sigma per observation count needs --observed (a task "
                         "never run has no count to look up)")
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
        score(rest[0], int(rest[1]), int(rest[2]), rest[3:], bounds)
    else:
        raise SystemExit(f"unknown command {cmd!r}: expected train, check or score")
