"""PPO for MARA's MAT on the batched simulator: ``mara-train`` (SPEC §5).

    mara-train                                   # the default recipe: the shipped checkpoint
    mara-train --env-steps 200000 --out runs/mara_quick    # a quick run
    mara-train --resume runs/mara/last.pt        # continue an interrupted run
    mara-train --members 3 --out runs/recipe     # 3 runs in parallel, then distilled
    tensorboard --logdir runs/mara

Loop: ``num_envs`` environments of :func:`core_env.make_batched` run ``rollout_len`` slots
with the MAT decoding autoregressively (sampling); forecast columns come from a
:class:`~core_env.forecast.cache.ForecastCache` around the chosen forecaster (FM by
default). Advantages by GAE with gamma = 1 (the potential-based shaping is only
policy-invariant at gamma = 1; SPEC §3) on per-node values and the shared team reward; an
environment that finishes an episode is a terminal (its next value is 0); the step after a
rollout is bootstrapped with the value. Then ``epochs`` passes of ``minibatches``
minibatches: the clipped surrogate on the joint action's ratio, the value
loss on normalised returns (running mean/std of the returns), an entropy bonus, gradient
clipping.

Seeding: ``seed`` seeds the environments' workloads (``make_batched(seed=seed)``) and one
``torch.Generator`` for initialisation, action sampling and minibatch order. Same seed,
same config, same thread count on the same machine: the same checkpoint. A resumed run
re-seeds its environments with ``seed + update`` and restores the generator, so it is
reproducible too, but it is not bit-identical to an uninterrupted run (the environments'
in-flight episodes are not saved).

TensorBoard keys are defined in ``docs/mara.md``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from mara_agents.forecast.registry import make_forecaster
from mara_agents.mat.checkpoint import (
    load_checkpoint,
    model_from_checkpoint,
    save_checkpoint,
    widened_model,
)
from mara_agents.mat.inputs import index_inputs, stack_inputs
from mara_agents.mat.model import MAT, init_weights
from mara_agents.train.config import PPOConfig
from mara_agents.train.fair import TenantLagrangian
from mara_agents.train.imitation import dagger
from mara_agents.train.ppo import RunningNorm, clipped_surrogate, explained_variance, gae
from mara_agents.train.rollout import Rollout


# --------------------------------------------------------------------------- training
class Trainer:
    """One MARA PPO run (see the module docstring); :meth:`run` trains to ``env_steps``."""

    def __init__(self, cfg: PPOConfig, forecaster: Any | None = None) -> None:
        self.cfg = cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.forecaster = (make_forecaster(cfg.forecaster, cfg.fm_steps, cfg.fm_samples)
                           if forecaster is None else forecaster)
        self.rollout = Rollout(cfg.env_config(), cfg.num_envs, self.forecaster,
                               cfg.placement)
        self.layout = self.rollout.layout
        self.model = MAT(cfg.model, self.layout)
        init_weights(self.model, self.gen)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, eps=1e-5)
        self.norm = RunningNorm()
        self.update = 0
        self.env_steps = 0
        self.curve: list[dict[str, float]] = []
        self.imitation: list[dict[str, float | None]] = []
        self.imitation_seconds = 0.0
        self.fair = (TenantLagrangian(cfg.env_config().workload.tenant_shares,
                                      cfg.fair_fraction, cfg.fair_lr, 2 * cfg.num_envs)
                     if cfg.fair_fraction else None)
        self.out = Path(cfg.out)
        if cfg.resume and cfg.init:
            raise ValueError("init: expected '' when resume is set (resume restores weights)")
        if cfg.init:
            self._init(Path(cfg.init))
        if cfg.resume:
            self._resume(Path(cfg.resume))
        # the critic warm-up's optimiser (value head only)
        self.value_opt = torch.optim.Adam(self.model.value_head.parameters(),
                                          lr=cfg.critic_lr, eps=1e-5)
        self.rollout.reset(cfg.seed + self.update)

    def _init(self, path: Path) -> None:
        blob = load_checkpoint(path)
        mine = self.cfg.model.to_dict()
        diff = {k: v for k, v in blob["mat_config"].items() if mine.get(k) != v}
        if diff:
            flags = " ".join((f"--{'' if v else 'no-'}model-{k.replace('_', '-')}"
                              if isinstance(v, bool) else f"--model-{k.replace('_', '-')} {v}")
                             for k, v in diff.items())
            raise ValueError(f"init: {path} is a MAT with other sizes than the config's "
                             f"model ({diff}); pass {flags}")
        # a checkpoint trained before the env gained features reads them from zero weights
        self.model = widened_model(blob, self.layout, str(path))
        self.model.train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, eps=1e-5)
        self.imitation = json.loads(blob.get("imitation", "[]"))
        self.imitation_seconds = float(blob.get("imitation_seconds", 0.0))

    def _resume(self, path: Path) -> None:
        blob = load_checkpoint(path)
        diff = self.cfg.differences(blob["train_config"])
        if diff:
            raise ValueError(f"resume: {path} was trained with a different config "
                             f"(fields {diff})")
        self.model = model_from_checkpoint(blob, self.layout, str(path))
        self.model.train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, eps=1e-5)
        self.opt.load_state_dict(blob["optimizer"])
        self.norm.load(blob["value_norm"])
        self.gen.set_state(blob["generator"])
        self.update = int(blob["update"])
        self.env_steps = int(blob["env_steps"])
        self.curve = json.loads(blob["curve"])
        self.imitation = json.loads(blob["imitation"])
        self.imitation_seconds = float(blob["imitation_seconds"])
        if self.fair is not None:
            self.fair.load(json.loads(blob["fair"]))

    def collect(self) -> dict[str, Any]:
        """One rollout of ``rollout_len`` steps; returns the tensors of the update."""
        cfg = self.cfg
        xs, acts, logps, vals, rews, dones = [], [], [], [], [], []
        finished: list[dict[str, float]] = []
        self.model.eval()
        for _ in range(cfg.rollout_len):
            x = self.rollout.inputs()
            with torch.no_grad():
                a, lp, v = self.model.act(x, generator=self.gen)
            reward, done, ep = self.rollout.step(a.numpy())
            if self.fair is not None:  # the Lagrangian's weighted completions
                assert self.rollout.tenant_successes is not None  # a fair run has tenants
                reward = self.fair.reward(self.rollout.tenant_successes)
                self.fair.observe(ep["tenant_arrived"], ep["tenant_completed"])
            finished += [{"completion_rate": float(c), "return": float(r)}
                         for c, r in zip(ep["completion_rate"], ep["return"], strict=False)]
            xs.append(x)
            acts.append(a)
            logps.append(lp)
            vals.append(v * self.norm.std + self.norm.mean)
            rews.append(torch.from_numpy(np.asarray(reward, dtype=np.float32)))
            dones.append(torch.from_numpy(np.asarray(done)))
        with torch.no_grad():
            _, _, last_v = self.model.encode(self.rollout.inputs())
        last_v = last_v * self.norm.std + self.norm.mean
        values = torch.stack(vals)
        adv, ret = gae(torch.stack(rews), values, torch.stack(dones), last_v, cfg.gamma,
                       cfg.gae_lambda)
        self.env_steps += cfg.rollout_len * cfg.num_envs
        return {"x": stack_inputs(xs), "actions": torch.cat(acts), "logp": torch.cat(logps),
                "adv": adv.flatten(0, 1), "ret": ret.flatten(0, 1),
                "values": values.flatten(0, 1), "episodes": finished}

    def learn(self, batch: dict[str, Any]) -> dict[str, float]:
        """PPO epochs over one rollout; returns the mean of the logged quantities."""
        cfg = self.cfg
        frac = min(self.env_steps / cfg.env_steps, 1.0)
        for group in self.opt.param_groups:
            group["lr"] = cfg.lr * (1.0 - 0.9 * frac)
        self.norm.update(batch["ret"])
        ret_n = (batch["ret"] - self.norm.mean) / self.norm.std
        adv = batch["adv"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        n = adv.shape[0]
        size = n // cfg.minibatches
        logs: dict[str, list[float]] = {k: [] for k in ("policy", "value", "entropy",
                                                         "approx_kl", "clip_frac")}
        self.model.train()
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=self.gen)
            for m in range(cfg.minibatches):
                idx = perm[m * size:(m + 1) * size]
                x = index_inputs(batch["x"], idx)
                logp, ent, v = self.model.evaluate(x, batch["actions"][idx])
                old = batch["logp"][idx]
                pl, cf = clipped_surrogate(logp.sum(-1), old.sum(-1), adv[idx].mean(-1),
                                           cfg.clip)
                vl = torch.mean((v - ret_n[idx]) ** 2)
                el = ent.mean()
                if self.update < cfg.critic_warmup:
                    # only the value head learns: the shared encoder (hence the stage-1
                    # policy) stays as it is while the critic catches up
                    self.value_opt.zero_grad(set_to_none=True)
                    vl.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.value_head.parameters(),
                                                   cfg.max_grad_norm)
                    self.value_opt.step()
                else:
                    loss = pl + cfg.value_coef * vl - cfg.ent_coef * el
                    self.opt.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                    self.opt.step()
                with torch.no_grad():
                    log_ratio = (logp - old).sum(-1)  # joint action
                    kl = torch.mean(torch.exp(log_ratio) - 1.0 - log_ratio)
                for k, val in (("policy", pl), ("value", vl), ("entropy", el),
                               ("approx_kl", kl), ("clip_frac", cf)):
                    logs[k].append(float(val.detach()))
        out = {k: float(np.mean(v)) for k, v in logs.items()}
        out["explained_variance"] = explained_variance(batch["values"], batch["ret"])
        out["lr"] = self.opt.param_groups[0]["lr"]
        return out

    def save(self, path: Path) -> None:
        save_checkpoint(path, self.model, self.layout, self.cfg.to_dict(), self.norm.state(), {
            "optimizer": self.opt.state_dict(), "generator": self.gen.get_state(),
            "update": self.update, "env_steps": self.env_steps,
            "curve": json.dumps(self.curve), "imitation": json.dumps(self.imitation),
            "imitation_seconds": self.imitation_seconds,
            **({"fair": json.dumps(self.fair.state())} if self.fair is not None else {})})

    def run(self) -> dict[str, Any]:
        """Train until ``env_steps``; writes checkpoints, ``curve.json`` and TensorBoard
        logs to ``out``; returns a summary."""
        cfg = self.cfg
        writer = SummaryWriter(str(self.out / "tb"))
        per_update = cfg.rollout_len * cfg.num_envs
        total = math.ceil(cfg.env_steps / per_update)
        bar = tqdm(total=total, initial=self.update, desc="train MARA", unit="update",
                   disable=not cfg.progress)
        t0 = time.perf_counter()
        if self.update == 0 and not self.imitation and not cfg.init and cfg.imitation_iters:
            self.imitation = dagger(self.rollout, self.model, self.gen, cfg.imitation_iters,
                                    cfg.imitation_steps, cfg.imitation_epochs,
                                    cfg.imitation_decay, cfg.imitation_lr, cfg.max_grad_norm,
                                    log=writer.add_scalar)
            self.imitation_seconds = round(time.perf_counter() - t0, 1)
            self.save(self.out / "imitation.pt")
            if cfg.progress:
                last = self.imitation[-1]
                rate = last["completion_rate"]  # None when no episode finished
                tqdm.write(f"imitation: {len(self.imitation)} iterations in "
                           f"{self.imitation_seconds:.0f} s, agreement "
                           f"{last['agreement']:.3f}, completion "
                           f"{'n/a' if rate is None else format(rate, '.3f')}")
        recent: list[dict[str, float]] = []
        while self.update < total:
            t_up = time.perf_counter()
            batch = self.collect()
            t_roll = time.perf_counter() - t_up
            logs = self.learn(batch)
            self.update += 1
            fair = self.fair.update() if self.fair is not None else {}
            for k, v in fair.items():
                writer.add_scalar(f"fair/{k}", v, self.env_steps)
            recent = (recent + batch["episodes"])[-4 * cfg.num_envs:]
            step = self.env_steps
            for k in ("policy", "value", "entropy"):
                writer.add_scalar(f"loss/{k}", logs[k], step)
            for k in ("approx_kl", "clip_frac", "explained_variance", "lr"):
                writer.add_scalar(f"ppo/{k}", logs[k], step)
            writer.add_scalar("perf/env_steps_per_s",
                              per_update / max(time.perf_counter() - t_up, 1e-9), step)
            writer.add_scalar("perf/rollout_fraction",
                              t_roll / max(time.perf_counter() - t_up, 1e-9), step)
            if batch["episodes"]:
                cr = float(np.mean([e["completion_rate"] for e in batch["episodes"]]))
                writer.add_scalar("rollout/completion_rate", cr, step)
                writer.add_scalar("rollout/episode_return",
                                  float(np.mean([e["return"] for e in batch["episodes"]])), step)
                writer.add_scalar("rollout/episodes", len(batch["episodes"]), step)
                self.curve.append({"env_steps": step, "completion_rate": cr,
                                   "episodes": len(batch["episodes"]),
                                   "seconds": round(time.perf_counter() - t0, 1),
                                   **{f"fair_{k}": round(v, 4) for k, v in fair.items()}})
            if recent:
                bar.set_postfix(cr=f"{np.mean([e['completion_rate'] for e in recent]):.3f}",
                                kl=f"{logs['approx_kl']:.4f}")
            bar.update(1)
            if self.update % cfg.checkpoint_every == 0 or self.update == total:
                self.save(self.out / "last.pt")
        bar.close()
        writer.close()
        seconds = time.perf_counter() - t0
        (self.out / "curve.json").write_text(json.dumps(
            {"imitation": self.imitation, "imitation_seconds": self.imitation_seconds,
             "ppo": self.curve, "seconds": round(seconds, 1)}, indent=1) + "\n")
        return {"updates": self.update, "env_steps": self.env_steps,
                "seconds": round(seconds, 1), "checkpoint": str(self.out / "last.pt")}
