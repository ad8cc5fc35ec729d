"""Fair LARA: LARA that serves the tenants furthest behind first (SPEC §10).

Finish-time-fair schedulers (Themis, Shockwave, Gavel's finish-time-fair policy) give the
next resources to the jobs that fare worst relative to their fair share. Here the unit that
can be starved is a tenant, and how it fares is its completion rate so far against the
episode's: the task table's ``tenant_lag`` (the episode's rate minus its tenant's, over the
tasks that have finished). Fair LARA is :class:`~mara_agents.baselines.lara.LARAPolicy`
with two changes that use it:

1. **Admission.** When Moore-Hodgson must drop an admitted task to keep the rest on time,
   it drops the one with the largest processing time times ``exp(-fairness * lag)``: a
   task of a tenant that is behind (lag > 0) counts as shorter, so LARA's habit of dropping
   the longest tasks (the large jobs) first no longer falls on one tenant.
2. **Leftovers.** Nodes the plan leaves free go to the tenants furthest behind first (then
   earliest deadline).

``fairness = 0``, or an env without tenants (every lag is 0), is LARA exactly. The default
is the measured choice of docs/fairness.md (selection seeds 100-147 of CoRE-Tenants-v0).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core_env import pmath
from mara_agents.baselines.common import ClusterView
from mara_agents.baselines.lara import LARAPolicy

FAIRNESS = 4.0
"""Default strength of the tenant priority (see the module docstring)."""


class FairLARAPolicy(LARAPolicy):
    """LARA with tenant-lag priority (see the module docstring).

    Args:
        env: the forecast-wrapped environment (``make_policy("fair_lara", env)``).
        fairness: strength of the priority (>= 0; 0 = LARA).
        params, stickiness, overrides: as for :class:`LARAPolicy`.
    """

    name = "fair_lara"

    def __init__(self, env: Any, fairness: float = FAIRNESS, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        if not (isinstance(fairness, (int, float)) and math.isfinite(fairness)
                and fairness >= 0):
            raise ValueError(f"fairness: expected a finite number >= 0, got {fairness!r}")
        self.fairness = float(fairness)
        names = [f.name for f in self.decoder.layout.task_features]
        if "tenant_lag" not in names:
            raise ValueError("env: its observation has no tenant_lag column (a core_env "
                             "env of this version has one)")
        self._lag_col = names.index("tenant_lag")

    def lag(self, view: ClusterView) -> np.ndarray:
        """float64[K] each task's tenant lag (0 for empty slots)."""
        return np.where(view.present, view.table[:, self._lag_col].astype(np.float64), 0.0)

    def drop_weight(self, view: ClusterView) -> np.ndarray | None:
        if self.fairness == 0:
            return None
        return pmath.exp(-self.fairness * self.lag(view))

    def leftover_order(self, view: ClusterView, edf: np.ndarray) -> np.ndarray:
        if self.fairness == 0:
            return edf
        lag = self.lag(view)
        return edf[np.argsort(-lag[edf], kind="stable")]
