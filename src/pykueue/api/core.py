"""The part of core Kubernetes (v1, scheduling.k8s.io/v1) that queueing reads.

Quota decisions need a pod's resource requests, where it may run (node selector,
required node affinity, tolerations) and its priority; namespaces matter for a
ClusterQueue's ``namespaceSelector``, LimitRanges for default requests, Nodes for
topology-aware scheduling. Those fields are modelled precisely and checked.

The large types we read only in part (PodSpec, Container, NodeSpec, NodeStatus) are
`meta.PassthroughModel`s: a field we do not model, such as ``volumes`` or ``env``, is
carried through untouched rather than refused, so real manifests load and round-trip.
The small types (Taint, Toleration, selectors) refuse unknown fields like the Kueue kinds.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pykueue.api import quantity
from pykueue.api.meta import (
    Int32,
    Int64,
    KubeModel,
    ObjectMeta,
    PassthroughModel,
    Quantity,
    ResourceList,
    Time,
)

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TolerationOperator = Literal["Exists", "Equal"]


class Taint(KubeModel):
    key: str
    value: str = ""
    effect: TaintEffect
    time_added: Time | None = None


class Toleration(KubeModel):
    """An empty key with operator Exists tolerates everything; an empty effect, every effect."""

    key: str = ""
    operator: TolerationOperator | None = None
    value: str = ""
    effect: TaintEffect | None = None
    toleration_seconds: Int64 | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates `taint` (corev1 Toleration.ToleratesTaint)."""
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


class NodeSelectorRequirement(KubeModel):
    key: str
    operator: NodeSelectorOperator
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(KubeModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(KubeModel):
    node_selector_terms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(KubeModel):
    weight: Int32
    preference: NodeSelectorTerm


class NodeAffinity(KubeModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )


class Affinity(KubeModel):
    """Only node affinity matters for flavor assignment; pod (anti-)affinity is carried as given."""

    node_affinity: NodeAffinity | None = None
    pod_affinity: dict[str, Any] | None = None
    pod_anti_affinity: dict[str, Any] | None = None


class ResourceClaim(PassthroughModel):
    name: str


class ResourceRequirements(KubeModel):
    limits: ResourceList = Field(default_factory=dict)
    requests: ResourceList = Field(default_factory=dict)
    claims: list[ResourceClaim] = Field(default_factory=list)


class Container(PassthroughModel):
    name: str
    image: str = ""
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    # On an init container, "Always" makes it a sidecar (KEP 753): it runs beside the
    # containers, so its requests count with theirs (engine/pod_requests.py).
    restart_policy: str | None = None


class PodSchedulingGate(KubeModel):
    name: str


class PodSpec(PassthroughModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    node_name: str = ""
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    priority_class_name: str = ""
    priority: Int32 | None = None
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
    scheduling_gates: list[PodSchedulingGate] = Field(default_factory=list)
    runtime_class_name: str | None = None
    overhead: ResourceList = Field(default_factory=dict)
    resources: ResourceRequirements | None = None
    restart_policy: Literal["Always", "OnFailure", "Never"] | None = None
    scheduler_name: str = ""


class PodTemplateSpec(KubeModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


# --- top-level core kinds -------------------------------------------------------------


class NamespaceSpec(KubeModel):
    finalizers: list[str] = Field(default_factory=list)


class NamespaceStatus(PassthroughModel):
    phase: Literal["Active", "Terminating"] | None = None


class Namespace(KubeModel):
    """A namespace; its labels are what a ClusterQueue's namespaceSelector matches."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta
    spec: NamespaceSpec = Field(default_factory=NamespaceSpec)
    status: NamespaceStatus = Field(default_factory=NamespaceStatus)


LimitType = Literal["Container", "Pod", "PersistentVolumeClaim"]


class LimitRangeItem(KubeModel):
    type: LimitType
    max: ResourceList = Field(default_factory=dict)
    min: ResourceList = Field(default_factory=dict)
    default: ResourceList = Field(default_factory=dict)
    default_request: ResourceList = Field(default_factory=dict)
    max_limit_request_ratio: ResourceList = Field(default_factory=dict)


class LimitRangeSpec(KubeModel):
    limits: list[LimitRangeItem]


class LimitRange(KubeModel):
    """Per-namespace default requests and bounds, which Kueue applies when it sizes a pod set."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["LimitRange"] = "LimitRange"
    metadata: ObjectMeta
    spec: LimitRangeSpec


class PriorityClass(KubeModel):
    """scheduling.k8s.io/v1 PriorityClass; a Workload may take its priority from one."""

    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta
    value: Int32
    global_default: bool | None = None
    description: str = ""
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None


class NodeSpec(PassthroughModel):
    taints: list[Taint] = Field(default_factory=list)
    unschedulable: bool | None = None
    provider_id: str = Field(default="", alias="providerID")
    pod_cidr: str = Field(default="", alias="podCIDR")
    pod_cidrs: list[str] = Field(default_factory=list, alias="podCIDRs")


class NodeCondition(PassthroughModel):
    type: str
    status: Literal["True", "False", "Unknown"]
    last_heartbeat_time: Time | None = None
    last_transition_time: Time | None = None
    reason: str = ""
    message: str = ""


class NodeStatus(PassthroughModel):
    capacity: ResourceList = Field(default_factory=dict)
    allocatable: ResourceList = Field(default_factory=dict)
    conditions: list[NodeCondition] = Field(default_factory=list)


class Node(KubeModel):
    """A node: its labels place it in a topology, its allocatable is what it can hold."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Node"] = "Node"
    metadata: ObjectMeta
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


class PodStatus(PassthroughModel):
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"] | None = None


class Pod(KubeModel):
    """A pod bound to a node: read only for the capacity it takes from that node."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    def is_terminated(self) -> bool:
        return self.status.phase in ("Succeeded", "Failed")


def pod_requests(spec: PodSpec) -> dict[str, Quantity]:
    """The requests of one pod as Kubernetes sums them, with quantities as written per container.

    Regular containers add up, an init container counts only when it alone needs more,
    and pod overhead is added on top. Returns canonical quantity text per resource.
    """
    totals: dict[str, int] = {}
    for container in spec.containers:
        for name, text in _effective_requests(container).items():
            totals[name] = totals.get(name, 0) + quantity.parse(text)
    for container in spec.init_containers:
        for name, text in _effective_requests(container).items():
            totals[name] = max(totals.get(name, 0), quantity.parse(text))
    for name, text in spec.overhead.items():
        totals[name] = totals.get(name, 0) + quantity.parse(text)
    return {name: quantity.format_milli(value) for name, value in totals.items()}


def _effective_requests(container: Container) -> dict[str, str]:
    # A limit without a request is also the request (Kubernetes defaulting).
    requests = dict(container.resources.limits)
    requests.update(container.resources.requests)
    return requests
