"""MARA's schedulers on a live session: a never-piloted job submitted while LARA, or the
shipped MARA where torch is installed, schedules the session is scheduled (the scenario of
tests/core_env/live/test_session.py, which runs it with a core_env-only stand-in policy)."""

from __future__ import annotations

import pytest

from tests.core_env.live.test_session import schedule_user_jobs


@pytest.mark.parametrize("policy_name", ["lara", "mara"])
def test_a_never_piloted_user_job_submitted_to_a_running_session_is_scheduled(policy_name):
    if policy_name == "mara":
        pytest.importorskip("torch")
    from mara_agents import make_policy

    rows, _ = schedule_user_jobs(lambda env: make_policy(policy_name, env))
    assert rows["late"]["status"] == "completed"  # 2 nodes x 8 slots x rate 1 reach 0.1
