"""Group-level auditing (SPEC §10): who loses when tasks miss.

Every task belongs to one group of each *grouping*:

==========  ===============================================================================
grouping    groups
==========  ===============================================================================
tenant      ``tenant 0`` .. ``tenant G-1`` (only with tenants, ``tenant_shares``)
family      its loss-curve family (:data:`core_env.curves.FAMILIES`)
work        ``small`` / ``medium`` / ``large``: its required work s* in the lower, middle or
            upper third of the configured range (on a log scale, where s* is drawn)
slack       ``tight`` / ``medium`` / ``loose``: its deadline slack f = window x
            min(p, N)**alpha / s* in a third of the configured slack range
cap         ``cap p``: its parallelism cap
period      ``early`` / ``middle`` / ``late``: the third of the arrival period it arrived in
==========  ===============================================================================

The thirds are fixed by the configuration, not by the episode, so groups mean the same in
every episode and counts can be pooled over seeds. :func:`group_counts` gives, per grouping
and group, the tasks that ``arrived`` and ``completed``; the env puts them in
``info["episode"]["groups"]``. The summaries follow fairlearn's ``MetricFrame`` vocabulary
(:func:`by_group`, :func:`group_min`, :func:`difference`, :func:`ratio`), with Jain's
fairness index (:func:`jain_index`) over a grouping's rates::

    groups = info["episode"]["groups"]
    by_group(groups)["work"]           # {"small": 0.85, "medium": 0.6, "large": 0.33}
    group_min(groups)                  # (0.33, "work: large")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from core_env import pmath
from core_env.config import CoreConfig
from core_env.curves import FAMILIES

GROUPINGS = ("tenant", "family", "work", "slack", "cap", "period")
"""The groupings, in the order tables list them."""

THIRDS = {"work": ("small", "medium", "large"), "slack": ("tight", "medium", "loose"),
          "period": ("early", "middle", "late")}
"""The group names of the groupings cut into thirds."""

Counts = dict[str, dict[str, dict[str, int]]]
"""grouping -> group -> {"arrived": a, "completed": c}."""


def _third(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """0, 1 or 2: which third of [lo, hi] each value falls in (ends included; values
    outside, infinite ones too, count in the nearer end's third)."""
    if hi <= lo:
        return np.zeros(x.shape, dtype=np.int64)
    x = np.clip(np.nan_to_num(np.asarray(x, dtype=np.float64), nan=lo), lo, hi)
    return np.clip(((x - lo) * (3.0 / (hi - lo))).astype(np.int64), 0, 2)


def task_groups(cfg: CoreConfig, wl: Any) -> dict[str, list[str]]:
    """Each task's group in each grouping (a label per task; no ``tenant`` without
    tenants). ``wl`` is a :class:`~core_env.workload.Workload`."""
    w, n = cfg.workload, cfg.cluster.n_nodes
    m = wl.n_tasks
    out: dict[str, list[str]] = {}
    if w.n_tenants:
        out["tenant"] = [f"tenant {g}" for g in np.asarray(wl.tenant)]
    out["family"] = [FAMILIES[int(f)] for f in np.asarray(wl.family)]
    work, slack, _ = w.tenant_ranges()
    s_star = np.maximum(np.asarray(wl.required_work, dtype=np.float64), 1e-9)
    log_s = pmath.log(s_star)
    third = _third(log_s, float(pmath.log(work[:, 0].min())),
                   float(pmath.log(work[:, 1].max())))
    out["work"] = [THIRDS["work"][i] for i in third]
    window = np.asarray(wl.deadline - wl.arrival, dtype=np.float64)
    f = window * pmath.pow(np.minimum(np.asarray(wl.cap), n).astype(np.float64),
                           np.asarray(wl.alpha, dtype=np.float64)) / s_star
    third = _third(f, float(slack[:, 0].min()), float(slack[:, 1].max()))
    out["slack"] = [THIRDS["slack"][i] for i in third]
    out["cap"] = [f"cap {int(p)}" for p in np.asarray(wl.cap)]
    third = _third(np.asarray(wl.arrival, dtype=np.float64), 0.0, float(w.arrival_slots))
    out["period"] = [THIRDS["period"][i] for i in third]
    assert all(len(v) == m for v in out.values())
    return out


def group_counts(cfg: CoreConfig, wl: Any, arrived: np.ndarray,
                 completed: np.ndarray) -> Counts:
    """Per grouping and group, the tasks that arrived and completed (bool[M] masks over the
    workload's tasks); groups with no task of the workload are left out."""
    arrived, completed = np.asarray(arrived, bool), np.asarray(completed, bool)
    out: Counts = {}
    for grouping, labels in task_groups(cfg, wl).items():
        counts: dict[str, dict[str, int]] = {}
        for i, label in enumerate(labels):
            c = counts.setdefault(label, {"arrived": 0, "completed": 0})
            c["arrived"] += int(arrived[i])
            c["completed"] += int(completed[i])
        out[grouping] = dict(sorted(counts.items(), key=lambda kv: _order(grouping, kv[0])))
    return out


def _order(grouping: str, label: str) -> tuple:
    if grouping in THIRDS:
        return (THIRDS[grouping].index(label),)
    head, _, num = label.rpartition(" ")
    return (head, int(num)) if num.isdigit() else (label, 0)


def pool(many: Iterable[Mapping[str, Any]]) -> Counts:
    """The counts of several episodes summed group by group (e.g. over seeds)."""
    out: Counts = {}
    for counts in many:
        for grouping, groups in counts.items():
            dst = out.setdefault(grouping, {})
            for label, c in groups.items():
                d = dst.setdefault(label, {"arrived": 0, "completed": 0})
                d["arrived"] += int(c["arrived"])
                d["completed"] += int(c["completed"])
    return {g: dict(sorted(v.items(), key=lambda kv: _order(g, kv[0]))) for g, v in out.items()}


def by_group(counts: Mapping[str, Any], min_arrived: int = 1) -> dict[str, dict[str, float]]:
    """Completion rate per grouping and group (groups with fewer than ``min_arrived``
    arrivals left out)."""
    return {grouping: {label: c["completed"] / c["arrived"] for label, c in groups.items()
                       if c["arrived"] >= max(min_arrived, 1)}
            for grouping, groups in counts.items()}


def group_min(counts: Mapping[str, Any], min_arrived: int = 1,
              groupings: Iterable[str] | None = None) -> tuple[float, str] | None:
    """The lowest group completion rate over the groupings (all, or ``groupings``) and its
    group as ``"grouping: group"`` (``"tenant 2"``, ``"cap 8"``: the group alone where it
    names its grouping); None without any group."""
    rates = by_group(counts, min_arrived)
    best = None
    for grouping in groupings or rates:
        for label, r in rates.get(grouping, {}).items():
            if best is None or r < best[0]:
                best = (r, label if label.startswith(grouping) else f"{grouping}: {label}")
    return best


def difference(counts: Mapping[str, Any], min_arrived: int = 1,
               groupings: Iterable[str] | None = None) -> tuple[float, str] | None:
    """The largest gap between two groups of one grouping (highest rate minus lowest) and
    that grouping; None without a grouping of two groups."""
    rates = by_group(counts, min_arrived)
    best = None
    for grouping in groupings or rates:
        r = list(rates.get(grouping, {}).values())
        if len(r) >= 2 and (best is None or max(r) - min(r) > best[0]):
            best = (max(r) - min(r), grouping)
    return best


def ratio(counts: Mapping[str, Any], grouping: str, min_arrived: int = 1) -> float | None:
    """The lowest group rate over the highest, in one grouping (1 = equal; None if the
    grouping has fewer than two groups or its highest rate is 0)."""
    r = list(by_group(counts, min_arrived).get(grouping, {}).values())
    if len(r) < 2 or max(r) == 0:
        return None
    return min(r) / max(r)


def jain_index(rates: Iterable[float]) -> float:
    """Jain's fairness index (sum x)**2 / (n sum x**2) of non-negative values: 1 when all are
    equal, 1/n when one has everything (1 for all zeros).

    Raises:
        ValueError: no value, or a negative one.
    """
    x = np.asarray(list(rates), dtype=np.float64)
    if x.size == 0 or np.any(x < 0):
        raise ValueError(f"rates: expected non-negative values, got {x.tolist()}")
    sq = float(np.sum(x * x))
    total = float(np.sum(x))
    return 1.0 if sq == 0 else total * total / (x.size * sq)


__all__ = ["GROUPINGS", "THIRDS", "by_group", "difference", "group_counts", "group_min",
           "jain_index", "pool", "ratio", "task_groups"]
