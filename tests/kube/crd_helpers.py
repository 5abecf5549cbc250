"""Installing pykueue's CRDs into the test API server (shared by the CRD, webhook and manifest tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pykueue.api import crd

from .controlplane import ApiError, KubeCluster, wait_for

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def apply_crd(cluster: KubeCluster, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Create the CRD, or replace the one there (keeping its resourceVersion)."""
    name = manifest["metadata"]["name"]
    try:
        return dict(cluster.create(CRD_PATH, manifest))
    except ApiError as exc:
        if exc.status != 409:
            raise
    for _ in range(5):
        current = cluster.get(f"{CRD_PATH}/{name}")
        body = {
            **manifest,
            "metadata": {**manifest["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
        }
        try:
            return dict(cluster.request("PUT", f"{CRD_PATH}/{name}", body))
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise AssertionError(f"could not replace CRD {name}: conflicts")


def established(cluster: KubeCluster, name: str) -> bool:
    current = cluster.get(f"{CRD_PATH}/{name}")
    conditions = current.get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def install_crds(
    cluster: KubeCluster, webhook: crd.WebhookClientConfig | None = None
) -> list[dict[str, Any]]:
    """Apply every CRD and wait until each is Established and served."""
    manifests = crd.crds(webhook)
    for manifest in manifests:
        apply_crd(cluster, manifest)
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        wait_for(lambda name=name: established(cluster, name), timeout=60, what=f"CRD {name} Established")
    # Discovery lags a little behind Established.
    wait_for(
        lambda: len(cluster.get("/apis/kueue.x-k8s.io/v1beta2")["resources"]) >= 2 * len(manifests) - 6,
        timeout=60,
        what="kueue.x-k8s.io/v1beta2 in discovery",
    )
    return manifests


# The quickstart's queues (single-clusterqueue-setup), exactly as upstream's docs give them.
QUICKSTART_QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
"""
