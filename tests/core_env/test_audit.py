"""Group-level auditing and tenants (SPEC §10): the per-group counts in info["episode"], their
summaries, the tenants' workload and the tenant columns of the task table."""

from __future__ import annotations

import numpy as np
import pytest

import core_env
from core_env.audit import (
    by_group,
    difference,
    group_min,
    jain_index,
    pool,
    ratio,
    task_groups,
)
from core_env.state import EXPIRED, SUCCEEDED
from core_env.workload import generate_workload

TENANTS = "CoRE-Tenants-v0"


def run(preset: str, seed: int, policy=None, **overrides):
    env = core_env.parallel_env(preset=preset, **overrides)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    seen = []
    while env.agents:
        acts = ({a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
                if policy is None else policy(obs))
        obs, _, _, _, infos = env.step(acts)
        seen.append(obs)
    return env, infos["node_0"]["episode"], seen


def test_the_episode_counts_every_task_once_in_every_grouping():
    env, ep, _ = run("CoRE-Small-v0", 3)
    groups = ep["groups"]
    assert set(groups) == {"family", "work", "slack", "cap", "period"}  # no tenants here
    for grouping, counts in groups.items():
        assert sum(c["arrived"] for c in counts.values()) == ep["arrived"], grouping
        assert sum(c["completed"] for c in counts.values()) == ep["completed"], grouping
    wl = env.unwrapped.workload
    status = env.unwrapped.sim.status[0, :wl.n_tasks]
    labels = task_groups(env.unwrapped.config, wl)
    for label, c in groups["cap"].items():  # recount one grouping by hand
        mine = np.array([g == label for g in labels["cap"]])
        assert c["completed"] == int((mine & (status == SUCCEEDED)).sum())
        assert c["arrived"] == int(mine.sum())
    assert list(groups["work"]) == [g for g in ("small", "medium", "large")
                                    if g in groups["work"]]


def test_groups_are_cut_by_the_configuration_not_the_episode():
    cfg = core_env.make_config("CoRE-v0")
    wl = generate_workload(cfg, np.random.default_rng(0))
    labels = task_groups(cfg, wl)
    lo, hi = np.log(cfg.workload.required_work)
    third = np.clip(((np.log(wl.required_work) - lo) * 3 / (hi - lo)).astype(int), 0, 2)
    assert labels["work"] == [("small", "medium", "large")[i] for i in third]
    assert labels["period"][0] == "early" and labels["period"][-1] == "late"
    assert set(labels["cap"]) == {f"cap {p}" for p in cfg.workload.parallelism_choices}
    flat = np.minimum(wl.cap, 16) ** wl.alpha / wl.required_work * (wl.deadline - wl.arrival)
    tight = np.array(labels["slack"]) == "tight"
    assert np.all(flat[tight] < 0.6 + 2.4 / 3 + 1e-9) and np.all(flat[~tight] >= 1.4 - 1e-9)


def test_summaries_follow_the_metricframe_vocabulary():
    counts = {"work": {"small": {"arrived": 10, "completed": 9},
                       "large": {"arrived": 10, "completed": 3}},
              "cap": {"cap 1": {"arrived": 4, "completed": 0},
                      "cap 8": {"arrived": 16, "completed": 12}}}
    assert by_group(counts) == {"work": {"small": 0.9, "large": 0.3},
                                "cap": {"cap 1": 0.0, "cap 8": 0.75}}
    assert group_min(counts) == (0.0, "cap 1")
    assert group_min(counts, min_arrived=5) == (0.3, "work: large")
    assert difference(counts) == (0.75, "cap")
    assert difference(counts, min_arrived=5) == pytest.approx((0.6, "work"))
    assert ratio(counts, "work") == pytest.approx(1 / 3)
    assert pool([counts, counts])["work"]["large"] == {"arrived": 20, "completed": 6}
    assert jain_index([0.5, 0.5, 0.5]) == 1.0
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == 0.25
    assert jain_index([0.0, 0.0]) == 1.0
    for bad in ([], [0.5, -0.1]):
        with pytest.raises(ValueError, match="rates: expected non-negative"):
            jain_index(bad)


def test_tenants_draw_their_own_mix_and_leave_other_workloads_unchanged():
    cfg = core_env.make_config(TENANTS)
    wl = generate_workload(cfg, np.random.default_rng(1))
    shares = np.bincount(wl.tenant, minlength=3) / wl.n_tasks
    assert np.allclose(shares, cfg.workload.tenant_shares, atol=0.12)
    work, _, caps = cfg.workload.tenant_ranges()
    for g in range(3):
        mine = wl.tenant == g
        assert set(wl.cap[mine]) <= set(caps[g].tolist())
        s = wl.required_work[mine]
        assert np.all(s >= work[g, 0] * 0.99) and np.all(s <= work[g, 1] * 1.01)
    plain = core_env.make_config("CoRE-v0")  # the same seed without tenants: no tenant draw
    a = generate_workload(plain, np.random.default_rng(1))
    b = generate_workload(plain.replace(tenant_shares=()), np.random.default_rng(1))
    assert a.tenant is None and np.array_equal(a.log_loss, b.log_loss)


def test_bad_tenant_settings_are_refused_naming_the_field():
    for overrides, match in [
            ({"tenant_shares": (0.5, 0.6)}, "tenant_shares: expected shares summing to 1"),
            ({"tenant_shares": (1.0,)}, "tenant_shares: expected 2 to 64 shares"),
            ({"tenant_shares": (1.0, 0.0)}, "tenant_shares: expected a finite number"),
            ({"tenant_shares": (0.5, 0.5), "tenant_required_work": ((4.0, 20.0),)},
             "tenant_required_work: expected \\(\\) or one entry per tenant"),
            ({"tenant_shares": (0.5, 0.5), "tenant_parallelism": ((1, 2), ())},
             r"tenant_parallelism\[1\]: expected a non-empty tuple"),
            ({"tenant_shares": (0.5, 0.5), "tenant_deadline_slack": ((1.0, 3.0), (2.0, 1.0))},
             r"tenant_deadline_slack\[1\]: expected low <= high"),
            ({"tenant_required_work": ((4.0, 20.0),)}, "one entry per tenant \\(0 tenants")]:
        with pytest.raises(ValueError, match=match):
            core_env.make_config("CoRE-v0", **overrides)
    cfg = core_env.make_config(TENANTS)
    wl = generate_workload(cfg, np.random.default_rng(0))
    env = core_env.parallel_env(preset=TENANTS)
    with pytest.raises(ValueError, match=r"workload.tenant\[\d+\]: expected tenant indices"):
        env.reset(options={"workload": wl._replace(tenant=wl.tenant + 3)})
    with pytest.raises(ValueError, match="workload.tenant: expected one tenant per task"):
        env.reset(options={"workload": wl._replace(tenant=None)})


def test_the_task_table_shows_each_tasks_tenant_and_how_far_it_lags():
    env, ep, seen = run(TENANTS, 5)
    lay = env.unwrapped.layout
    shares = env.unwrapped.config.workload.tenant_shares
    assert set(ep["groups"]["tenant"]) == {"tenant 0", "tenant 1", "tenant 2"}
    lags = []
    for obs in seen[:-1]:
        o = obs["node_0"]["observation"]
        present = o[lay.task_columns("present")] > 0
        tenant = o[lay.task_columns("tenant")][present]
        assert np.all(np.isin(np.rint(tenant * 3), [1, 2, 3]))
        share = o[lay.task_columns("tenant_share")][present]
        assert np.allclose(share, np.asarray(shares, np.float32)[np.rint(tenant * 3).astype(int)
                                                                   - 1])
        lags.append(o[lay.task_columns("tenant_lag")][present])
    assert np.all(np.abs(np.concatenate(lags)) <= 1) and np.any(np.concatenate(lags) != 0)
    sim = env.unwrapped.sim  # the last lag, recomputed from the final statuses
    m = env.unwrapped.workload.n_tasks
    status, tenant = sim.status[0, :m], env.unwrapped.workload.tenant
    done = (status == SUCCEEDED) | (status == EXPIRED)
    overall = (status == SUCCEEDED).sum() / done.sum()
    rate = [(status[tenant == g] == SUCCEEDED).sum() / done[tenant == g].sum() for g in range(3)]
    assert ep["completion_rate"] == pytest.approx(overall)
    assert max(rate) - min(rate) > 0  # the random policy does not serve the tenants alike
    plain, _, seen = run("CoRE-Small-v0", 0)
    cols = [plain.unwrapped.layout.task_columns(c) for c in ("tenant", "tenant_share",
                                                             "tenant_lag")]
    assert all(np.all(obs["node_0"]["observation"][c] == 0) for obs in seen for c in cols)
