"""Small, valid manifests of every kind, fully defaulted, for round trips and rule tests.

Each function returns a fresh dict, so a test can break one field without affecting
another test; `with_(doc, "spec.resourceGroups[0].flavors[0].name", "x")` does that in
one line.
"""

from __future__ import annotations

import copy
import re
from typing import Any

V2 = "kueue.x-k8s.io/v1beta2"
V1 = "kueue.x-k8s.io/v1beta1"


def _cq_defaults() -> dict[str, Any]:
    return {
        "queueingStrategy": "BestEffortFIFO",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "Never",
        },
        "stopPolicy": "None",
    }


def resource_flavor() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "ResourceFlavor",
        "metadata": {"name": "spot"},
        "spec": {
            "nodeLabels": {"cloud.example.com/spot": "true"},
            "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "topologyName": "default",
        },
    }


def cluster_queue() -> dict[str, Any]:
    spec = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "on-demand",
                        "resources": [
                            {
                                "name": "cpu",
                                "nominalQuota": "40",
                                "borrowingLimit": "10",
                                "lendingLimit": "5",
                            },
                            {"name": "memory", "nominalQuota": "64Gi"},
                        ],
                    },
                    {
                        "name": "spot",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "40000m"},
                            {"name": "memory", "nominalQuota": "128Gi"},
                        ],
                    },
                ],
            },
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}],
            },
        ],
        "cohortName": "research",
        "namespaceSelector": {},
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["spot"]}]},
        "fairSharing": {"weight": "2"},
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
    }
    spec.update(_cq_defaults())
    spec["preemption"] = {
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        "withinClusterQueue": "LowerPriority",
    }
    return {"apiVersion": V2, "kind": "ClusterQueue", "metadata": {"name": "research-a"}, "spec": spec}


def local_queue() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": "team-a"},
        "spec": {"clusterQueue": "research-a", "stopPolicy": "None", "fairSharing": {"weight": "1"}},
        "status": {
            "fairSharing": {
                "weightedShare": 0,
                "admissionFairSharingStatus": {
                    "consumedResources": {"cpu": "12", "memory": "1Gi"},
                    "lastUpdate": "2026-01-01T00:00:00Z",
                },
            }
        },
    }


def cohort() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {
            "parentName": "org",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "on-demand",
                            "resources": [{"name": "cpu", "nominalQuota": "10", "lendingLimit": "20"}],
                        }
                    ],
                }
            ],
            "fairSharing": {"weight": "500m"},
        },
    }


def workload_priority_class() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
        "description": "urgent work",
    }


def admission_check() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prc"},
        },
    }


def provisioning_request_config() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "prc"},
        "spec": {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
            "managedResources": ["nvidia.com/gpu"],
            "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800},
        },
    }


def multikueue_config() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "MultiKueueConfig",
        "metadata": {"name": "mk"},
        "spec": {"clusters": ["worker-1", "worker-2"]},
    }


def multikueue_cluster() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "MultiKueueCluster",
        "metadata": {"name": "worker-1"},
        "spec": {"clusterSource": {"kubeConfig": {"location": "worker-1-secret", "locationType": "Secret"}}},
    }


def topology() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {
            "levels": [
                {"nodeLabel": "cloud.example.com/block"},
                {"nodeLabel": "cloud.example.com/rack"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]
        },
    }


def workload() -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {
            "name": "job-a",
            "namespace": "team-a",
            "uid": "0001",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "train"},
        },
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "minCount": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                                    "env": [{"name": "A", "value": "b"}],
                                }
                            ],
                            "tolerations": [{"key": "spot", "operator": "Exists"}],
                        }
                    },
                }
            ],
            "queueName": "main",
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
            "priority": 1000,
            "active": True,
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "Quota reserved in ClusterQueue research-a",
                    "lastTransitionTime": "2026-01-01T00:01:00Z",
                }
            ],
            "admission": {
                "clusterQueue": "research-a",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": "on-demand", "memory": "on-demand"},
                        "resourceUsage": {"cpu": "2", "memory": "4Gi"},
                        "count": 4,
                    }
                ],
            },
            "requeueState": {"count": 1, "requeueAt": "2026-01-01T00:05:00Z"},
            "reclaimablePods": [{"name": "main", "count": 1}],
            "admissionChecks": [
                {
                    "name": "prov",
                    "state": "Ready",
                    "lastTransitionTime": "2026-01-01T00:02:00Z",
                    "message": "provisioned",
                    "podSetUpdates": [{"name": "main", "nodeSelector": {"zone": "a"}}],
                }
            ],
        },
    }


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}


def limit_range() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": "team-a"},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}, "max": {"cpu": "4"}}]},
    }


def priority_class() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "pod-high"},
        "value": 100000,
        "preemptionPolicy": "PreemptLowerPriority",
    }


def node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
        "spec": {"taints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {
            "parallelism": 3,
            "completions": 3,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                }
            },
        },
    }


ALL = {
    "ResourceFlavor": resource_flavor,
    "ClusterQueue": cluster_queue,
    "LocalQueue": local_queue,
    "Cohort": cohort,
    "WorkloadPriorityClass": workload_priority_class,
    "AdmissionCheck": admission_check,
    "ProvisioningRequestConfig": provisioning_request_config,
    "MultiKueueConfig": multikueue_config,
    "MultiKueueCluster": multikueue_cluster,
    "Topology": topology,
    "Workload": workload,
    "Namespace": namespace,
    "LimitRange": limit_range,
    "PriorityClass": priority_class,
    "Node": node,
    "Job": job,
}

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def with_(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `doc` with the field at `path` set (or removed when value is `DELETE`)."""
    out = copy.deepcopy(doc)
    steps: list[str | int] = [m[1] if m[1] else int(m[2]) for m in _STEP.finditer(path)]
    node: Any = out
    for step in steps[:-1]:
        if isinstance(step, str) and step not in node:
            node[step] = {}
        node = node[step]
    if value is DELETE:
        del node[steps[-1]]
    else:
        node[steps[-1]] = value
    return out


DELETE = object()
