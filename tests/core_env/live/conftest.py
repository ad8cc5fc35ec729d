"""Fixtures of the live-mode tests: the runtime contract is tested on every backend."""

from __future__ import annotations

import pytest

from core_env.live import LocalRuntime


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray instance the Ray runtimes of a test module join (16 logical CPUs, one per
    actor, on any machine; shut down after the module)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=16, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module", params=["local", "ray"])
def make_runtime(request):
    """The runtime class of each backend (the Ray one joins :func:`ray_session`)."""
    if request.param == "local":
        return LocalRuntime
    request.getfixturevalue("ray_session")
    from core_env.live.ray_runtime import RayRuntime
    return RayRuntime
