"""The engine's view of the queueing objects: ClusterQueues, Cohorts, LocalQueues, flavors.

These are small immutable values built from the API models by
`pykueue.engine.intake`; the engine never reads the API models directly, so
its hot paths touch plain slotted dataclasses and integers only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykueue.api.governance import Aging, PreemptionContract, PreemptionCost, Reservation
from pykueue.engine.cohort_tree import Quota
from pykueue.engine.resources import FlavorResource
from pykueue.engine.selectors import LabelSelector, Taint, Toleration

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"
ANY = "Any"
MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str = ""


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None
    # reclaimWithinCohort left out of the manifest. It means Never, except that under fair
    # sharing upstream's scheduler lets such a queue consider preemption while borrowing
    # (its check is "not Never" on the raw field); see docs/semantics.md.
    reclaim_unset: bool = False


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    cohort: str = ""
    queueing_strategy: str = BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None  # None selects no namespace, as upstream
    preemption: Preemption = Preemption()
    fungibility: FlavorFungibility = FlavorFungibility()
    stop_policy: str = "None"
    admission_checks: tuple[str, ...] = ()
    # Per check of `admission_checks`, the flavors it applies to (`onFlavors`); a check
    # not listed here applies to every flavor.
    check_on_flavors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fair_weight: float = 1.0
    admission_fair_sharing: bool = False
    # pykueue's governance policies (annotations, docs/governance.md); None/"" is upstream's behaviour.
    default_priority_class: str = ""
    aging: Aging | None = None
    contract: PreemptionContract | None = None
    preemption_cost: PreemptionCost | None = None
    reservation: Reservation | None = None

    def group_of(self, resource: str) -> ResourceGroup | None:
        for group in self.resource_groups:
            if resource in group.covered:
                return group
        return None

    def flavors(self) -> tuple[str, ...]:
        return tuple(f for group in self.resource_groups for f in group.flavors)

    def check_flavors(self) -> dict[str, tuple[str, ...] | None]:
        """Each admission check and the flavors it applies to (None: every flavor)."""
        return {name: self.check_on_flavors.get(name) for name in self.admission_checks}


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str = ""
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    fair_weight: float = 1.0
    # pykueue.io/reservation (docs/governance.md): the policy of its ClusterQueues without their own.
    reservation: Reservation | None = None
    # pykueue's ``pykueue.io/preemption-cost`` for its ClusterQueues without their own.
    preemption_cost: PreemptionCost | None = None


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"
    fair_weight: float = 1.0
    # Admission fair sharing: consumed resources so far (milli-units) and when they were sampled.
    consumed: dict[str, int] = field(default_factory=dict)
    consumed_at: int | None = None
    # The `pykueue.io/default-priority-class` annotation (docs/governance.md); "" when absent.
    default_priority_class: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class LimitRangeItem:
    """One `type: Container` or `type: Pod` limit of a LimitRange."""

    kind: str
    default: dict[str, int] = field(default_factory=dict)
    default_request: dict[str, int] = field(default_factory=dict)
    max: dict[str, int] = field(default_factory=dict)
    min: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    name: str
    controller: str = ""
    active: bool = True
