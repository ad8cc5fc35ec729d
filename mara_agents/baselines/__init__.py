"""Baseline schedulers (SPEC §5): heuristics, the peer schedulers (Tiresias LAS, successive
halving, Optimus, SLAQ, LaiRA), LARA, the tenant-fair LARA (SPEC §10) and the
oracle-informed greedy reference.

Every baseline implements :class:`mara_agents.policy.Policy` and decides all nodes centrally,
so it never emits a masked action or a capacity conflict (but the naive ``random``, which
samples every node on its own, as a loop over the masks does). Build one with
:func:`mara_agents.policy.make_policy`, which also wraps the environment for the policies that
read forecast columns. See ``docs/baselines.md``.
"""

from __future__ import annotations

from mara_agents.baselines.common import (
                                          CentralPolicy,
                                          ClusterView,
                                          ObservationDecoder,
                                          SlotTracker,
                                          assign_nodes,
                                          fill_by_priority,
)
from mara_agents.baselines.fair import FairLARAPolicy
from mara_agents.baselines.halving import SuccessiveHalvingPolicy
from mara_agents.baselines.heuristics import (
                                          EDFPolicy,
                                          FIFOPolicy,
                                          LeastLaxityPolicy,
                                          RandomPolicy,
                                          RandomSequentialPolicy,
                                          RoundRobinPolicy,
                                          ShortestPredictedPolicy,
)
from mara_agents.baselines.laira import LaiRAPolicy
from mara_agents.baselines.lara import LARAParams, LARAPolicy, largest_remainder, moore_hodgson
from mara_agents.baselines.las import LASPolicy
from mara_agents.baselines.optimus import OptimusPolicy
from mara_agents.baselines.oracle import OracleGreedyPolicy
from mara_agents.baselines.placement import sticky_counts
from mara_agents.baselines.slaq import SLAQPolicy

TABLE = (RandomPolicy, RandomSequentialPolicy, RoundRobinPolicy, FIFOPolicy, EDFPolicy, LeastLaxityPolicy,
         ShortestPredictedPolicy, LASPolicy, SuccessiveHalvingPolicy, OptimusPolicy, SLAQPolicy,
         LARAPolicy, LaiRAPolicy, OracleGreedyPolicy)
"""The baselines of the benchmark tables, in their order (:data:`mara_agents.policy.BASELINES`
are their names)."""

FAIR_AWARE = (FairLARAPolicy,)
"""The fairness-aware baselines (:data:`mara_agents.policy.FAIR`)."""

BY_NAME = {cls.name: cls for cls in (*TABLE, *FAIR_AWARE)}
"""Policy name -> class: the one registry of the baselines' names (a new baseline joins
:data:`TABLE` or :data:`FAIR_AWARE` and nothing else)."""

__all__ = [
    "BY_NAME", "FAIR_AWARE", "TABLE",
    "CentralPolicy", "ClusterView", "EDFPolicy", "FIFOPolicy", "FairLARAPolicy", "LARAParams",
    "LARAPolicy",
    "LASPolicy", "LaiRAPolicy", "LeastLaxityPolicy", "ObservationDecoder", "OptimusPolicy",
    "OracleGreedyPolicy", "RandomPolicy", "RandomSequentialPolicy", "RoundRobinPolicy", "SLAQPolicy",
    "ShortestPredictedPolicy", "SlotTracker", "SuccessiveHalvingPolicy", "assign_nodes",
    "fill_by_priority", "largest_remainder", "moore_hodgson", "sticky_counts",
]
