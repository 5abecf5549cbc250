"""Workload: the unit Kueue admits — one or more pod sets that start together or not at all.

A job integration turns a Job (or JobSet, RayJob, ...) into a Workload: each pod set
is a pod template and a count. The engine reads the spec (what is asked, in which
queue, at which priority) and the parts of the status that hold history it cannot
recompute: ``admission`` (the quota it holds, per pod set: flavor per resource and
usage), ``conditions`` (QuotaReserved, Admitted, Evicted, Finished...),
``requeueState``, ``admissionChecks`` and ``reclaimablePods``.

Helpers at the end answer the questions every consumer asks (does it hold quota,
is it finished) in one place, so the condition logic is not repeated.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.core import PodTemplateSpec, Toleration
from pykueue.api.meta import (
    Condition,
    DNSLabel,
    DNSSubdomain,
    Int32,
    KubeModel,
    NonNegInt32,
    ObjectMeta,
    PositiveInt32,
    ResourceList,
    ResourceName,
    Time,
)

MAX_POD_SETS = 18
DEFAULT_POD_SET_NAME = "main"

PriorityClassGroup = Literal["kueue.x-k8s.io", "scheduling.k8s.io"]
PriorityClassKind = Literal["WorkloadPriorityClass", "PriorityClass"]
CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]
DelayedTopologyRequestState = Literal["Pending", "Ready"]
PreemptionGatePosition = Literal["Closed", "Open"]

# Condition types and reasons the engine writes and reads.
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
FINISHED = "Finished"
PODS_READY = "PodsReady"
REQUEUED = "Requeued"
DEACTIVATION_TARGET = "DeactivationTarget"


class PriorityClassRef(KubeModel):
    """Which class gives the workload its priority: a WorkloadPriorityClass or a pod PriorityClass."""

    group: PriorityClassGroup
    kind: PriorityClassKind
    name: DNSSubdomain = Field(min_length=1)


class PodsetSliceRequiredTopologyConstraint(KubeModel):
    topology: str = Field(min_length=1, max_length=63)
    size: PositiveInt32


class PodSetTopologyRequest(KubeModel):
    required: str | None = Field(default=None, max_length=63)
    preferred: str | None = Field(default=None, max_length=63)
    unconstrained: bool | None = None
    pod_index_label: str | None = Field(default=None, max_length=317)
    sub_group_index_label: str | None = Field(default=None, max_length=317)
    sub_group_count: NonNegInt32 | None = None
    pod_set_group_name: str | None = Field(default=None, max_length=256)
    pod_set_slice_required_topology: str | None = Field(default=None, max_length=63)
    pod_set_slice_size: PositiveInt32 | None = None
    podset_slice_required_topology_constraints: list[PodsetSliceRequiredTopologyConstraint] = Field(
        default_factory=list, max_length=3
    )


class PodSet(KubeModel):
    """A group of identical pods of the workload."""

    name: DNSLabel = Field(DEFAULT_POD_SET_NAME, description="The pod set's name, unique in the workload.")
    template: PodTemplateSpec = Field(
        default_factory=PodTemplateSpec, description="The pods' template: their requests decide the quota."
    )
    count: NonNegInt32 = Field(1, description="How many pods of this template.")
    min_count: PositiveInt32 | None = Field(
        None, description="With partial admission: the fewest pods the job can run with."
    )
    topology_request: PodSetTopologyRequest | None = None


class PreemptionGate(KubeModel):
    name: str = Field(min_length=1, max_length=63)


class WorkloadSpec(KubeModel):
    """The pods a job needs, its queue and its priority."""

    pod_sets: list[PodSet] = Field(
        default_factory=list,
        max_length=MAX_POD_SETS,
        description="Groups of identical pods; the whole workload is admitted at once.",
    )
    queue_name: DNSSubdomain = Field(
        "", description="The LocalQueue of the workload's namespace it waits in."
    )
    priority_class_ref: PriorityClassRef | None = None
    priority: Int32 | None = Field(None, description="The workload's priority, from its priority class.")
    active: bool = Field(
        True, description="false deactivates the workload: it is evicted and waits until set true again."
    )
    maximum_execution_time_seconds: PositiveInt32 | None = Field(
        None, description="Once admitted this long in total, the workload is deactivated."
    )
    preemption_gates: list[PreemptionGate] = Field(default_factory=list, max_length=8)


# --- topology assignment (v1beta2's compact slice form) ---------------------------------


class TopologyAssignmentSliceLevelIndividualValues(KubeModel):
    prefix: str | None = Field(default=None, max_length=63)
    suffix: str | None = Field(default=None, max_length=63)
    roots: list[str] = Field(min_length=1, max_length=100000)


class TopologyAssignmentSliceLevelValues(KubeModel):
    """Exactly one of: one value shared by every domain, or one value per domain."""

    universal: str | None = Field(default=None, max_length=63)
    individual: TopologyAssignmentSliceLevelIndividualValues | None = None


class TopologyAssignmentSlicePodCounts(KubeModel):
    universal: PositiveInt32 | None = None
    individual: list[PositiveInt32] = Field(default_factory=list, max_length=100000)


class TopologyAssignmentSlice(KubeModel):
    domain_count: PositiveInt32
    values_per_level: list[TopologyAssignmentSliceLevelValues] = Field(min_length=1, max_length=16)
    pod_counts: TopologyAssignmentSlicePodCounts


class TopologyAssignment(KubeModel):
    levels: list[str] = Field(min_length=1, max_length=16)
    slices: list[TopologyAssignmentSlice] = Field(default_factory=list, max_length=1000)

    def domains(self) -> list[tuple[list[str], int]]:
        """The assignment expanded: (value per level, pod count) for every domain."""
        result: list[tuple[list[str], int]] = []
        for part in self.slices:
            for i in range(part.domain_count):
                values = []
                for level in part.values_per_level:
                    if level.individual is not None:
                        ind = level.individual
                        values.append(f"{ind.prefix or ''}{ind.roots[i]}{ind.suffix or ''}")
                    else:
                        values.append(level.universal or "")
                counts = part.pod_counts
                count = counts.individual[i] if counts.individual else counts.universal or 0
                result.append((values, count))
        return result


# --- status ----------------------------------------------------------------------------


class PodSetAssignment(KubeModel):
    name: DNSLabel = DEFAULT_POD_SET_NAME
    flavors: dict[ResourceName, DNSSubdomain] = Field(default_factory=dict)
    resource_usage: ResourceList = Field(default_factory=dict)
    count: NonNegInt32 | None = None
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: DelayedTopologyRequestState | None = None


class Admission(KubeModel):
    cluster_queue: DNSSubdomain
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list, max_length=MAX_POD_SETS)


class RequeueState(KubeModel):
    count: NonNegInt32 | None = None
    requeue_at: Time | None = None


class ReclaimablePod(KubeModel):
    """Pods of a pod set that finished and no longer need their quota."""

    name: DNSLabel
    count: NonNegInt32


class PodSetUpdate(KubeModel):
    name: DNSLabel
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=8)


class AdmissionCheckState(KubeModel):
    name: str = Field(min_length=1, max_length=316)
    state: CheckState
    last_transition_time: Time | None = None
    message: str = Field(default="", max_length=32768)
    requeue_after_seconds: NonNegInt32 | None = None
    retry_count: NonNegInt32 | None = None
    pod_set_updates: list[PodSetUpdate] = Field(default_factory=list, max_length=MAX_POD_SETS)


class PodSetRequest(KubeModel):
    name: DNSLabel
    resources: ResourceList = Field(default_factory=dict)


class WorkloadSchedulingStatsEviction(KubeModel):
    reason: str = Field(max_length=316)
    underlying_cause: str = Field(default="", max_length=316)
    count: NonNegInt32


class SchedulingStats(KubeModel):
    evictions: list[WorkloadSchedulingStatsEviction] = Field(default_factory=list, max_length=256)


class UnhealthyNode(KubeModel):
    name: str = Field(max_length=63)


class PreemptionGateState(KubeModel):
    name: str = Field(min_length=1, max_length=63)
    position: PreemptionGatePosition
    last_transition_time: Time | None = None


class WorkloadStatus(KubeModel):
    conditions: list[Condition] = Field(default_factory=list, max_length=16)
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable_pods: list[ReclaimablePod] = Field(default_factory=list, max_length=MAX_POD_SETS)
    admission_checks: list[AdmissionCheckState] = Field(default_factory=list, max_length=8)
    resource_requests: list[PodSetRequest] = Field(default_factory=list, max_length=MAX_POD_SETS)
    accumulated_past_execution_time_seconds: Int32 | None = None
    scheduling_stats: SchedulingStats | None = None
    nominated_cluster_names: list[str] = Field(default_factory=list, max_length=20)
    cluster_name: str | None = Field(default=None, max_length=256)
    unhealthy_nodes: list[UnhealthyNode] = Field(default_factory=list, max_length=8)
    preemption_gates: list[PreemptionGateState] = Field(default_factory=list, max_length=8)


class Workload(KubeModel):
    """The unit of admission: one job's pods, the queue it waits in, and the quota it was given."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["Workload"] = "Workload"
    metadata: ObjectMeta
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
    status: WorkloadStatus = Field(default_factory=WorkloadStatus)

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, if the workload has one."""
        return next((c for c in self.status.conditions if c.type == type_), None)

    def condition_is_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"

    def has_quota_reservation(self) -> bool:
        """Whether it holds quota: a true QuotaReserved condition, as upstream decides."""
        return self.condition_is_true(QUOTA_RESERVED)

    def is_admitted(self) -> bool:
        return self.condition_is_true(ADMITTED)

    def is_finished(self) -> bool:
        return self.condition_is_true(FINISHED)

    def pod_set(self, name: str) -> PodSet | None:
        return next((ps for ps in self.spec.pod_sets if ps.name == name), None)
