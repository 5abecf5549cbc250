"""MultiKueueConfig and MultiKueueCluster: dispatching admitted workloads to worker clusters.

The engine ignores these kinds: dispatching to worker clusters is the business of the
Kubernetes controller's MultiKueue admission check (`pykueue.multikueue.controller`,
docs/multikueue.md), which reads them as manifests.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.meta import Condition, KubeModel, ObjectMeta

LocationType = Literal["Secret", "Path"]
QuotaManagementMode = Literal["Manual", "Automated"]


class KubeConfig(KubeModel):
    location: str = Field(min_length=1, max_length=256)
    location_type: LocationType = "Secret"


class ClusterProfileReference(KubeModel):
    name: str = Field(min_length=1, max_length=256)


class ClusterSource(KubeModel):
    """Exactly one of a kubeconfig or a ClusterProfile reference (checked by validation)."""

    kube_config: KubeConfig | None = None
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterSpec(KubeModel):
    cluster_source: ClusterSource


class MultiKueueClusterStatus(KubeModel):
    conditions: list[Condition] = Field(default_factory=list, max_length=16)


class MultiKueueCluster(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["MultiKueueCluster"] = "MultiKueueCluster"
    metadata: ObjectMeta
    spec: MultiKueueClusterSpec
    status: MultiKueueClusterStatus = Field(default_factory=MultiKueueClusterStatus)


class MultiKueueConfigSpec(KubeModel):
    clusters: list[str] = Field(min_length=1, max_length=20)
    quota_management: QuotaManagementMode | None = None


class MultiKueueConfig(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["MultiKueueConfig"] = "MultiKueueConfig"
    metadata: ObjectMeta
    spec: MultiKueueConfigSpec
