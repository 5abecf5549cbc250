"""LocalQueue: the namespaced door through which a tenant's workloads reach a ClusterQueue.

Its status carries one piece of history the engine cannot recompute:
``status.fairSharing.admissionFairSharingStatus`` (decayed resource consumption and
when it was last updated), which admission fair sharing orders queues by.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.fair_sharing import FairSharing, StopPolicy
from pykueue.api.meta import (
    Condition,
    DNSSubdomain,
    Int32,
    Int64,
    KubeModel,
    ObjectMeta,
    Quantity,
    ResourceList,
    ResourceName,
    Time,
)


class LocalQueueSpec(KubeModel):
    """Where this namespace's workloads are queued."""

    cluster_queue: DNSSubdomain = Field("", description="The ClusterQueue this queue sends its workloads to.")
    stop_policy: StopPolicy = Field(
        "None",
        description="None: admit as usual. Hold: admit nothing more from this queue. HoldAndDrain: also evict what it has admitted.",
    )
    fair_sharing: FairSharing | None = None


class LocalQueueAdmissionFairSharingStatus(KubeModel):
    consumed_resources: ResourceList = Field(default_factory=dict)
    last_update: Time | None = None


class LocalQueueFairSharingStatus(KubeModel):
    weighted_share: Int64 = 0
    admission_fair_sharing_status: LocalQueueAdmissionFairSharingStatus | None = None


class LocalQueueResourceUsage(KubeModel):
    name: ResourceName
    total: Quantity = "0"


class LocalQueueFlavorUsage(KubeModel):
    name: DNSSubdomain
    resources: list[LocalQueueResourceUsage] = Field(default_factory=list, max_length=64)


class LocalQueueStatus(KubeModel):
    """This queue's workloads and the quota they hold."""

    conditions: list[Condition] = Field(default_factory=list, max_length=16)
    pending_workloads: Int32 | None = Field(None, description="Workloads of this queue waiting for quota.")
    reserving_workloads: Int32 | None = Field(
        None, description="Workloads of this queue holding a quota reservation."
    )
    admitted_workloads: Int32 | None = Field(None, description="Workloads of this queue admitted.")
    flavors_reservation: list[LocalQueueFlavorUsage] = Field(
        default_factory=list,
        max_length=64,
        description="Quota reserved by this queue's workloads, per flavor and resource.",
    )
    flavors_usage: list[LocalQueueFlavorUsage] = Field(
        default_factory=list,
        max_length=64,
        description="Quota used by this queue's admitted workloads, per flavor and resource.",
    )
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(KubeModel):
    """A namespaced queue that users submit jobs to (label kueue.x-k8s.io/queue-name); it feeds one ClusterQueue."""

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["LocalQueue"] = "LocalQueue"
    metadata: ObjectMeta
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus = Field(default_factory=LocalQueueStatus)
