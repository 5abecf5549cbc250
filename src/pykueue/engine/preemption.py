"""Preemption: which admitted workloads must go so that a pending one fits.

This module answers two questions for the scheduler and the flavor assigner:

* `Preemptor.simulate` — the *oracle*: could preempting make ``value`` of one
  flavor-resource fit, and would it be reclaiming quota lent to others or
  preempting by priority?
* `Preemptor.targets` — the minimal set of workloads to evict so that the
  whole assignment fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykueue.engine import specs
from pykueue.engine.flavor_assigner import Assignment, Possibility
from pykueue.engine.resources import FlavorResource
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

HUMAN_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


@dataclass(frozen=True, slots=True)
class Target:
    """One workload to evict, the queue it is admitted in, and why."""

    workload: Workload
    cluster_queue: str
    reason: str


def can_always_reclaim(cq: specs.ClusterQueue) -> bool:
    """A queue that may reclaim from anyone never needs to hold capacity while it waits."""
    return cq.preemption.reclaim_within_cohort == specs.ANY


@dataclass(slots=True)
class Preemptor:
    """Preemption decisions over one state, for one scheduling cycle."""

    state: State

    def simulate(self, cq_name: str, wl: Workload, fr: FlavorResource, value: int) -> tuple[Possibility, int]:
        return Possibility.NO_CANDIDATES, 0

    def targets(self, cq_name: str, wl: Workload, assignment: Assignment) -> list[Target]:
        return []
