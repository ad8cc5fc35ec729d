"""Without BenchMARL (the main environment: it pins torchrl<0.12), the task module still
imports, and using its task says where BenchMARL lives."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("benchmarl") is not None:
    pytest.skip("BenchMARL is installed here (test_benchmarl.py runs)", allow_module_level=True)

from mara_agents.marl import benchmarl_task  # noqa: E402


def test_the_task_module_imports_and_names_its_environment():
    assert benchmarl_task.TASK_PRESETS["CORE_SMALL_V0"] == "CoRE-Small-v0"
    for use in (lambda: benchmarl_task.CoreTask, lambda: benchmarl_task.make_experiment()):
        with pytest.raises(ImportError, match=r"make \.venv-benchmarl/\.installed"):
            use()
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        benchmarl_task.Nope  # noqa: B018
