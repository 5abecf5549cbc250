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

    name: ResourceName
    nominal_quota: Quantity = "0"
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None

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
    name: DNSSubdomain
    resources: list[ResourceQuota] = Field(min_length=1, max_length=MAX_RESOURCES_PER_FLAVOR)


class ResourceGroup(KubeModel):
    covered_resources: list[ResourceName] = Field(min_length=1, max_length=MAX_COVERED_RESOURCES)
    flavors: list[FlavorQuotas] = Field(min_length=1, max_length=MAX_FLAVORS_PER_GROUP)


class AdmissionCheckStrategyRule(KubeModel):
    """A check to run, on every flavor or only on workloads assigned one of `on_flavors`."""

    name: str = Field(min_length=1, max_length=316)
    on_flavors: list[DNSSubdomain] = Field(default_factory=list, max_length=64)


class AdmissionChecksStrategy(KubeModel):
    admission_checks: list[AdmissionCheckStrategyRule] = Field(min_length=1, max_length=MAX_ADMISSION_CHECKS)


class FlavorFungibility(KubeModel):
    when_can_borrow: FlavorFungibilityPolicy = "MayStopSearch"
    when_can_preempt: FlavorFungibilityPolicy = "TryNextFlavor"
    preference: FlavorFungibilityPreference | None = None


class BorrowWithinCohort(KubeModel):
    policy: BorrowWithinCohortPolicy = "Never"
    max_priority_threshold: Int32 | None = None


class ClusterQueuePreemption(KubeModel):
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
    resource_groups: list[ResourceGroup] = Field(default_factory=list, max_length=MAX_RESOURCE_GROUPS)
    cohort_name: DNSSubdomain = ""
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    # None selects no namespace at all; an empty selector selects every namespace.
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility = Field(default_factory=FlavorFungibility)
    preemption: ClusterQueuePreemption = Field(default_factory=ClusterQueuePreemption)
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: StopPolicy = "None"
    fair_sharing: FairSharing | None = None
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
    conditions: list[Condition] = Field(default_factory=list, max_length=16)
    flavors_reservation: list[FlavorUsage] = Field(default_factory=list, max_length=64)
    flavors_usage: list[FlavorUsage] = Field(default_factory=list, max_length=64)
    pending_workloads: Int32 | None = None
    reserving_workloads: Int32 | None = None
    admitted_workloads: Int32 | None = None
    fair_sharing: FairSharingStatus | None = None


class ClusterQueue(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    metadata: ObjectMeta
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus = Field(default_factory=ClusterQueueStatus)

    def flavor_names(self) -> list[str]:
        """Every flavor named in the quota table, in order of appearance."""
        return [flavor.name for group in self.spec.resource_groups for flavor in group.flavors]
