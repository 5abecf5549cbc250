"""The entries of a scheduling cycle: a head workload, what it was assigned, how it ended.

Shared by the cycle (`pykueue.engine.scheduler`) and the fair order of its entries
(`pykueue.engine.fair_sharing`), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykueue.engine.flavor_assigner import Assignment
from pykueue.engine.targets import Target
from pykueue.engine.workloads import Workload

# Why a head goes back to its queue (upstream's RequeueReason).
GENERIC = ""
NO_FIT = "NoFit"
NAMESPACE_MISMATCH = "NamespaceMismatch"
FAILED_AFTER_NOMINATION = "FailedAfterNomination"
PENDING_PREEMPTION = "PendingPreemption"
PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"

# Where an entry ended in its cycle (upstream's entryStatus).
NOT_NOMINATED = ""
NOMINATED = "nominated"
SKIPPED = "skipped"
ASSUMED = "assumed"


@dataclass(eq=False, slots=True)
class Entry:
    """A head workload being considered in this cycle."""

    workload: Workload
    cluster_queue: str
    assignment: Assignment = field(default_factory=Assignment)
    targets: list[Target] = field(default_factory=list)
    status: str = NOT_NOMINATED
    requeue_reason: str = GENERIC
    message: str = ""
    reason: str = ""  # QuotaReserved=False reason
    # It issued preemptions in an earlier cycle and still waits for them (upstream's
    # IsPreemptor); with PrioritizePreemptorWorkloads it goes first in its cycle.
    is_preemptor: bool = False

    @property
    def borrows(self) -> int:
        return self.assignment.borrowing
