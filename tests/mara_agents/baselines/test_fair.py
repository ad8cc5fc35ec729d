"""Fair LARA (SPEC §10): LARA's rule where no tenant lags, tenant priority where one does."""

from __future__ import annotations

import numpy as np
import pytest

import core_env
from mara_agents import make_policy
from mara_agents.baselines import moore_hodgson
from tests.mara_agents.baselines.helpers import episode_actions


def test_a_drop_weight_protects_a_job_from_moore_hodgson():
    p, d = np.array([4.0, 3.0, 3.0]), np.array([6.0, 6.0, 7.0])
    assert moore_hodgson(p, d).tolist() == [1, 2]  # the longest (job 0) goes
    assert moore_hodgson(p, d, np.array([0.5, 1.0, 1.0])).tolist() == [0, 2]
    assert moore_hodgson(p, d, np.ones(3)).tolist() == moore_hodgson(p, d).tolist()
    with pytest.raises(ValueError, match="drop_weight"):
        moore_hodgson(p, d, np.array([1.0, np.nan, 1.0]))


@pytest.mark.parametrize("preset, fairness", [("CoRE-Small-v0", 4.0),
                                              ("CoRE-Tenants-v0", 0.0)])
def test_fair_lara_is_lara_without_a_lagging_tenant(preset, fairness):
    cfg = {"arrival_slots": 40} if preset == "CoRE-Tenants-v0" else {}
    lara = episode_actions(*make_policy("lara", core_env.parallel_env(preset=preset, **cfg)), 4)
    fair = episode_actions(*make_policy("fair_lara", core_env.parallel_env(preset=preset, **cfg),
                                        fairness=fairness), 4)
    assert fair == lara


def test_fair_lara_serves_the_lagging_tenant_differently():
    env = core_env.parallel_env(preset="CoRE-Tenants-v0", arrival_slots=60, load=2.0)
    lara = episode_actions(*make_policy("lara", env), 2)
    env = core_env.parallel_env(preset="CoRE-Tenants-v0", arrival_slots=60, load=2.0)
    fair = episode_actions(*make_policy("fair_lara", env), 2)
    assert fair != lara
    with pytest.raises(ValueError, match="fairness: expected a finite number >= 0"):
        make_policy("fair_lara", core_env.parallel_env(preset="CoRE-Small-v0"), fairness=-1)
