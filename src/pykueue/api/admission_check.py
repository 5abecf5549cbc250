"""AdmissionCheck and ProvisioningRequestConfig: gates a workload passes after getting quota.

A ClusterQueue lists the checks its workloads need (``admissionChecksStrategy``); a
workload holding quota is admitted only once every check is Ready. The check's
``controllerName`` says who decides (``kueue.x-k8s.io/provisioning-request`` for the
built-in ProvisioningRequest check, whose parameters are a ProvisioningRequestConfig).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pykueue.api.meta import Condition, DNSLabel, DNSSubdomain, Int32, KubeModel, ObjectMeta, ResourceName

CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]
PROVISIONING_REQUEST_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"


class AdmissionCheckParametersReference(KubeModel):
    api_group: DNSSubdomain = Field(min_length=1)
    kind: str = Field(min_length=1, max_length=63, pattern=r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$")
    name: DNSLabel = Field(min_length=1)


class AdmissionCheckSpec(KubeModel):
    controller_name: str = Field(min_length=1, max_length=253)
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckStatus(KubeModel):
    conditions: list[Condition] = Field(default_factory=list, max_length=16)


class AdmissionCheck(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    metadata: ObjectMeta
    spec: AdmissionCheckSpec
    status: AdmissionCheckStatus = Field(default_factory=AdmissionCheckStatus)


PodSetMergePolicy = Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"]
_NODE_LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


class ProvisioningRequestRetryStrategy(KubeModel):
    backoff_limit_count: Int32 | None = 3
    backoff_base_seconds: Int32 | None = 60
    backoff_max_seconds: Int32 | None = 1800


class ProvisioningRequestPodSetUpdatesNodeSelector(KubeModel):
    key: str = Field(min_length=1, max_length=317, pattern=_NODE_LABEL_KEY)
    value_from_provisioning_class_detail: str = Field(min_length=1, max_length=32768)


class ProvisioningRequestPodSetUpdates(KubeModel):
    node_selector: list[ProvisioningRequestPodSetUpdatesNodeSelector] = Field(
        default_factory=list, max_length=8
    )


class ProvisioningRequestConfigSpec(KubeModel):
    provisioning_class_name: DNSSubdomain = Field(min_length=1)
    parameters: dict[str, str] = Field(default_factory=dict, max_length=100)
    managed_resources: list[ResourceName] = Field(default_factory=list, max_length=100)
    retry_strategy: ProvisioningRequestRetryStrategy = Field(default_factory=ProvisioningRequestRetryStrategy)
    pod_set_updates: ProvisioningRequestPodSetUpdates | None = None
    pod_set_merge_policy: PodSetMergePolicy | None = None


class ProvisioningRequestConfig(KubeModel):
    api_version: Literal["kueue.x-k8s.io/v1beta2"] = "kueue.x-k8s.io/v1beta2"
    kind: Literal["ProvisioningRequestConfig"] = "ProvisioningRequestConfig"
    metadata: ObjectMeta
    spec: ProvisioningRequestConfigSpec
