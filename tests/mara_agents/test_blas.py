"""MARA's numpy inference runs BLAS on one thread, restores the setting, and computes what it
computes with BLAS on several threads (to float32 rounding: OpenBLAS's threaded products can
round differently, e.g. its Haswell kernels)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
threadpoolctl = pytest.importorskip("threadpoolctl")

from mara_agents.blas import one_blas_thread, single_blas_thread


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas"]


def test_one_thread_inside_and_the_setting_restored_after():
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        assert blas_threads() and all(n == 2 for n in blas_threads())

        @single_blas_thread
        def inside() -> list[int]:
            return blas_threads()

        assert all(n == 1 for n in inside())
        with one_blas_thread():
            assert all(n == 1 for n in blas_threads())
        assert all(n == 2 for n in blas_threads())


def test_inference_equals_multithreaded_blas():
    """The FM sampler gives the same samples to float32 rounding, and the MAT the same
    actions, with BLAS on two threads (the undecorated methods) as on one."""
    from mara_agents.forecast.forecaster import FlowMatchingForecaster
    from mara_agents.forecast.numpy_sampler import NumpySampler

    rng = np.random.default_rng(0)
    sampler = FlowMatchingForecaster.pretrained(backend="numpy")._numpy
    feats = rng.standard_normal((64, sampler.encoder[0][0].shape[0])).astype(np.float32)
    x0 = rng.standard_normal((64, 32, 32)).astype(np.float32)
    one = sampler.sample(feats, x0, 10)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        two = NumpySampler.sample.__wrapped__(sampler, feats, x0, 10)
    scale = np.abs(one).max()
    assert scale > 1.0 and np.abs(one - two).max() <= 1e-5 * scale

    import core_env
    from mara_agents.mat.inputs import select_inputs, split_observations
    from mara_agents.mat.numpy_infer import NumpyMAT
    from mara_agents.policy import make_policy

    env, policy = make_policy("mara", core_env.parallel_env(preset="CoRE-64-v0"))
    obs, _ = env.reset(seed=3)
    for _ in range(5):  # a few slots in, so that tasks are visible
        obs, *_ = env.step(policy.act(obs))
    agents = policy.agents
    x = select_inputs(split_observations(np.stack([obs[a]["observation"] for a in agents])[None],
                                         np.stack([obs[a]["action_mask"] for a in agents])[None],
                                         policy.layout), policy.columns)
    one = policy.greedy.act(x)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        two = NumpyMAT.act.__wrapped__(policy.greedy, x)
    assert np.array_equal(one, two) and (one > 0).any()
