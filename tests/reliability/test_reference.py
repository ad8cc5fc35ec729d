"""The vectorised simulator against the plain-Python reference (``reference.py``).

Both are driven with the same workload and the same actions (legal, masked and
conflicting), and after every step the whole visible state must be equal bit for bit:
counters, task statuses, slot contents, cumulative work, observed losses, psi, slope,
histories, last-slot bookkeeping, the masks, rewards and returns (see the reference's
numeric contract). Covered: the PettingZoo env (B = 1) on random configurations and on
every preset, and the batched simulator (B > 1) across automatic resets, with
heterogeneous speeds and switching costs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core_env
from core_env.state import ACTIVE, EXPIRED, FUTURE, QUEUED, SUCCEEDED
from core_env.workload import generate_workload

from .reference import ReferenceSim
from .strategies import ACTION_STYLES, HEAVY, actions_for, configs

STATUS = {"future": FUTURE, "queued": QUEUED, "active": ACTIVE, "succeeded": SUCCEEDED,
          "expired": EXPIRED}


def assert_same_state(sim, row: int, ref: ReferenceSim, where: str) -> None:
    """Every quantity the spec defines, vectorised state row ``row`` vs the reference."""
    def eq(name, got, want):
        assert np.array_equal(np.asarray(got), np.asarray(want)), (
            f"{where}: {name} differs: simulator {got!r}, reference {want!r}")

    eq("t", sim.t[row], ref.t)
    for name in ("arrived", "completed", "expired", "illegal", "conflicts", "switches",
                 "restores", "busy"):
        eq(name, getattr(sim, name)[row], ref.counts[name])
    eq("queued", sim.queued[row], ref.n_queued)
    m = len(ref.tasks)
    eq("status", sim.status[row, :m], [STATUS[t.status] for t in ref.tasks])
    eq("slot_task", sim.slot_task[row], [-1 if t is None else t.row for t in ref.slots])
    eq("last_task", sim.last_task[row], ref.last_task)
    eq("last_slot", sim.last_slot[row], ref.last_slot)
    eq("held_task", sim.held_task[row], ref.held)
    for k, task in enumerate(ref.slots):
        if task is None:
            continue
        n_obs = len(task.history)
        for name, want in (("slot_deadline", task.deadline), ("slot_arrival", task.arrival),
                           ("slot_admitted", task.admitted), ("slot_cap", task.cap),
                           ("slot_alpha", task.alpha), ("slot_log_target", task.log_target),
                           ("slot_work", task.work), ("slot_n_obs", n_obs),
                           ("slot_nodes_last", task.nodes_last), ("slot_psi", task.psi),
                           ("slot_slope", task.slope)):
            eq(f"{name}[{k}]", getattr(sim, name)[row, k], want)
        if n_obs:
            eq(f"slot_log_loss[{k}]", sim.slot_log_loss[row, k], task.log_loss)
            eq(f"slot_first_log_loss[{k}]", sim.slot_first_log_loss[row, k],
               task.first_log_loss)
            eq(f"hist_log_work[{k}]", sim.hist_log_work[row, k, :n_obs],
               [w for w, _ in task.history])
            eq(f"hist_log_loss[{k}]", sim.hist_log_loss[row, k, :n_obs],
               [y for _, y in task.history])


def assert_same_mask(mask: np.ndarray, ref: ReferenceSim, where: str) -> None:
    """int8[N, K+1] masks: idle always legal, a slot legal iff it holds a task."""
    want = np.ones_like(mask)
    want[:, 1:] = [t is not None for t in ref.slots]
    assert np.array_equal(mask, want), f"{where}: action masks differ"


def run_pettingzoo_vs_reference(cfg, seed: int, style: str, action_seed: int) -> int:
    """One whole episode of the PettingZoo env and the reference in lockstep; returns the
    number of steps."""
    env = core_env.CoreSchedulerEnv(cfg)
    obs, _ = env.reset(seed=seed)
    ref = ReferenceSim(cfg, env.workload)
    agents = env.possible_agents
    assert_same_state(env.sim, 0, ref, "reset")
    assert_same_mask(np.stack([obs[a]["action_mask"] for a in agents]), ref, "reset")
    rng = np.random.default_rng(action_seed)
    last = None
    steps = 0
    while env.agents:
        mask = np.stack([obs[a]["action_mask"] for a in agents])
        act = actions_for(style, rng, mask, last)
        last = act
        obs, rew, term, trunc, infos = env.step({a: int(x) for a, x in zip(agents, act, strict=False)})
        r = ref.step([int(x) for x in act])
        steps += 1
        where = f"seed {seed}, step {steps}, actions {act.tolist()}"
        assert_same_state(env.sim, 0, ref, where)
        assert rew[agents[0]] == r.reward, where
        assert (term[agents[0]], trunc[agents[0]]) == (r.terminated, r.truncated), where
        if env.agents:
            assert_same_mask(np.stack([obs[a]["action_mask"] for a in agents]), ref, where)
    stats = infos[agents[0]]["episode"]
    for key, want in ref.episode_stats().items():
        assert stats[key] == want, key
    assert stats["return"] == ref.ep_return
    return steps


@HEAVY
@given(cfg=configs(), seed=st.integers(0, 2**31 - 1), style=st.sampled_from(ACTION_STYLES),
       action_seed=st.integers(0, 2**31 - 1))
def test_pettingzoo_env_equals_reference_on_random_configurations(cfg, seed, style,
                                                                   action_seed):
    run_pettingzoo_vs_reference(cfg, seed, style, action_seed)


@pytest.mark.parametrize("preset", ["CoRE-Small-v0", "CoRE-HeldOut-v0"])
@pytest.mark.parametrize("overrides", [
    {},
    {"speed_choices": (0.5, 1.0, 2.5), "switch_cost": 0.3},
    {"node_speeds": None, "switch_cost": 0.75, "shaping_beta": 3.0},
    {"max_visible_tasks": 3, "load": 4.0, "switch_cost": 0.2},
], ids=["plain", "hetero-switch", "switch-beta", "queue-pressure"])
def test_pettingzoo_env_equals_reference_on_presets(preset, overrides):
    cfg = core_env.make_config(preset, **overrides)
    n_seeds = 12 if preset == "CoRE-Small-v0" else 1
    for seed in range(n_seeds):
        steps = run_pettingzoo_vs_reference(cfg, seed, ACTION_STYLES[seed % 6], 1000 + seed)
        assert steps > 0


@pytest.mark.parametrize("overrides", [
    {},
    {"speed_choices": (0.25, 1.0, 3.0), "switch_cost": 0.5},
    {"node_speeds": (1.0, 2.0, 0.5, 4.0), "switch_cost": 0.1, "max_steps": 30},
    {"max_visible_tasks": 2, "load": 3.0},
], ids=["plain", "hetero-switch", "fixed-speeds-truncated", "queue-pressure"])
def test_batched_simulator_equals_reference_across_auto_resets(overrides):
    """B = 5 environments, 400 steps (several episodes each): environment b must follow the
    reference fed with the workloads drawn one after another from ``default_rng(seeds[b])``."""
    cfg = core_env.make_config("CoRE-Small-v0", **overrides)
    seeds = [11, 12, 13, 14, 15]
    envs = core_env.BatchedCoreEnv(cfg, num_envs=len(seeds))
    obs, mask = envs.reset(seed=seeds)
    rngs = [np.random.default_rng(s) for s in seeds]
    refs = [ReferenceSim(cfg, generate_workload(cfg, r)) for r in rngs]
    for b, ref in enumerate(refs):
        assert_same_state(envs.sim, b, ref, f"env {b} reset")
    act_rng = np.random.default_rng(7)
    episodes = 0
    for step in range(400):
        act = np.stack([actions_for("mixed", act_rng, mask[b], None) for b in range(len(seeds))])
        obs, mask, reward, done, info = envs.step(act)
        for b, ref in enumerate(refs):
            r = ref.step([int(x) for x in act[b]])
            where = f"env {b}, step {step}"
            assert reward[b] == r.reward, where
            assert done[b] == (r.terminated or r.truncated), where
            assert info["truncated"][b] == r.truncated, where
            if done[b]:
                i = list(info["episode"]["env"]).index(b)
                for key, want in ref.episode_stats().items():
                    assert info["episode"][key][i] == want, where
                refs[b] = ref = ReferenceSim(cfg, generate_workload(cfg, rngs[b]))
                episodes += 1
            assert_same_state(envs.sim, b, ref, where)
            assert_same_mask(mask[b], ref, where)
    assert episodes >= len(seeds)  # the auto-reset path was exercised for every env


def test_pettingzoo_env_equals_reference_on_the_training_preset():
    """Two full CoRE-v0 episodes (16 nodes, K = 32, about 350 steps each)."""
    cfg = core_env.make_config("CoRE-v0", speed_choices=(0.5, 1.0, 2.0), switch_cost=0.2)
    for seed in range(2):
        run_pettingzoo_vs_reference(cfg, seed, "mixed", seed)
