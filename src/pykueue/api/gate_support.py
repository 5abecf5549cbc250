"""Which of upstream Kueue's feature gates pykueue implements, and at which values.

Every name in `config.KNOWN_GATES` has one entry in `SUPPORT`:

* ``BOTH``: pykueue acts on either value (the engine or a controller reads the gate).
* ``ONLY``: pykueue implements one value; a configuration that sets the other is refused,
  naming the gate (`problems`), because accepting it would silently keep the behaviour the
  user asked to change.
* ``NOT_APPLICABLE``: the gate changes nothing pykueue does (a Go manager concern, a
  performance cache, an integration or API pykueue does not have); either value is
  accepted, and the reason is said.

docs/semantics.md ("API fields and feature gates of v0.19.2") lists the same table for
users; tests/api/test_gate_support.py holds the two together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

BOTH: Final = "implemented"
ONLY: Final = "one value"
NOT_APPLICABLE: Final = "not applicable"


@dataclass(frozen=True, slots=True)
class Support:
    kind: str
    value: bool | None = None  # the one value pykueue implements (ONLY)
    why: str = ""


def _both() -> Support:
    return Support(BOTH)


def _only(value: bool, why: str) -> Support:
    return Support(ONLY, value, why)


def _na(why: str) -> Support:
    return Support(NOT_APPLICABLE, None, why)


_GA = "graduated upstream; always on in pykueue"
_GONE = "removed upstream; its feature is not in pykueue"
_PERF = "an upstream performance optimisation with no effect on decisions"
_MANAGER = "concerns how upstream's Go manager works, not what it decides"

SUPPORT: Final[dict[str, Support]] = {
    # --- read by the engine or a controller: both values implemented
    "AdmissionFairSharing": _both(),
    "AdmissionGatedBy": _both(),
    "AssignQueueLabelsForPods": _both(),
    "CleanupProvisioningRequestsOnEviction": _both(),
    "DisableWaitForPodsReady": _both(),
    "FairSharingPreemptWithinNominal": _both(),
    "FairSharingPrioritizeNonBorrowing": _both(),
    "FlavorFungibilityPreserveScanProgress": _both(),
    "LWSImmutableGroupSize": _both(),
    "PartialAdmission": _both(),
    "PodLevelResources": _both(),
    "PrioritizePreemptorWorkloads": _both(),
    "PrioritySortingWithinCohort": _both(),
    "ReclaimablePods": _both(),
    "SchedulingEquivalenceHashing": _both(),
    "TASAssignmentsEncodingByHostnamePrefix": _both(),
    "TASFailedNodeReplacement": _both(),
    "TASFailedNodeReplacementFailFast": _both(),
    "TASHandleOverlappingFlavors": _both(),
    "TASProfileMixed": _both(),
    "TASRecomputeAssignmentWithinSchedulingCycle": _both(),
    "TopologyAwareScheduling": _both(),
    "UnadmittedWorkloadsExplicitStatus": _both(),
    # --- v0.19.2 gates pykueue implements at one value
    "ConcurrentAdmission": _only(False, "concurrent admission is not implemented"),
    "ElasticJobsViaWorkloadSlices": _only(
        True, "elastic jobs are refused whatever the gate says; turning it off would not change that"
    ),
    "ElasticJobsViaWorkloadSlicesWithTAS": _only(False, "elastic jobs are not implemented"),
    "FailureRecoveryPolicy": _only(False, "recovery of pods stuck terminating is not implemented"),
    "FastQuotaReleaseInPodIntegration": _only(False, "a terminating pod holds quota until it is gone"),
    "FinishOrphanedWorkloads": _only(True, "a Workload whose owner is gone is finished"),
    "FlavorFungibility": _only(True, "the flavor fungibility rules are always applied"),
    "HierarchicalCohorts": _only(True, "GA and locked upstream"),
    "KueueDRAIntegration": _only(True, "device requests are charged as quota (reconcilers/dra.py)"),
    "KueueDRAIntegrationConsumableCapacity": _only(False, "consumable device capacity is not implemented"),
    "KueueDRAIntegrationExtendedResource": _only(
        False,
        "a DeviceClass's extendedResourceName is not read: a pod's extended resource counts as requested",
    ),
    "KueueDRAIntegrationPartitionableDevices": _only(
        False, "devices are counted per ResourceClaimTemplate request; partitions are not modelled"
    ),
    "KueueDRARejectWorkloadsWhenDRADisabled": _na("the DRA integration cannot be switched off in pykueue"),
    "ManagedJobsNamespaceSelectorAlwaysRespected": _only(True, "GA and locked upstream"),
    "MultiKueue": _only(True, "the MultiKueue admission check is always available"),
    "MultiKueueAdaptersForCustomJobs": _only(
        True,
        "no custom adapters can be configured (multiKueue.externalFrameworks is refused as an unknown key)",
    ),
    "MultiKueueAllowInsecureKubeconfigs": _only(False, "deprecated and locked off upstream"),
    "MultiKueueClusterProfile": _only(False, "clusterProfileRef is refused (the cluster is not active)"),
    "MultiKueueIncrementalDispatcherConfig": _only(
        True, "the step is upstream's default, 3 (a configured stepSize is refused as an unknown key)"
    ),
    "MultiKueueIncrementalDispatcherRespectConfigOrder": _only(
        True, "workers are nominated in the config's order (multikueue/dispatching.py)"
    ),
    "MultiKueueKubeConfigPathValidation": _only(False, "kubeconfig paths are not checked further"),
    "MultiKueueManagerQuotaAutomation": _only(False, "quotaManagement: Automated is refused"),
    "MultiKueueOrchestratedPreemption": _only(False, "preemption gates are refused"),
    "MultiKueueRedoAdmissionOnEvictionInWorker": _only(True, "GA and locked upstream"),
    "MultiKueueRemoteSpecSync": _na("it forwards RayService edits; pykueue has no RayService integration"),
    "MultiKueueWaitForWorkloadAdmitted": _only(True, "GA and locked upstream"),
    "ObjectRetentionPolicies": _only(True, "GA and locked upstream"),
    "PodIntegrationValidateGroupOwner": _only(
        True, "a pod group's Workload is the one marked is-group-workload (reconcilers/pod_groups.py)"
    ),
    "PriorityBoost": _only(False, "the priority-boost annotation is not read"),
    "PropagateBatchJobLabelsToWorkload": _only(True, "GA and locked upstream"),
    "QuotaCheckStrategy": _only(
        True, "resources.quotaCheckStrategy: BlockUndeclared (the default); IgnoreUndeclared is refused"
    ),
    "RecomputeAssignmentUponPreemptionTargetsOverlap": _only(False, "the alpha behaviour is not implemented"),
    "RejectUpdatesToCQWithInvalidOnFlavors": _only(
        True, "invalid onFlavors are refused on every create and update, also of older ClusterQueues"
    ),
    "SchedulerLongRequeueInterval": _only(False, "the alpha 10 s requeue interval is not implemented"),
    "SchedulerTimestampPreemptionBuffer": _only(
        False, "the alpha 5 min preemption buffer is not implemented"
    ),
    "ShortWorkloadNames": _only(False, "Workload names are upstream's default ones"),
    "SkipAncestorCheckForDeletedWorkloads": _only(
        True, "objects being deleted pass the webhooks (kube/webhooks.py)"
    ),
    "SkipFinalizersForPodsSuspendedByParent": _only(True, "GA and locked upstream"),
    "SkipReassignmentForPodOwnedWorkloads": _only(
        False, "a single pod's Workload is placed again after a node failure like any other"
    ),
    "TASBalancedPlacement": _only(False, "balanced placement is not implemented"),
    "TASMultiLayerTopology": _only(
        True, "podset-slice-required-topology-constraints is read (engine/topology_requests.py)"
    ),
    "TASReplaceNodeDueToNotReadyOverFixedTime": _only(
        False, "deprecated; with TASReplaceNodeOnPodTermination off, a node NotReady for 30 s fails anyway"
    ),
    "TASReplaceNodeOnNodeTaints": _only(False, "a NoExecute/NoSchedule taint does not fail a node"),
    "TASReplaceNodeOnPodTermination": _only(
        False, "a node fails when deleted or NotReady for 30 s (reconcilers/node_failures.py), pods or not"
    ),
    "TASRespectNodeAffinityPreferred": _only(False, "preferred node affinity is not scored"),
    "UnadmittedWorkloadsObservability": _only(
        True, "pending workloads get the tiered reasons (Misconfigured, Suspended...)"
    ),
    "VisibilityOnDemand": _only(True, "the visibility API is always served"),
    "WorkloadIdentifierAnnotations": _only(True, "identifiers are read from labels and annotations"),
    "WorkloadPriorityClassDefaulting": _only(False, "no default WorkloadPriorityClass is applied"),
    "WorkloadValidateResourcesAreNonNegative": _only(True, "negative requests are refused"),
    "WorkloadValidationForPodSetMetadata": _only(
        True, "pod set template labels and annotations are validated (api/validation_workload.py)"
    ),
    # --- v0.19.2 gates with nothing to do in pykueue
    "CustomMetricLabels": _na("pykueue exports its own metrics (reconcilers/metrics.py)"),
    "DeferRayServiceFinalizationForRedisCleanup": _na("pykueue has no RayService integration"),
    "LocalQueueMetrics": _na("pykueue exports its own metrics (reconcilers/metrics.py)"),
    "MetricForWorkloadCreationLatency": _na("pykueue exports its own metrics (reconcilers/metrics.py)"),
    "MetricsForCohorts": _na("pykueue exports its own metrics (reconcilers/metrics.py)"),
    "RemoveFinalizersWithStrictPatch": _na(_MANAGER),
    "SchedulerLibraryIntegration": _na(_MANAGER),
    "SparkApplicationIntegration": _na("pykueue has no SparkApplication integration"),
    "TASCacheNodeMatchResults": _na(_PERF),
    "TASCacheTopologyTree": _na(_PERF),
    "TASCachingRemainingResources": _na(_PERF),
    "TASValidateWorkloadSliceSize": _na("elastic jobs (Workload slices) are refused"),
    "TLSOptions": _na(_MANAGER),
    "ValidateRayAndSparkJobUpdates": _na("pykueue's Ray integration checks what upstream's default does"),
    "VectorizedResourceRequests": _na(_PERF),
    "WorkloadRequestUseMergePatch": _na(_MANAGER),
    # --- names older releases had (older configurations still carry them)
    "AdmissionCheckValidationRules": _only(False, _GONE),
    "ConfigurableResourceTransformations": _only(True, _GA),
    "DRAExtendedResources": _only(False, "an earlier name of KueueDRAIntegrationExtendedResource"),
    "DynamicResourceAllocation": _only(True, "an earlier name of KueueDRAIntegration"),
    "ExposeFlavorsInLocalQueue": _only(True, _GA),
    "FlavorFungibilityImplicitPreferenceDefault": _only(False, _GONE),
    "HierarchialCohorts": _only(True, "an earlier spelling of HierarchicalCohorts; " + _GA),
    "KeepQuotaForProvReqRetry": _only(False, _GONE),
    "LendingLimit": _only(True, _GA),
    "LocalQueueDefaulting": _only(True, _GA),
    "ManagedJobsNamespaceSelector": _only(True, _GA),
    "MultiKueueBatchJobWithManagedBy": _only(True, _GA),
    "MultiplePreemptions": _only(True, _GA),
    "ProvisioningACC": _only(True, _GA),
    "QueueVisibility": _only(False, _GONE + " (the visibility API replaced it)"),
    "SanitizePodSets": _only(True, _GA),
    "TASImplicitDefaultUnconstrained": _only(True, _GA),
    "TASLeastAllocated": _only(False, _GONE),
    "TASMostFreeCapacity": _only(False, _GONE),
    "TASProfileLeastFreeCapacity": _only(False, _GONE),
    "TASProfileMostFreeCapacity": _only(False, _GONE),
    "WorkloadResourceRequestsSummary": _only(True, _GA),
}


def problems(gates: Mapping[str, bool]) -> list[str]:
    """Each gate set to a value pykueue does not implement, named with the reason. Unknown names
    are the caller's to refuse."""
    refused = []
    for name, value in sorted(gates.items()):
        support = SUPPORT.get(name)
        if support is not None and support.kind == ONLY and value != support.value:
            refused.append(
                f"{name}: {str(value).lower()} is not supported by pykueue "
                f"(only {str(support.value).lower()}: {support.why})"
            )
    return refused
