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
    cluster_queue: DNSSubdomain = ""
    stop_policy: StopPolicy = "None"
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
    conditions: list[Condition] = Field(default_factory=list, max_length=16)
    pending_workloads: Int32 | None = None
    reserving_workloads: Int32 | None = None
    admitted_workloads: Int32 | None = None
    flavors_reservation: list[LocalQueueFlavorUsage] = Field(default_factory=list, max_length=64)
    flavors_usage: list[LocalQueueFlavorUsage] = Field(default_factory=list, max_length=64)
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["LocalQueue"] = "LocalQueue"
    metadata: ObjectMeta
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus = Field(default_factory=LocalQueueStatus)
