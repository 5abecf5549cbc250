"""Small Kueue objects for tests that need a queue design and a few Workloads.

Each builder returns the object as the API takes it (a dict), so a test can change one field
before it creates it; `dump` writes several as one multi-document YAML file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

API = "kueue.x-k8s.io/v1beta2"


def flavor(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}}


def admission_check(name: str, controller: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }


def cluster_queue(
    name: str = "cq",
    cpu: str = "4",
    *,
    checks: Iterable[str] = (),
    annotations: Mapping[str, str] | None = None,
    namespace_labels: Mapping[str, str] | None = None,
    strategy: str | None = None,
) -> dict[str, Any]:
    """A ClusterQueue with one flavor ("default") giving `cpu` of nominal quota."""
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": dict(namespace_labels)} if namespace_labels else {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
    }
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    if strategy:
        spec["queueingStrategy"] = strategy
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": metadata, "spec": spec}


def local_queue(namespace: str, cluster_queue: str = "cq", name: str = "lq") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def workload(
    namespace: str,
    name: str,
    cpu: str = "1",
    *,
    queue: str = "lq",
    created: str | None = None,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A one-pod Workload asking for `cpu`; `owner` is its controller's ownerReference."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if created:
        metadata["creationTimestamp"] = created
    if owner:
        metadata["ownerReferences"] = [dict(owner)]
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {
            "queueName": queue,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


def dump(*objects: Mapping[str, Any]) -> str:
    return yaml.safe_dump_all([dict(o) for o in objects], sort_keys=False)
