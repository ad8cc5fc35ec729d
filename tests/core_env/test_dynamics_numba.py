"""The compiled dynamics and observations (core_env._dynamics_numba) against the numpy reference:
the same bits in every state array, observation, mask and reward, step by step."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import core_env
from core_env import dynamics, pmath
from core_env.dynamics import FAILED, LOST, OBSERVED
from core_env.observe import ObsBlocks, assemble

pytestmark = pytest.mark.skipif(pmath.BACKEND != "numba", reason="numba is not installed")


def _same_state(x, y, where):
    for f in dataclasses.fields(x):
        a, b = getattr(x, f.name), getattr(y, f.name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (where, f.name)


def _actions(rng, mask, policy):
    if policy == "uniform":  # illegal actions and cap conflicts included
        return rng.integers(0, mask.shape[2], size=mask.shape[:2])
    u = rng.random(mask.shape) * mask  # a uniform legal action per node
    return u.argmax(axis=-1)


def _run_both(preset, seed, steps, policy, num_envs=3, **overrides):
    envs = {b: core_env.make_batched(preset, num_envs=num_envs, seed=seed, backend=b,
                                     **overrides) for b in ("numpy", "numba")}
    out = {b: e.reset() for b, e in envs.items()}
    rng = np.random.default_rng(seed)
    finished = 0
    for t in range(steps):
        (o1, m1), (o2, m2) = out["numpy"][:2], out["numba"][:2]
        assert o1.tobytes() == o2.tobytes() and m1.tobytes() == m2.tobytes(), (preset, t)
        _same_state(envs["numpy"].sim, envs["numba"].sim, (preset, t))
        assert envs["numpy"].states().tobytes() == envs["numba"].states().tobytes()
        acts = _actions(rng, m1, policy)
        out = {b: e.step(acts) for b, e in envs.items()}
        r1, r2 = out["numpy"][2], out["numba"][2]
        assert r1.tobytes() == r2.tobytes(), (preset, t)
        e1, e2 = out["numpy"][4]["episode"], out["numba"][4]["episode"]
        assert e1.keys() == e2.keys()
        assert all(np.array_equal(e1[k], e2[k]) for k in e1), (preset, t)
        finished += len(e1["env"])
    return finished


@pytest.mark.parametrize("preset", sorted(core_env.PRESETS))
def test_every_preset_the_same_bits(preset):
    # the clusters of 256 and more nodes: one environment for 40 slots (their dynamics at
    # length are test_large_clusters_the_same_bits's)
    large = core_env.presets.make_config(preset).cluster.n_nodes >= 256
    _run_both(preset, seed=7, steps=40 if large else 120, policy="masked",
              num_envs=1 if large else 3)


@pytest.mark.parametrize("policy, overrides", [
    ("uniform", {}),  # masked actions and cap conflicts
    ("masked", {"switch_cost": 0.3, "speed_choices": (0.5, 1.0, 2.0), "shaping_beta": 2.5}),
    ("masked", {"max_visible_tasks": 2, "load": 3.0}),  # long queues, queued expiries
    ("uniform", {"n_nodes": 5, "max_visible_tasks": 3, "max_steps": 15}),  # truncation
    ("masked", {"node_speeds": (0.5, 1.0, 1.5, 4.0), "parallelism_choices": (1, 3, 4)}),
])
def test_small_configurations_across_auto_resets(policy, overrides):
    assert _run_both("CoRE-Small-v0", 3, 260, policy, num_envs=4, **overrides) > 4


@pytest.mark.parametrize("n", [256, 1024])
def test_large_clusters_the_same_bits(n):
    _run_both("CoRE-v0", 11, 25, "masked", num_envs=1, n_nodes=n, max_visible_tasks=n // 2,
              base_arrival_rate=0.65 * n / 16)


def test_loss_hook_outcomes_the_same_bits():
    """Live mode's path: losses and outcomes (observed, lost, failed) from a hook."""
    seen = {}

    def hook_for(backend):
        rng = np.random.default_rng(5)

        def hook(trained):
            seen.setdefault(backend, []).append(
                tuple(np.asarray(x).tobytes() for x in trained))
            outcome = rng.choice([OBSERVED, OBSERVED, OBSERVED, LOST, FAILED],
                                 size=trained.rows.size)
            return -0.01 * trained.work.astype(np.float64) + rng.normal(size=outcome.size), \
                outcome
        return hook

    cfg = core_env.make_config("CoRE-Small-v0")
    states = {}
    for backend in ("numpy", "numba"):
        env = core_env.CoreSchedulerEnv(cfg, backend=backend)
        env.reset(seed=4)
        hook, rng = hook_for(backend), np.random.default_rng(1)
        params = env.params
        for _ in range(40):
            joint = rng.integers(0, cfg.cluster.max_visible_tasks + 1, cfg.cluster.n_nodes)
            dynamics.step(env.sim, joint[None, :], params, loss_hook=hook)
        states[backend] = env.sim
    assert seen["numpy"] == seen["numba"] and len(seen["numpy"]) == 40
    _same_state(states["numpy"], states["numba"], "hook")
    assert states["numba"].expired[0] > 0 and states["numba"].completed[0] >= 0


def test_pettingzoo_and_central_views_on_both_backends():
    for make in (lambda b: core_env.parallel_env(preset="CoRE-Small-v0", backend=b),
                 lambda b: core_env.CentralCoreEnv(preset="CoRE-Small-v0", backend=b)):
        runs = []
        for backend in ("numpy", "numba"):
            env, rng, trace = make(backend), np.random.default_rng(2), []
            obs, _ = env.reset(seed=9)
            for _ in range(80):
                if isinstance(env, core_env.CentralCoreEnv):
                    act = _actions(rng, obs["action_mask"][None], "masked")[0]
                    obs, r, te, tr, info = env.step(act)
                    trace.append((obs["state"].tobytes(), r, te, tr, str(info)))
                    if te or tr:
                        obs, _ = env.reset()
                else:
                    mask = np.stack([obs[a]["action_mask"] for a in env.possible_agents])
                    act = _actions(rng, mask[None], "masked")[0]
                    obs, r, te, tr, info = env.step(dict(zip(env.possible_agents,
                                                             act.tolist(), strict=False)))
                    trace.append((env.state().tobytes(), str(r), str(info)))
                    if not env.agents:
                        obs, _ = env.reset()
            runs.append(trace)
        assert runs[0] == runs[1]


def test_backend_argument_is_checked():
    with pytest.raises(ValueError, match="backend: expected one of"):
        core_env.parallel_env(preset="CoRE-Small-v0", backend="cuda")
    with pytest.raises(ValueError, match="backend: expected one of"):
        core_env.make_batched("CoRE-Small-v0", num_envs=2, backend="fast")
    assert core_env.parallel_env(preset="CoRE-Small-v0").params.backend == "numba"


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_observation_blocks_assemble_to_the_full_observations(backend):
    envs = {o: core_env.make_batched("CoRE-Small-v0", num_envs=3, seed=1, backend=backend,
                                     observations=o) for o in ("full", "blocks")}
    out = {o: e.reset() for o, e in envs.items()}
    rng = np.random.default_rng(0)
    for _ in range(60):
        blocks = out["blocks"][0]
        assert isinstance(blocks, ObsBlocks)
        assert assemble(blocks).tobytes() == out["full"][0].tobytes()
        assert out["blocks"][1].tobytes() == out["full"][1].tobytes()
        assert envs["blocks"].states().tobytes() == envs["full"].states().tobytes()
        acts = _actions(rng, out["full"][1], "masked")
        out = {o: e.step(acts) for o, e in envs.items()}
    with pytest.raises(ValueError, match="observations: expected one of"):
        core_env.make_batched("CoRE-Small-v0", num_envs=2, observations="tokens")
