"""The engine's configuration: the parts of Kueue's Configuration that change decisions.

Durations are microseconds, as every time in the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykueue.api.feature_gates import KNOWN_GATES
from pykueue.api.governance import PreemptionContract, PreemptionCost, Reservation

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


@dataclass(frozen=True, slots=True)
class FairSharing:
    enable: bool = False
    preemption_strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    enable: bool = False
    usage_half_life: int = 168 * 3600 * 10**6  # microseconds
    sampling_interval: int = 5 * 60 * 10**6
    resource_weights: dict[str, float] = field(default_factory=dict)


EVICTION_TIMESTAMP = "Eviction"
CREATION_TIMESTAMP = "Creation"


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    """Upstream's `waitForPodsReady`, with its defaults (present means enabled).

    ``recovery_timeout`` defaults to ``timeout`` as upstream's defaulting does; ``None``
    (upstream's "0s") switches the recovery timeout off. ``backoff_limit_count`` ``None``
    requeues for ever.
    """

    timeout: int = 30 * 60 * 10**6
    recovery_timeout: int | None = 30 * 60 * 10**6
    block_admission: bool = False
    requeuing_timestamp: str = EVICTION_TIMESTAMP
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600
    backoff_limit_count: int | None = None


DEFAULT_GATES: dict[str, bool] = {
    "PartialAdmission": True,
    "AdmissionFairSharing": True,
    "PrioritySortingWithinCohort": True,
    "FlavorFungibility": True,
    "FlavorFungibilityPreserveScanProgress": True,
    "SchedulingEquivalenceHashing": True,
    "FairSharingPreemptWithinNominal": True,
    "FairSharingPrioritizeNonBorrowing": True,
    # Upstream alpha, off as there: turning it on is the documented way to stop quota
    # stealing while a preemptor waits (docs/semantics.md, "A preemptor waiting for its
    # evictions").
    "PrioritizePreemptorWorkloads": False,
    "ReclaimablePods": True,
    "AdmissionGatedBy": True,
    "PodLevelResources": True,
    "UnadmittedWorkloadsExplicitStatus": False,
    # Beta and on upstream since 0.19: an evicted workload's ProvisioningRequests are deleted.
    "CleanupProvisioningRequestsOnEviction": True,
    # Topology-aware scheduling: beta and on upstream (docs/topology.md).
    "TopologyAwareScheduling": True,
    "TASProfileMixed": True,
    "TASFailedNodeReplacement": True,
    "TASFailedNodeReplacementFailFast": True,
    "TASMultiLayerTopology": True,
    "TASRecomputeAssignmentWithinSchedulingCycle": True,
    # Beta and on upstream since 0.18: TAS flavors whose topology ends at the host share
    # the usage of each node (docs/topology.md, "Flavors that share nodes").
    "TASHandleOverlappingFlavors": True,
    # Beta and on upstream: admitted pods are labelled with their queues (reconcilers/jobframework.py).
    "AssignQueueLabelsForPods": True,
    # Beta and on upstream: a queued LeaderWorkerSet's size is immutable (kube/webhooks.py).
    "LWSImmutableGroupSize": True,
    # Beta and on upstream: topology assignments are written as runs of hostname prefixes.
    "TASAssignmentsEncodingByHostnamePrefix": True,
}


@dataclass(frozen=True, slots=True)
class ResourceTransformation:
    """Upstream Configuration's ``resources.transformations[]``: how a requested resource
    counts against quota. Per unit of ``input`` (times the quantity of ``multiply_by``, when
    the pod requests it) each output gets its factor (milli-units); ``retain`` keeps the
    input too (strategy Retain, the default), else it is replaced."""

    input: str
    retain: bool = True
    outputs: tuple[tuple[str, int], ...] = ()
    multiply_by: str = ""


@dataclass(frozen=True, slots=True)
class Resources:
    """Upstream Configuration's ``resources``: what of a pod's requests counts as quota.
    Placement on nodes (topology-aware scheduling) still reads the pod's own requests."""

    exclude_prefixes: tuple[str, ...] = ()
    transformations: tuple[ResourceTransformation, ...] = ()

    def quota_requests(self, requests: dict[str, int]) -> dict[str, int]:
        """One pod's requests as quota counts them: excluded resources dropped, then
        transformed; an output that the factors make negative counts as zero."""
        if not self.exclude_prefixes and not self.transformations:
            return requests
        kept = {
            name: value
            for name, value in requests.items()
            if not any(name.startswith(prefix) for prefix in self.exclude_prefixes)
        }
        by_input = {t.input: t for t in self.transformations}
        if not any(name in by_input for name in kept):
            return kept
        result: dict[str, int] = {}
        made: dict[str, int] = {}
        for name, value in kept.items():
            rule = by_input.get(name)
            if rule is None:
                result[name] = value
                continue
            base = value
            if rule.multiply_by and rule.multiply_by in kept:
                base = _times(value, kept[rule.multiply_by])
            for output, factor in rule.outputs:
                made[output] = made.get(output, 0) + _times(base, factor)
            if rule.retain:
                result[name] = value
        for name, value in made.items():
            result[name] = result.get(name, 0) + max(0, value)
        return result


def _times(a: int, b: int) -> int:
    """The product of two milli-unit quantities, in milli-units, rounded up as upstream's
    milli-value of a quantity is."""
    product = a * b
    return -((-product) // 1000)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    fair_sharing: FairSharing = FairSharing()
    admission_fair_sharing: AdmissionFairSharing | None = None
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # pykueue's own: within a cycle, once a ClusterQueue admits within its nominal quota and
    # still has room there, heads that would borrow the same flavor-resources in its cohort
    # tree wait for the next cycle (docs/semantics.md, "Nominal quota first"). Off reproduces
    # upstream's cycle exactly; scenario files get it only when they ask.
    nominal_first: bool = True
    # pykueue's own: the preemption contract of every ClusterQueue that has none of its own
    # (the site's minimum run time before a preemption, docs/governance.md); None: upstream's.
    default_contract: PreemptionContract | None = None
    # pykueue's own: the preemption-cost policy of every ClusterQueue without its own
    # (docs/governance.md, "Cost-aware preemption"); None: upstream's choice of victims.
    default_preemption_cost: PreemptionCost | None = None
    # pykueue's own: the reservation policy of every ClusterQueue without its own or its
    # cohorts' (docs/governance.md, "Reservations for an aged head"); None: upstream's cycle.
    default_reservation: Reservation | None = None
    # Upstream Configuration's ``resources`` (excludeResourcePrefixes, transformations).
    resources: Resources = Resources()
    wait_for_pods_ready: WaitForPodsReady | None = None
    # How an eviction completes. False: at once, in the same step (scenario files, the
    # simulator). True: `State.evict` only starts it; the workload keeps its quota
    # (and is a preemption target already under way) until the controller reports its
    # job stopped with `State.complete_eviction`, as upstream's job reconciler does.
    async_evictions: bool = False
    # Whether an AdmissionCheck with no Active condition counts as active. True for scenario
    # files and the simulator, where no check controller runs to write it. The controllers
    # (both modes) set False, as upstream's cache reads it: only ``Active: True`` counts, so
    # a check whose controller never answers leaves its ClusterQueue inactive, saying why,
    # instead of holding the quota of every workload it reserves for ever.
    checks_active_without_condition: bool = True
    # Where an evicted workload goes back in its queue. "Eviction" (the scenario format's
    # rule): at its eviction time, whatever the eviction. "Creation" (upstream v0.19.2's
    # ordering): at its creation time, except an admission-check eviction and a PodsReady
    # timeout under requeuingStrategy Eviction (at the eviction time) and a reclaim while
    # borrowing with PrioritySortingWithinCohort off (just after its preemptor).
    # docs/semantics.md, "Queue time of an evicted workload".
    requeue_order: str = EVICTION_TIMESTAMP

    def gate(self, name: str) -> bool:
        """The gate's value here, or its default; a name no Kueue release has is a bug in the
        caller (a misspelt gate would otherwise read as off for ever), so it raises."""
        if name not in KNOWN_GATES:
            raise KeyError(f"unknown feature gate {name!r} (api/feature_gates.py KNOWN_GATES)")
        return self.feature_gates.get(name, DEFAULT_GATES.get(name, False))
