"""Stage 1 of MARA's training: imitate a privileged teacher (DAgger; Ross et al. 2011).

The teacher is the oracle-informed greedy scheduler
(:class:`~mara_agents.baselines.OracleGreedyPolicy`), which reads every task's *true*
remaining work. The student (the MAT) only ever sees what MARA sees at test time: the
observations with the FM forecast columns. So the student learns to act like a scheduler
that knows the remaining work, from forecasts of it; what it cannot infer from the
forecasts it cannot copy, and PPO (stage 2, :mod:`mara_agents.train.trainer`) then optimises the
team reward from that starting point.

DAgger: iteration i runs the batched environments for ``steps`` slots, executing the
teacher's joint action with probability ``beta_i = decay**i`` per environment and slot and
the student's sampled action otherwise, and labels every visited state with the teacher's
action. The student is trained on all states gathered so far to maximise the teacher-forced
log-likelihood of the teacher's joint action (the same :meth:`MAT.evaluate` path PPO uses,
with the realised sequential masks).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from core_env.curves import first_crossing
from core_env.forecast.cache import achievable_work
from core_env.forecast.protocol import point_forecast
from core_env.forecast.wrapper import FORECAST_FEATURES, _extend, forecast_columns
from core_env.state import BatchState
from mara_agents.mat.inputs import index_inputs, stack_inputs
from mara_agents.mat.model import MAT, Inputs
from mara_agents.train.rollout import Rollout


def true_remaining(sim: BatchState) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(env, slot, remaining, achievable)`` of every occupied slot of a batch: the true
    remaining work (the ``OracleForecaster``'s point forecast, capped as it caps it) and the
    work the task can still get before its deadline."""
    env, slot = np.nonzero(sim.slot_task >= 0)
    key = sim.slot_task[env, slot]
    n_obs = sim.slot_n_obs[env, slot]
    x_now = np.where(n_obs > 0, np.log(np.maximum(sim.slot_work[env, slot], 1e-30)), -np.inf)
    required = first_crossing(sim.w_log_loss[env, key].astype(np.float64),
                              sim.slot_log_target[env, slot].astype(np.float64), x_now)
    s_now = np.where(n_obs > 0, sim.slot_work[env, slot].astype(np.float64), 0.0)
    budget = achievable_work(sim)[env, slot]
    return env, slot, point_forecast(required - s_now, budget).q50, budget


def oracle_columns(sim: BatchState) -> np.ndarray:
    """float32[B, K, 5] forecast columns of the true remaining work (what
    ``LossForecastWrapper(env, OracleForecaster.for_env(env))`` gives), for every
    environment of a batch."""
    out = np.zeros(sim.slot_task.shape + (len(FORECAST_FEATURES),), dtype=np.float32)
    env, slot, remaining, budget = true_remaining(sim)
    if env.size:
        out[env, slot] = forecast_columns(point_forecast(remaining, budget), budget)
    return out


def widen(obs: np.ndarray, plain_layout: Any, extra: np.ndarray) -> np.ndarray:
    """float32[B, N, D'] observations with ``extra[B, K, E]`` appended to every task row."""
    return _extend(obs, plain_layout, extra[:, None])


class BatchedTeacher:
    """The oracle-informed greedy policy applied to every environment of a batch.

    Args:
        config: the environments' configuration.
        layout: the wrapped observation layout (with forecast columns).
    """

    def __init__(self, config: Any, layout: Any) -> None:
        from mara_agents.baselines import OracleGreedyPolicy

        self.agents = [f"node_{i}" for i in range(layout.n_nodes)]
        fake_env = SimpleNamespace(layout=layout, unwrapped=SimpleNamespace(config=config),
                                   possible_agents=self.agents)
        self.policy = OracleGreedyPolicy(fake_env)
        self.policy.reset(0)  # the greedy rule uses no randomness

    def actions(self, wide_obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """int64[B, N] teacher actions from oracle-widened observations, in canonical order
        (:func:`canonical_order`)."""
        out = np.zeros(mask.shape[:2], dtype=np.int64)
        for b in range(wide_obs.shape[0]):
            obs = {a: {"observation": wide_obs[b, i], "action_mask": mask[b, i]}
                   for i, a in enumerate(self.agents)}
            act = self.policy.act(obs)
            out[b] = [act[a] for a in self.agents]
        return canonical_order(out, mask.shape[-1])


def canonical_order(actions: np.ndarray, n_actions: int) -> np.ndarray:
    """The same per-task node counts with nodes 0, 1, ... taking the served slots in
    ascending slot order and the idle nodes last.

    Without a switching cost (every preset) which node trains which task does not change
    the dynamics, only the counts do; this order makes the teacher's joint action a
    function of its counts, so the student does not have to guess the teacher's node
    bookkeeping. (Requires homogeneous node masks, true for every preset.)
    """
    counts = (actions[..., None] == np.arange(1, n_actions)).sum(axis=-2)  # [B, K]
    out = np.zeros_like(actions)
    n = actions.shape[-1]
    for b in range(actions.shape[0]):
        seq = np.repeat(np.arange(1, n_actions), counts[b])
        out[b, : seq.size] = seq
        out[b, seq.size:n] = 0
    return out


def imitation_loss(model: MAT, x: Inputs, teacher: torch.Tensor) -> torch.Tensor:
    """Mean negative teacher-forced log-likelihood of the teacher's joint actions."""
    logp, _, _ = model.evaluate(x, teacher)
    return -logp.mean()


def dagger(rollout: Rollout, model: MAT, generator: torch.Generator, iterations: int,
           steps: int, epochs: int, decay: float, lr: float, max_grad_norm: float,
           batch_size: int = 256, log: Any = None) -> list[dict[str, float | None]]:
    """Run DAgger on a rollout's environments, training ``model`` in place.

    Args:
        rollout: the environments (stepped from their current state).
        model: the MAT to train.
        generator: the run's torch generator (action sampling, teacher choice, minibatches).
        iterations: DAgger iterations.
        steps: slots per environment per iteration.
        epochs: passes over the aggregated data after each iteration.
        decay: beta_i = decay**i (iteration 0 executes the teacher only).
        lr: Adam learning rate.
        max_grad_norm: gradient-norm clip.
        batch_size: minibatch size of the supervised updates.
        log: optional callable ``log(tag, value, step)``.

    Returns:
        Per-iteration records: ``beta``, ``samples``, ``loss``, ``agreement`` (fraction of
        node actions where the student's greedy action equals the teacher's, on the new
        states, before training on them) and ``completion_rate`` of the episodes that
        finished during the iteration (None if none did).
    """
    teacher = BatchedTeacher(rollout.env.config, rollout.layout)
    opt = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-5)
    data_x: list[Inputs] = []
    data_a: list[torch.Tensor] = []
    history: list[dict[str, float | None]] = []
    for it in range(iterations):
        beta = decay ** it
        agree, total, finished = 0, 0, []
        model.eval()
        for _ in range(steps):
            x = rollout.inputs()
            obs, mask = rollout.obs, rollout.mask
            assert obs is not None and mask is not None  # as inputs() needs them
            wide = widen(obs, rollout.plain_layout, oracle_columns(rollout.sim))
            a_teacher = teacher.actions(wide, mask)
            with torch.no_grad():
                a_student, _, _ = model.act(x, generator=generator)
                greedy, _, _ = model.act(x, deterministic=True)
            agree += int((greedy.numpy() == a_teacher).sum())
            total += a_teacher.size
            use_teacher = (torch.rand(a_teacher.shape[0], generator=generator) < beta).numpy()
            executed = np.where(use_teacher[:, None], a_teacher, a_student.numpy())
            _, _, episodes = rollout.step(executed)
            finished += [float(c) for c in episodes["completion_rate"]]
            data_x.append(x)
            data_a.append(torch.from_numpy(a_teacher))
        xs = stack_inputs(data_x)
        acts = torch.cat(data_a)
        n = acts.shape[0]
        bs = min(batch_size, n)
        model.train()
        losses = []
        for _ in range(epochs):
            perm = torch.randperm(n, generator=generator)
            for s in range(0, n - bs + 1, bs):
                idx = perm[s:s + bs]
                loss = imitation_loss(model, index_inputs(xs, idx), acts[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
                opt.step()
                losses.append(float(loss.detach()))
        rec = {"iteration": it, "beta": beta, "samples": n,
               "loss": float(np.mean(losses)),
               "agreement": agree / max(total, 1),
               "completion_rate": float(np.mean(finished)) if finished else None}
        history.append(rec)
        if log is not None:
            for k in ("loss", "agreement", "completion_rate", "beta"):
                if rec[k] is not None:
                    log(f"imitation/{k}", rec[k], it)
    return history
