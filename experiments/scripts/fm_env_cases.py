"""The FM forecaster trained on the forecasting cases an environment actually poses
(docs/experiments.md, "what the forecaster must know, and FM on the environment's own
cases").

    python experiments/scripts/fm_env_cases.py collect CoRE-v0 20000 200 runs/fm_env/cases.npz [lara,mara]
    python experiments/scripts/fm_env_cases.py train runs/fm_env/cases.npz 0.5 -- --out runs/fm_env/fm.pt
    python experiments/scripts/fm_env_cases.py error CoRE-v0 100 6 runs/fm_env/fm.pt
    python experiments/scripts/fm_env_cases.py compare CoRE-v0 100 48 fm_default runs/fm_env/fm.pt A1 B1 A2 B2
    python experiments/scripts/fm_env_cases.py score CoRE-v0 100 48 runs/fm_env/fm.pt mara
    python experiments/scripts/fm_env_cases.py mara runs/fm_env/fm.pt -- --members 1 --out runs/m
    python experiments/scripts/fm_env_cases.py score CoRE-v0 100 48 runs/fm_env/fm.pt runs/m/last.pt

``collect`` runs LARA and greedy MARA (every other seed; or the policies named, seed by seed
in turn) on the seeds ``offset .. offset + n - 1`` of a preset and keeps, at every slot,
each visible task that has a new observation: its observed history (as the simulator keeps
it), ln target, observed loss table and true remaining work, i.e. a
:class:`~core_env.forecast.cases.ForecastCases` with the environment's own observation
schedule (one observation after a task's first slot, the work of the nodes the policy gave
it) and its own mix of prefixes. ``train`` is ``mara-train-forecaster`` (every flag after
``--``) with a fraction ``W`` of the training and validation cases drawn from the collected
ones (the validation cases from its last tenth, which training never sees) and the rest from
the synthetic ``train`` mix as usual. ``error`` prints the median |ln(q50 / truth)| of a
checkpoint (or ``fm_default``) on the tasks greedy MARA sees, by number of observations,
with the mean signed error, the share of errors beyond a factor e, the q10-q90 coverage and
how often q50 puts a task on the wrong side of its deadline (q50 within the achievable work
or not, against the truth), next to a noisy oracle of the same median error and to the
noise-free curve's answer (the environment completes a task when its noisy loss reaches the
target); then the lag-1 correlation of a task's error from one observation to the next; then
what the deadline window alone says about the remaining work (the window is drawn from the
required work and a uniform slack), and FM's q50 clipped to the bounds the window implies.
``score`` runs greedy MARA checkpoints (``mara``: the shipped one; ``a.pt,b.pt``: their
ensemble) with an FM checkpoint on the seeds ``offset .. offset + n - 1``, paired with LARA.
``compare`` pairs checkpoints, A on one FM and B on another, and prints B - A on the same
seeds, pair by pair and over all pairs. ``mara`` is ``mara-train`` (every flag after ``--``)
on the forecast columns of an FM checkpoint, registered under the name ``fm-env`` for this
process (so ``--members 1``, or ``--workers 1`` for the recipe's members one after another
in this process: worker processes would not see the name).
"""

from __future__ import annotations

import sys

import numpy as np

import core_env
from core_env.curves import first_crossing
from core_env.forecast import LossForecastWrapper
from core_env.forecast.cases import ForecastCases
from core_env.forecast.protocol import REMAINING_CAP, HistoryBatch

BUCKETS = (("all", 1, 10 ** 9), ("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5-8", 5, 8),
           ("9-16", 9, 16), ("17+", 17, 10 ** 9))
"""Observation-count buckets of the ``error`` tables: (name, least, most)."""


def collect(preset: str, offset: int, n: int, out: str,
            policies: tuple[str, ...] = ("lara", "mara")) -> None:
    from mara_agents.policy import make_policy

    rows: dict[str, list] = {k: [] for k in ("lw", "ll", "len", "tgt", "table", "fam")}
    width = 0
    for seed in range(offset, offset + n):
        base = core_env.parallel_env(preset=preset)
        env, pol = make_policy(policies[seed % len(policies)], base)
        obs, _ = env.reset(seed=seed)
        pol.reset(seed)
        sim, seen = base.unwrapped.sim, set()
        wl = base.unwrapped.workload
        while env.agents:
            slot = np.flatnonzero(sim.slot_task[0] >= 0)
            for k in slot:
                task, m = int(sim.slot_task[0, k]), int(sim.slot_n_obs[0, k])
                if m == 0 or (task, m) in seen:
                    continue
                seen.add((task, m))
                rows["lw"].append(sim.hist_log_work[0, k, :m].astype(np.float64))
                rows["ll"].append(sim.hist_log_loss[0, k, :m].astype(np.float64))
                rows["len"].append(m)
                rows["tgt"].append(float(sim.slot_log_target[0, k]))
                rows["table"].append(wl.log_loss[task])
                rows["fam"].append(int(wl.family[task]))
                width = max(width, m)
            obs, *_ = env.step(pol.act(obs))
        print(f"seed {seed}: {len(rows['len'])} cases so far", flush=True)
    size = len(rows["len"])
    lw, ll = np.zeros((size, width)), np.zeros((size, width))
    for i, (a, b) in enumerate(zip(rows["lw"], rows["ll"], strict=False)):
        lw[i, : a.size], ll[i, : b.size] = a, b
    np.savez_compressed(out, log_work=lw, log_loss=ll, length=np.asarray(rows["len"]),
                        log_targets=np.asarray(rows["tgt"]), family=np.asarray(rows["fam"]),
                        log_loss_table=np.stack(rows["table"]).astype(np.float32))
    print(f"{size} cases -> {out}")


def load_cases(path: str) -> ForecastCases:
    """The collected cases, with their true remaining work (inf where never reached)."""
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a case file written by `collect` ({e})") from None
    if not hasattr(z, "files"):
        raise ValueError(f"{path}: not a case file written by `collect` (a single array)")
    want = {"log_work", "log_loss", "length", "log_targets", "family", "log_loss_table"}
    if set(z.files) != want:
        raise ValueError(f"{path}: expected the arrays {sorted(want)} of `collect`, got "
                         f"{sorted(z.files)}")
    lw, ll, length = z["log_work"], z["log_loss"], z["length"].astype(np.int64)
    table, tgt = z["log_loss_table"], z["log_targets"].astype(np.float64)
    rows = np.arange(length.size)
    x_now = lw[rows, length - 1]
    required = first_crossing(table.astype(np.float64), tgt)
    remaining = first_crossing(table.astype(np.float64), tgt, x_now) - np.exp(x_now)
    batch = HistoryBatch(lw, ll, length, rows.astype(np.int64))
    return ForecastCases(batch, tgt, remaining, required, z["family"].astype(np.int8), table)


def _take(cases: ForecastCases, idx: np.ndarray) -> ForecastCases:
    b = cases.batch
    batch = HistoryBatch(b.log_work[idx], b.log_loss[idx], b.length[idx],
                         np.arange(idx.size, dtype=np.int64))
    return ForecastCases(batch, *(getattr(cases, f)[idx] for f in ForecastCases._fields[1:]))


def train(path: str, weight: float, argv: list[str]) -> int:
    from mara_agents.forecast import train as fmtrain

    if not 0.0 < weight <= 1.0:
        raise ValueError(f"W: expected a fraction in (0, 1], got {weight}")
    env_cases = load_cases(path)
    n_all = env_cases.batch.size
    cut = n_all - n_all // 10
    pools = {"real-fit": np.arange(cut), "real-calibration": np.arange(cut, n_all)}
    synth = fmtrain.draw_cases

    def draw_cases(rng, cfg, n, real_mix="real-fit"):
        k = int(round(n * weight))
        parts = [synth(rng, cfg, n - k, real_mix)] if n - k > 0 else []
        if k:
            parts.append(_take(env_cases, rng.choice(pools[real_mix], size=k,
                                                     replace=k > pools[real_mix].size)))
        return parts[0] if len(parts) == 1 else fmtrain.concat_cases(parts)

    fmtrain.draw_cases = draw_cases
    return fmtrain.main(argv)


def train_mara(fm_checkpoint: str, argv: list[str]) -> int:
    from pathlib import Path

    from mara_agents.forecast import registry
    from mara_agents.train import config, recipe

    path = Path(fm_checkpoint).resolve()
    if path.suffix != ".pt" or not path.is_file():
        raise ValueError(f"FMCKPT: expected an FM checkpoint file (.pt), got {fm_checkpoint}")
    flags = [t for a in argv for t in a.split("=", 1)]  # --members=1 as --members 1
    pairs = [flags[i:i + 2] for i in range(len(flags) - 1)]
    if ["--members", "1"] not in pairs and ["--workers", "1"] not in pairs:
        raise ValueError("mara: pass --members 1, or --workers 1 for the recipe in this "
                         "process (the recipe's worker processes would not see the fm-env "
                         "name)")
    if any(a.startswith("--forecaster") for a in argv):
        raise ValueError("mara: no --forecaster (the FM checkpoint given is the forecaster)")
    registry.FM_CHECKPOINTS["fm-env"] = str(path.with_suffix(""))  # pretrained() adds .pt
    registry.FORECASTERS = config.FORECASTERS = (*registry.FM_CHECKPOINTS, "wls")
    return recipe.main([*argv, "--forecaster", "fm-env"])


def _fm(checkpoint: str):
    from mara_agents.forecast.forecaster import FlowMatchingForecaster

    if checkpoint == "fm_default":
        return FlowMatchingForecaster.pretrained("fm_default", backend="numpy")
    return FlowMatchingForecaster.load(checkpoint, backend="numpy")


def score(preset: str, offset: int, n: int, fm_checkpoint: str, checkpoints: list[str]
          ) -> None:
    """Greedy MARA (``mara``: the shipped checkpoint) with the given FM, paired with LARA."""
    from mara_agents.policy import make_policy, run_episode

    seeds = range(offset, offset + n)
    env, pol = make_policy("lara", core_env.parallel_env(preset=preset))
    lara = np.array([run_episode(env, pol, seed=s)["completion_rate"] for s in seeds]) * 100
    for ck in checkpoints:
        r = _rates(preset, seeds, fm_checkpoint, ck)
        print(f"{ck:30s} on {fm_checkpoint}: {r.mean():6.2f}% (LARA {lara.mean():.2f}%) "
              f"- LARA {_paired(r - lara)}", flush=True)


def _paired(d: np.ndarray) -> str:
    """A paired difference's mean and its 95% t interval over the seeds."""
    from scipy import stats

    lo, hi = stats.t.interval(0.95, len(d) - 1, d.mean(), stats.sem(d))
    return f"{d.mean():+6.2f} ({lo:+.2f}, {hi:+.2f})"


def _rates(preset: str, seeds: range, fm_checkpoint: str, checkpoint: str) -> np.ndarray:
    from mara_agents.policy import make_policy, run_episode

    kw = {} if checkpoint == "mara" else {"checkpoint": checkpoint.split(",")}  # a,b: ensemble
    env, pol = make_policy("mara", core_env.parallel_env(preset=preset),
                           forecaster=_fm(fm_checkpoint), **kw)
    return np.array([run_episode(env, pol, seed=s)["completion_rate"] for s in seeds]) * 100


def compare(preset: str, offset: int, n: int, fm_a: str, fm_b: str, checkpoints: list[str]
            ) -> None:
    """Pairs of checkpoints (A on ``fm_a``, B on ``fm_b``, e.g. one training seed on each
    forecaster): B - A on the same seeds for each pair, and over all pairs (each seed's
    mean difference)."""
    if len(checkpoints) % 2:
        raise ValueError(f"compare: expected pairs of checkpoints (A B A B ...), got "
                         f"{len(checkpoints)}")
    seeds = range(offset, offset + n)
    diffs = []
    for a, b in zip(checkpoints[::2], checkpoints[1::2], strict=False):
        diffs.append(_rates(preset, seeds, fm_b, b) - _rates(preset, seeds, fm_a, a))
        print(f"{b} - {a}: {_paired(diffs[-1])}", flush=True)
    if len(diffs) > 1:
        print(f"over all pairs: {_paired(np.mean(diffs, axis=0))}", flush=True)


def error(preset: str, offset: int, n: int, checkpoint: str) -> None:
    from mara_agents.policy import make_policy
    from mara_agents.train.imitation import true_remaining

    fm = _fm(checkpoint)
    out = []
    for seed in range(offset, offset + n):
        base = core_env.parallel_env(preset=preset)
        env, pol = make_policy("mara", base, forecaster=fm)
        wrap = env
        while not isinstance(wrap, LossForecastWrapper):
            wrap = wrap.env
        obs, _ = env.reset(seed=seed)
        pol.reset(seed)
        wl = base.unwrapped.workload
        n_nodes = base.unwrapped.config.cluster.n_nodes
        while env.agents:
            sim = base.unwrapped.sim
            e, s, r, budget = true_remaining(sim)
            task, nobs, work = sim.slot_task[e, s], sim.slot_n_obs[e, s], sim.slot_work[e, s]
            # the work until the noise-free curve reaches the target: what a forecaster
            # that knows the curve but not the noise to come would answer
            x_now = np.log(np.maximum(work, 1e-30)).astype(np.float64)
            curve = first_crossing(wl.true_log_loss[task].astype(np.float64),
                                   sim.slot_log_target[e, s].astype(np.float64), x_now) - work
            # the deadline window and the speed-up at full parallelism: the window is
            # ceil(slack * s* / speed-up), clipped (core_env.workload.deadline_windows)
            window = wl.deadline[task] - wl.arrival[task]
            speedup = np.minimum(wl.cap[task], n_nodes) ** wl.alpha[task]
            q = wrap.cache.raw[0, s]
            out.append(np.stack([np.full(s.size, seed), task, nobs, r, q[:, 1], q[:, 2],
                                 q[:, 3], budget, np.clip(curve, 0, REMAINING_CAP), work,
                                 window, speedup], axis=1))
            obs, *_ = env.step(pol.act(obs))
    (seed, task, nobs, r, q10, q50, q90, budget, curve, work, window,
     speedup) = np.concatenate(out).T  # task-slots
    ok = (nobs > 0) & (r > 0) & (r < REMAINING_CAP) & (q10 > 0) & (q90 < REMAINING_CAP)
    fits = r <= budget  # the decision a forecast serves: can the task make its deadline?
    rng = np.random.default_rng(0)
    print("n_obs  task-slots  median |log err| (mean signed)  P(|log err| > 1)  q10-q90 "
          "coverage  wrong side of the deadline: FM, noisy oracle of FM's median error, "
          "noise-free curve  the curve's median |log err|, P(> 1)")
    shifted = q50.copy()  # FM less each observation bucket's median signed error
    for name, lo, hi in BUCKETS:
        m = ok & (nobs >= lo) & (nobs <= hi)
        d = np.log(q50[m] / r[m])
        if name != "all":
            shifted[m] = q50[m] / np.exp(np.median(d))
        sigma = np.median(np.abs(d)) / 0.6745
        noisy = r[m] * np.exp(sigma * rng.standard_normal(m.sum()))
        dc = np.log(np.maximum(curve[m], 1e-9) / r[m])
        print(f"{name:5s} {m.sum():8d}  {np.median(np.abs(d)):.3f} ({d.mean():+.3f})  "
              f"{np.mean(np.abs(d) > 1):.3f}  {np.mean((q10[m] <= r[m]) & (r[m] <= q90[m])):.2f}"
              f"  {np.mean((q50[m] <= budget[m]) != fits[m]):.3f} "
              f"{np.mean((noisy <= budget[m]) != fits[m]):.3f} "
              f"{np.mean((curve[m] <= budget[m]) != fits[m]):.3f}  "
              f"{np.median(np.abs(dc)):.3f} {np.mean(np.abs(dc) > 1):.3f}")
    print(f"wrong side of the deadline, FM less each bucket's median signed error: "
          f"{np.mean((shifted[ok] <= budget[ok]) != fits[ok]):.3f}")
    rates = []
    for sigma in (0.25, 0.35, 0.5, 0.75, 1.0):
        noisy = r[ok] * np.exp(sigma * rng.standard_normal(ok.sum()))
        rates.append(f"{sigma} {np.mean((noisy <= budget[ok]) != fits[ok]):.3f}")
    print(f"wrong side of the deadline, noisy oracle of one sigma: {', '.join(rates)}")
    _window_prior(base.unwrapped.config.workload, ok, nobs, r, q50, budget, work, window,
                  speedup)
    # persistence: the log error of a task's forecast against the one after its next
    # observation (0: fresh errors as --noise gives them; 1: one error for a task's life)
    seed, task, nobs, d = np.unique(np.stack([seed[ok], task[ok], nobs[ok],
                                              np.log(q50[ok] / r[ok])], 1),
                                    axis=0).T  # one row per forecast, in task order
    same = (seed[1:] == seed[:-1]) & (task[1:] == task[:-1]) & (nobs[1:] == nobs[:-1] + 1)
    print(f"lag-1 correlation of a task's log error over consecutive observations "
          f"{np.corrcoef(d[:-1][same], d[1:][same])[0, 1]:.2f} ({same.sum()} pairs)")


def _window_prior(w, ok, nobs, r, q50, budget, work, window, speedup) -> None:
    """What a task's deadline window says about its remaining work: the window is drawn as
    ``ceil(slack * s* / speed-up)`` with the slack uniform, so s* lies in
    ``((window - 1) speed-up / slack_hi, window speed-up / slack_lo]`` (open at the window's
    clips); the prior's answer is ``window * speed-up / mean slack - s_now``, and FM's q50
    can be clipped to the bounds."""
    (f_lo, f_hi), (w_lo, w_hi) = w.deadline_slack, w.window
    s_lo = np.maximum(np.where(window <= w_lo, 0.0, (window - 1) * speedup / f_hi),
                      w.required_work[0])
    s_hi = np.minimum(np.where(window >= w_hi, np.inf, window * speedup / f_lo),
                      w.required_work[1])
    lo, hi = np.maximum(s_lo - work, 1e-3), np.maximum(s_hi - work, 1e-3)
    prior = np.maximum(window * speedup / ((f_lo + f_hi) / 2) - work, 1e-3)
    answers = (q50, prior, np.clip(q50, lo, hi))
    fits = r <= budget
    inside = np.mean((r[ok] >= lo[ok] * 0.999) & (r[ok] <= hi[ok] * 1.001))
    print(f"the deadline window's prior (truth within its bounds {inside:.3f}); per bucket: "
          f"median |log err|, P(|log err| > 1) and wrong side of the deadline for FM, the "
          f"prior alone and FM clipped to the bounds")
    for name, a, b in BUCKETS:
        m = ok & (nobs >= a) & (nobs <= b)
        d = [np.log(x[m] / r[m]) for x in answers]
        print(f"{name:5s} {m.sum():8d}  "
              + " ".join(f"{np.median(np.abs(x)):.3f}" for x in d) + "  "
              + " ".join(f"{np.mean(np.abs(x) > 1):.3f}" for x in d) + "  "
              + " ".join(f"{np.mean((x[m] <= budget[m]) != fits[m]):.3f}" for x in answers))


if __name__ == "__main__":
    cmd, rest = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "collect" and len(rest) in (4, 5):
        collect(rest[0], int(rest[1]), int(rest[2]), rest[3],
                *([tuple(rest[4].split(","))] if len(rest) == 5 else []))
    elif cmd == "train" and len(rest) >= 3 and rest[2] == "--":
        raise SystemExit(train(rest[0], float(rest[1]), rest[3:]))
    elif cmd == "score" and len(rest) >= 5:
        score(rest[0], int(rest[1]), int(rest[2]), rest[3], rest[4:])
    elif cmd == "mara" and len(rest) >= 2 and rest[1] == "--":
        raise SystemExit(train_mara(rest[0], rest[2:]))
    elif cmd == "compare" and len(rest) >= 7:
        compare(rest[0], int(rest[1]), int(rest[2]), rest[3], rest[4], rest[5:])
    elif cmd == "error" and len(rest) == 4:
        error(rest[0], int(rest[1]), int(rest[2]), rest[3])
    else:
        raise SystemExit(__doc__)
