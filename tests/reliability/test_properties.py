"""Invariants of the dynamics, as hypothesis properties over random valid configurations and
random action sequences (legal, masked and conflicting; see ``strategies.py``).

Each example runs one whole episode of the PettingZoo env and records a snapshot of the
simulator state after every step; each property then checks one invariant on every step.
The invariants are stated from SPEC §3, not from the implementation, and most are
recomputed independently (delivered work from speeds, caps and alpha; psi and Phi from the
observed losses; observed losses from the workload's noise tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core_env
from core_env.curves import interp_log_loss
from core_env.state import ACTIVE, EXPIRED, QUEUED, SUCCEEDED

from .strategies import ACTION_STYLES, HEAVY, PROPERTY, actions_for, configs

SNAP_FIELDS = ("t", "arrived", "queued", "completed", "expired", "busy", "illegal",
               "conflicts", "switches")
SLOT_FIELDS = ("slot_task", "slot_work", "slot_psi", "slot_log_loss", "slot_first_log_loss",
               "slot_n_obs", "slot_log_target", "slot_deadline")


@dataclass
class Trace:
    """One episode: the env, its workload, and per-step snapshots (index 0 = after reset)."""

    env: Any
    snaps: list[dict[str, Any]] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    obs: list[dict] = field(default_factory=list)
    states: list[np.ndarray] = field(default_factory=list)
    ends: list[tuple[bool, bool]] = field(default_factory=list)
    episode: dict[str, Any] | None = None


def snapshot(env) -> dict[str, Any]:
    s = env.sim
    snap = {name: int(getattr(s, name)[0]) for name in SNAP_FIELDS}
    for name in SLOT_FIELDS:
        snap[name] = getattr(s, name)[0].copy()
    snap["status"] = s.status[0, : env.workload.n_tasks].copy()
    snap["last_task"] = s.last_task[0].copy()
    snap["speed"] = s.speed[0].copy()
    return snap


def run_trace(cfg, seed: int, style: str, action_seed: int) -> Trace:
    env = core_env.CoreSchedulerEnv(cfg)
    obs, _ = env.reset(seed=seed)
    tr = Trace(env=env)
    tr.snaps.append(snapshot(env))
    tr.obs.append(obs)
    tr.states.append(env.state().copy())
    rng = np.random.default_rng(action_seed)
    agents = env.possible_agents
    last = None
    while env.agents:
        mask = np.stack([obs[a]["action_mask"] for a in agents])
        act = actions_for(style, rng, mask, last)
        last = act
        obs, rew, term, trunc, infos = env.step({a: int(x) for a, x in zip(agents, act, strict=False)})
        tr.actions.append(act)
        tr.rewards.append(rew[agents[0]])
        assert len(set(rew.values())) == 1, "the team reward must be the same for every agent"
        tr.ends.append((term[agents[0]], trunc[agents[0]]))
        tr.snaps.append(snapshot(env))
        tr.obs.append(obs)
        tr.states.append(env.state().copy())
    tr.episode = infos[agents[0]]["episode"]
    return tr


def traces() -> st.SearchStrategy[Trace]:
    """One recorded episode per example."""
    return st.builds(run_trace, configs(), st.integers(0, 2**31 - 1),
                     st.sampled_from(ACTION_STYLES), st.integers(0, 2**31 - 1))


def trained_tasks(tr: Trace, i: int) -> dict[int, list[int]]:
    """Task row -> nodes that trained it in step i (from the state after the step)."""
    out: dict[int, list[int]] = {}
    for node, row in enumerate(tr.snaps[i + 1]["last_task"]):
        if row >= 0:
            out.setdefault(int(row), []).append(node)
    return out


def visible_rows(snap: dict[str, Any]) -> dict[int, int]:
    """Task row -> slot of every visible task."""
    return {int(r): k for k, r in enumerate(snap["slot_task"]) if r >= 0}


# ---------------------------------------------------------------------------- properties
@PROPERTY
@given(traces())
def test_a_node_trains_one_visible_task_and_no_task_exceeds_its_cap(tr):
    """Each training node picked a visible slot, and no task has more nodes than its cap;
    busy node-slots are exactly the nodes that trained; actions on empty slots and over the
    cap are the ones counted as illegal / conflicts."""
    wl = tr.env.workload
    for i, act in enumerate(tr.actions):
        before, after = tr.snaps[i], tr.snaps[i + 1]
        trained = trained_tasks(tr, i)
        slot_task = before["slot_task"]
        expected_illegal = sum(1 for a in act if a > 0 and slot_task[a - 1] < 0)
        picks = [a for a in act if a > 0 and slot_task[a - 1] >= 0]
        expected_conflicts = sum(max(0, picks.count(a) - int(wl.cap[slot_task[a - 1]]))
                                 for a in set(picks))
        assert after["illegal"] - before["illegal"] == expected_illegal
        assert after["conflicts"] - before["conflicts"] == expected_conflicts
        assert after["busy"] - before["busy"] == sum(len(v) for v in trained.values())
        visible = visible_rows(before)
        for row, nodes in trained.items():
            assert row in visible, f"step {i}: task {row} trained without being visible"
            assert len(nodes) <= wl.cap[row], f"step {i}: task {row} over its cap"
            for node in nodes:  # the node asked for this task's slot
                assert act[node] == visible[row] + 1
        # the lowest-numbered askers keep a contested task
        for row, nodes in trained.items():
            askers = [n for n, a in enumerate(act) if a == visible[row] + 1]
            assert nodes == askers[: int(wl.cap[row])]


@PROPERTY
@given(traces())
def test_resolved_tasks_never_train_again_and_stay_resolved(tr):
    resolved: set[int] = set()
    for i in range(len(tr.actions)):
        assert not set(trained_tasks(tr, i)) & resolved, f"step {i}: a resolved task trained"
        status = tr.snaps[i + 1]["status"]
        for row in resolved:
            assert status[row] in (SUCCEEDED, EXPIRED)
            assert status[row] == tr.snaps[i]["status"][row]
        resolved |= set(np.flatnonzero((status == SUCCEEDED) | (status == EXPIRED)).tolist())
    assert len(resolved) == tr.episode["completed"] + tr.episode["expired"]


def delivered_work(tr: Trace) -> np.ndarray:
    """float64[steps + 1, M] cumulative work of every task after every step, recomputed from
    the spec's rule (SPEC §9): (sum of the nodes' speeds, times (1 - c_j) for a node that does
    not hold the state of a task that has trained before) times k**(alpha - 1) for k nodes; a
    node holds the last task it trained."""
    wl = tr.env.workload
    out = np.zeros((len(tr.actions) + 1, wl.n_tasks))
    held = np.full(tr.env.config.cluster.n_nodes, -1)
    for i in range(len(tr.actions)):
        out[i + 1] = out[i]
        speed = tr.snaps[i]["speed"].astype(np.float64)
        for row, nodes in trained_tasks(tr, i).items():
            keep = float(np.float32(1.0 - wl.switch_cost[row]))
            v = sum(speed[n] * (keep if out[i, row] > 0 and held[n] != row else 1.0)
                    for n in nodes)
            out[i + 1, row] += v * len(nodes) ** (float(np.float32(wl.alpha[row])) - 1.0)
            held[list(nodes)] = row
    return out


@PROPERTY
@given(traces())
def test_cumulative_work_is_non_decreasing_and_equals_delivered_work(tr):
    """The simulator's float32 cumulative work of every visible task equals the delivered
    work recomputed in float64 (:func:`delivered_work`), and never decreases."""
    delivered = delivered_work(tr)
    assert np.all(np.diff(delivered, axis=0) >= 0)
    for i in range(len(tr.actions)):
        before, after = visible_rows(tr.snaps[i]), visible_rows(tr.snaps[i + 1])
        for row, k in after.items():
            work = float(tr.snaps[i + 1]["slot_work"][k])
            if row in before:
                assert work >= float(tr.snaps[i]["slot_work"][before[row]])
            assert work == pytest.approx(delivered[i + 1, row], rel=2e-5, abs=1e-6)
        for row in set(before) - set(after) - set(trained_tasks(tr, i)):
            assert tr.snaps[i + 1]["status"][row] == EXPIRED  # left without training


@PROPERTY
@given(traces())
def test_success_only_when_the_observed_loss_reaches_the_target_before_the_deadline(tr):
    """A task succeeds in slot t only if it trained in t < deadline and its observed loss
    (read off its noise path at its cumulative work) is <= its target; a trained task that
    stays visible has an observed loss above its target."""
    wl = tr.env.workload
    delivered = delivered_work(tr)
    for i in range(len(tr.actions)):
        before, after = tr.snaps[i], tr.snaps[i + 1]
        trained = trained_tasks(tr, i)
        newly = np.flatnonzero((after["status"] == SUCCEEDED) & (before["status"] != SUCCEEDED))
        assert after["completed"] - before["completed"] == newly.size
        for row in newly:
            assert row in trained, f"step {i}: task {row} succeeded without training"
            assert before["t"] < wl.deadline[row]
            y = interp_log_loss(wl.log_loss[row:row + 1].astype(np.float64),
                                np.log(delivered[i + 1, row:row + 1]))[0]
            assert y <= np.float32(wl.log_target[row]) + 1e-4
        for row, k in visible_rows(after).items():
            if row in trained:
                assert after["slot_log_loss"][k] > after["slot_log_target"][k] - 1e-6


@PROPERTY
@given(traces())
def test_arrived_equals_completed_plus_expired_plus_active_plus_queued(tr):
    for snap in tr.snaps:
        active = int((snap["slot_task"] >= 0).sum())
        assert snap["arrived"] == snap["completed"] + snap["expired"] + active + snap["queued"]
        st_ = snap["status"]
        assert (st_ == ACTIVE).sum() == active and (st_ == QUEUED).sum() == snap["queued"]
        assert (st_ == SUCCEEDED).sum() == snap["completed"]
        assert (st_ == EXPIRED).sum() == snap["expired"]
    end, wl = tr.snaps[-1], tr.env.workload
    term, trunc = tr.ends[-1]
    if term:  # a normal end resolves every task, and every task has arrived
        assert end["arrived"] == wl.n_tasks == end["completed"] + end["expired"]
    assert term != trunc


@PROPERTY
@given(traces())
def test_shaping_identity(tr):
    """r_t = C_t + beta (Phi_{t+1} - Phi_t) with Phi recomputed from the observed losses,
    and the episode's shaped return equals its number of successes, for any beta."""
    beta = tr.env.config.reward.shaping_beta
    phi_prev = 0.0
    for i, r in enumerate(tr.rewards):
        after = tr.snaps[i + 1]
        present = after["slot_task"] >= 0
        first = after["slot_first_log_loss"].astype(np.float64)
        y = after["slot_log_loss"].astype(np.float64)
        target = after["slot_log_target"].astype(np.float64)
        observed = present & (after["slot_n_obs"] > 0)
        gap = np.maximum(first - target, 1e-6)
        psi = np.where(observed, np.clip((first - y) / gap, 0.0, 1.0), 0.0)
        # psi comes from the float64 losses; the state keeps them in float32, whose
        # rounding (about 6e-8 of each log-loss) is divided by the gap
        tol = 2e-5 + 2e-7 * (np.abs(first) + np.abs(y) + np.abs(target)) / gap
        assert np.all(np.abs(after["slot_psi"] - psi)[present] <= tol[present])
        phi = 0.0 if any(tr.ends[i]) else float(psi.sum())
        c_t = after["completed"] - tr.snaps[i]["completed"]
        assert r == pytest.approx(c_t + beta * (phi - phi_prev), abs=1e-4 * max(beta, 1.0))
        phi_prev = phi
    assert sum(tr.rewards) == pytest.approx(tr.episode["completed"], abs=1e-9 * (1 + beta))
    assert tr.episode["return"] == pytest.approx(tr.episode["completed"],
                                                 abs=1e-9 * (1 + beta))


@PROPERTY
@given(traces())
def test_episode_statistics_are_consistent_and_utilisation_is_in_the_unit_interval(tr):
    ep, end, n = tr.episode, tr.snaps[-1], tr.env.config.cluster.n_nodes
    assert 0.0 <= ep["utilization"] <= 1.0 and 0.0 <= ep["completion_rate"] <= 1.0
    assert ep["length"] == len(tr.actions) == end["t"]
    assert ep["utilization"] == pytest.approx(end["busy"] / (end["t"] * n))
    assert ep["completion_rate"] == pytest.approx(end["completed"] / max(end["arrived"], 1))
    for key in ("arrived", "completed", "expired"):
        assert ep[key] == end[key]
    assert (ep["illegal_actions"], ep["capacity_conflicts"], ep["switches"]) == (
        end["illegal"], end["conflicts"], end["switches"])
    for i, act in enumerate(tr.actions):  # per step, too
        busy = tr.snaps[i + 1]["busy"] - tr.snaps[i]["busy"]
        assert 0 <= busy <= min(n, int((act > 0).sum()))


@PROPERTY
@given(traces())
def test_no_nan_or_inf_and_every_observation_is_inside_its_space(tr):
    env = tr.env
    space = env.observation_space(env.possible_agents[0])
    assert np.all(np.isfinite(tr.rewards))
    for obs, state in zip(tr.obs, tr.states, strict=False):
        assert np.all(np.isfinite(state)) and env.state_space.contains(state)
        for agent, o in obs.items():
            assert np.all(np.isfinite(o["observation"])), agent
            assert space.contains(o), f"{agent}: observation outside its declared space"
            assert o["action_mask"][0] == 1


@PROPERTY
@given(cfg=configs(), seed=st.integers(0, 2**31 - 1),
       styles=st.lists(st.sampled_from(ACTION_STYLES), min_size=2, max_size=2, unique=True))
def test_workload_depends_on_the_seed_alone(cfg, seed, styles):
    """Two different policies on the same seed face the same tasks and noise paths."""
    a, b = (run_trace(cfg, seed, style, 1) for style in styles)
    for name, x in a.env.workload._asdict().items():
        assert np.array_equal(x, getattr(b.env.workload, name)), name


@HEAVY
@given(cfg=configs(), seed=st.integers(0, 2**31 - 1), style=st.sampled_from(ACTION_STYLES))
def test_same_seed_and_actions_give_bit_identical_trajectories(cfg, seed, style):
    a, b = run_trace(cfg, seed, style, 5), run_trace(cfg, seed, style, 5)
    assert a.rewards == b.rewards and a.ends == b.ends and a.episode == b.episode
    for sa, sb in zip(a.states, b.states, strict=False):
        assert np.array_equal(sa, sb)


@HEAVY
@given(cfg=configs(max_nodes=4, max_slots=4, max_arrival_slots=12),
       seeds=st.lists(st.integers(0, 2**31 - 1), min_size=2, max_size=3),
       action_seed=st.integers(0, 2**31 - 1))
def test_batched_environment_b_follows_the_single_env_with_seed_b(cfg, seeds, action_seed):
    """Batched rows (B = 2-3, with auto-reset) replay exactly the single env's episodes on
    their own seeds when given the same actions, and report the same statistics."""
    envs = core_env.BatchedCoreEnv(cfg, num_envs=len(seeds))
    obs, mask = envs.reset(seed=seeds)
    singles = [core_env.CoreSchedulerEnv(cfg) for _ in seeds]
    single_obs = [e.reset(seed=s)[0] for e, s in zip(singles, seeds, strict=False)]
    for b, (env, o) in enumerate(zip(singles, single_obs, strict=False)):  # the first observations too
        assert np.array_equal(obs[b], np.stack([o[a]["observation"] for a in env.possible_agents]))
    rng = np.random.default_rng(action_seed)
    finished = [0] * len(seeds)
    for _ in range(200):
        act = np.stack([actions_for("mixed", rng, mask[b], None) for b in range(len(seeds))])
        obs, mask, reward, done, info = envs.step(act)
        assert np.all(np.isfinite(obs)) and np.all(np.isfinite(reward))
        for b, env in enumerate(singles):
            agents = env.possible_agents
            o, r, term, trunc, inf = env.step({a: int(x) for a, x in zip(agents, act[b], strict=False)})
            assert reward[b] == r[agents[0]]
            assert done[b] == (term[agents[0]] or trunc[agents[0]])
            if done[b]:
                i = list(info["episode"]["env"]).index(b)
                for key, val in inf[agents[0]]["episode"].items():
                    if key != "groups":  # the PettingZoo env's only
                        assert info["episode"][key][i] == val, key
                o, _ = env.reset()
                finished[b] += 1
            assert np.array_equal(obs[b], np.stack([o[a]["observation"] for a in agents]))
        if min(finished) >= 2:
            break
