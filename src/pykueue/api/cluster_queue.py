"""ClusterQueue: a pool of quota per (flavor, resource), and the policies for sharing it.

The quota table is a list of resource groups. A group names the resources it covers
(``coveredResources``) and, for each flavor it may use, one quota line per covered
resource in the same order; a resource belongs to one group only, so the flavor
assigner picks one flavor per group for all of that group's resources.
Cohort reuses `ResourceGroup` for the quota it holds itself.

Defaults are upstream's kubebuilder ``+default`` markers, expressed as field
defaults so that a model built in code and one read from a manifest agree:
``queueingStrategy: BestEffortFIFO``, ``stopPolicy: None``, ``flavorFungibility:
{whenCanBorrow: MayStopSearch, whenCanPreempt: TryNextFlavor}`` and ``preemption:
{reclaimWithinCohort: Never, withinClusterQueue: Never, borrowWithinCohort:
{policy: Never}}``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.fair_sharing import AdmissionScope, FairSharing, FairSharingStatus, StopPolicy
from pykueue.api.meta import (
    Condition,
    DNSSubdomain,
    Int32,
    KubeModel,
    LabelSelector,
    ObjectMeta,
    Quantity,
    ResourceName,
    milli,
)

QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]
FlavorFungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]
FlavorFungibilityPreference = Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"]
ReclaimWithinCohortPolicy = Literal["Never", "LowerPriority", "Any"]
WithinClusterQueuePolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
BorrowWithinCohortPolicy = Literal["Never", "LowerPriority"]
ConcurrentAdmissionMigrationMode = Literal["TryPreferredFlavors", "RetainFirstAdmission"]

# Limits from the CRD schema (+kubebuilder:validation:MaxItems) and the webhook.
MAX_RESOURCE_GROUPS = 16
MAX_COVERED_RESOURCES = 64
MAX_FLAVORS_PER_GROUP = 64
MAX_RESOURCES_PER_FLAVOR = 64
MAX_TOTAL_FLAVORS = 256
MAX_TOTAL_COVERED_RESOURCES = 256
MAX_FLAVOR_RESOURCE_COMBINATIONS = 512
MAX_ADMISSION_CHECKS = 64


class ResourceQuota(KubeModel):
    """One resource's quota in one flavor: nominal, and the limits on borrowing and lending."""

    name: ResourceName = Field(
        description="The resource this line sets quota for (cpu, memory, nvidia.com/gpu...)."
    )
    nominal_quota: Quantity = Field(
        "0",
        description="Quota this ClusterQueue owns for the resource in this flavor; admitted workloads use it first.",
    )
    borrowing_limit: Quantity | None = Field(
        None,
        description="How much more than its nominal quota this ClusterQueue may borrow from its cohort; unset means no limit.",
    )
    lending_limit: Quantity | None = Field(
        None, description="How much of its unused nominal quota the cohort may borrow; unset means all of it."
    )

    @property
    def nominal_milli(self) -> int:
        return milli(self.nominal_quota)

    @property
    def borrowing_limit_milli(self) -> int | None:
        """None means unlimited borrowing (from whatever the cohort has spare)."""
        return None if self.borrowing_limit is None else milli(self.borrowing_limit)

    @property
    def lending_limit_milli(self) -> int | None:
        """None means everything not used may be lent."""
        return None if self.lending_limit is None else milli(self.lending_limit)


class FlavorQuotas(KubeModel):
    """The quota of one flavor, one line per resource of the group."""

    name: DNSSubdomain = Field(description="The ResourceFlavor these quotas are for.")
    resources: list[ResourceQuota] = Field(
        min_length=1,
        max_length=MAX_RESOURCES_PER_FLAVOR,
        description="One quota line per covered resource of the group, in the order of coveredResources.",
    )


class ResourceGroup(KubeModel):
    """Resources that are assigned a flavor together, with the quota of each flavor for them."""

    covered_resources: list[ResourceName] = Field(
        min_length=1,
        max_length=MAX_COVERED_RESOURCES,
        description="The resources this group sets quota for; a resource belongs to one group only.",
    )
    flavors: list[FlavorQuotas] = Field(
        min_length=1,
        max_length=MAX_FLAVORS_PER_GROUP,
        description="The flavors a workload may get for these resources, tried in this order.",
    )


class AdmissionCheckStrategyRule(KubeModel):
    """A check to run, on every flavor or only on workloads assigned one of `on_flavors`."""

    name: str = Field(min_length=1, max_length=316)
    on_flavors: list[DNSSubdomain] = Field(default_factory=list, max_length=64)


class AdmissionChecksStrategy(KubeModel):
    """The admission checks of this queue and the flavors each applies to."""

    admission_checks: list[AdmissionCheckStrategyRule] = Field(min_length=1, max_length=MAX_ADMISSION_CHECKS)


class FlavorFungibility(KubeModel):
    """Whether to borrow or preempt in the current flavor, or try the next flavor first."""

    when_can_borrow: FlavorFungibilityPolicy = "MayStopSearch"
    when_can_preempt: FlavorFungibilityPolicy = "TryNextFlavor"
    preference: FlavorFungibilityPreference | None = None


class BorrowWithinCohort(KubeModel):
    """Whether a workload that borrows may preempt workloads of other queues of the cohort."""

    policy: BorrowWithinCohortPolicy = "Never"
    max_priority_threshold: Int32 | None = None


class ClusterQueuePreemption(KubeModel):
    """Whom a pending workload of this queue may preempt to fit."""

    reclaim_within_cohort: ReclaimWithinCohortPolicy = "Never"
    borrow_within_cohort: BorrowWithinCohort = Field(default_factory=BorrowWithinCohort)
    within_cluster_queue: WithinClusterQueuePolicy = "Never"


class ConcurrentAdmissionConstraints(KubeModel):
    last_acceptable_flavor_name: DNSSubdomain | None = None


class ConcurrentAdmissionMigration(KubeModel):
    mode: ConcurrentAdmissionMigrationMode
    constraints: ConcurrentAdmissionConstraints | None = None


class ConcurrentAdmissionPolicy(KubeModel):
    migration: ConcurrentAdmissionMigration


class ClusterQueueSpec(KubeModel):
    """Quota per flavor and resource, and the policies for queueing, sharing and preemption."""

    resource_groups: list[ResourceGroup] = Field(
        default_factory=list,
        max_length=MAX_RESOURCE_GROUPS,
        description="The quota table: which flavors back which resources, and how much of each.",
    )
    cohort_name: DNSSubdomain = Field(
        "", description="The Cohort whose members lend and borrow unused quota among themselves."
    )
    queueing_strategy: QueueingStrategy = Field(
        "BestEffortFIFO",
        description="StrictFIFO: the head blocks the queue until it fits. BestEffortFIFO: workloads that do not fit are set aside and the next ones are tried.",
    )
    # None selects no namespace at all; an empty selector selects every namespace.
    namespace_selector: LabelSelector | None = Field(
        None,
        description="Namespaces whose LocalQueues may send workloads here; an empty selector means every namespace, none means no namespace.",
    )
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility,
        description="When the flavor search moves on to the next flavor instead of borrowing or preempting in the current one.",
    )
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption,
        description="Which admitted workloads a pending workload of this queue may preempt: in this queue, in the cohort, while borrowing.",
    )
    admission_checks_strategy: AdmissionChecksStrategy | None = Field(
        None, description="Admission checks a workload must pass, per flavor, before it is admitted."
    )
    stop_policy: StopPolicy = Field(
        "None",
        description="None: admit as usual. Hold: admit nothing more. HoldAndDrain: admit nothing and evict what is admitted.",
    )
    fair_sharing: FairSharing | None = Field(
        None,
        description="This queue's weight in fair sharing: a higher weight gets a larger share of what the cohort can lend.",
    )
    admission_scope: AdmissionScope | None = None
    concurrent_admission_policy: ConcurrentAdmissionPolicy | None = None


class ResourceUsage(KubeModel):
    name: ResourceName
    total: Quantity = "0"
    borrowed: Quantity = "0"


class FlavorUsage(KubeModel):
    name: DNSSubdomain
    resources: list[ResourceUsage] = Field(default_factory=list, max_length=64)


class ClusterQueueStatus(KubeModel):
    """What the queue holds: reservations, usage and workload counts."""

    conditions: list[Condition] = Field(default_factory=list, max_length=16)
    flavors_reservation: list[FlavorUsage] = Field(
        default_factory=list,
        max_length=64,
        description="Quota reserved by workloads, per flavor and resource.",
    )
    flavors_usage: list[FlavorUsage] = Field(
        default_factory=list,
        max_length=64,
        description="Quota used by admitted workloads, per flavor and resource.",
    )
    pending_workloads: Int32 | None = Field(None, description="Workloads waiting in this queue.")
    reserving_workloads: Int32 | None = Field(None, description="Workloads holding a quota reservation here.")
    admitted_workloads: Int32 | None = Field(
        None, description="Workloads admitted here (reservation and every admission check passed)."
    )
    fair_sharing: FairSharingStatus | None = None


class ClusterQueue(KubeModel):
    """A pool of quota per resource flavor that LocalQueues send workloads to; cluster-scoped."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    metadata: ObjectMeta
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus = Field(default_factory=ClusterQueueStatus)

    def flavor_names(self) -> list[str]:
        """Every flavor named in the quota table, in order of appearance."""
        return [flavor.name for group in self.spec.resource_groups for flavor in group.flavors]
