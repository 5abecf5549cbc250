"""What every job kind's end-to-end test does: queues, a preemptor, and reading what happened.

Each kind's test submits upstream's example for it into a namespace whose LocalQueue is
``user-queue`` (the name the examples use), on kwok nodes of their own pool, so the
flavor's node selector is visible on the pods.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml

from ..controlplane import KubeCluster
from .conftest import KUEUE, ControllerThread, Kueue, is_true, job_manifest, wait

POOL_LABEL = "pykueue.test/pool"
HIGH = "pykueue-high"


@dataclass
class Setup:
    namespace: str
    pool: str
    cluster_queue: str
    flavor: str


def queues(kueue: Kueue, namespace: str, *, cpu: str, memory: str = "64Gi", nodes: Any = None) -> Setup:
    """A flavor pinned to a fresh node pool, a ClusterQueue that preempts lower priorities, ``user-queue``."""
    tag = secrets.token_hex(3)
    setup = Setup(namespace, f"pool-{tag}", f"cq-{tag}", f"rf-{tag}")
    if nodes is not None:
        nodes(2, labels={POOL_LABEL: setup.pool}, capacity={"cpu": "16", "memory": "64Gi", "pods": "110"})
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": setup.flavor},
            "spec": {"nodeLabels": {POOL_LABEL: setup.pool}},
        }
    )
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": setup.cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": setup.flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": cpu},
                                    {"name": "memory", "nominalQuota": memory},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": namespace},
            "spec": {"clusterQueue": setup.cluster_queue},
        }
    )
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": HIGH},
            "value": 1000,
        }
    )
    return setup


@contextmanager
def controller_for(cluster: KubeCluster, *frameworks: str) -> Iterator[ControllerThread]:
    """pykueue's controller and webhooks managing ``frameworks`` (besides batch/job)."""
    system = f"pykueue-system-{secrets.token_hex(3)}"
    cluster.create_namespace(system)
    thread = ControllerThread(
        str(cluster.kubeconfig), webhook_namespace=system, frameworks=("batch/job", *frameworks)
    ).start()
    try:
        yield thread
    finally:
        thread.stop()
        cluster.delete(f"/api/v1/namespaces/{system}")


def create(cluster: KubeCluster, namespace: str, text: str) -> list[dict[str, Any]]:
    """``kubectl create`` each document (generateName works); the objects as the API server stored them."""
    created = []
    for doc in yaml.safe_load_all(text):
        if doc:
            doc.get("metadata", {}).pop("namespace", None)
            out = cluster.kubectl(
                "create", "-n", namespace, "-o", "json", "-f", "-", input=yaml.safe_dump(doc)
            )
            created.append(json.loads(out))
    return created


def workloads_of(cluster: KubeCluster, namespace: str, uid: str) -> list[dict[str, Any]]:
    items = cluster.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
    return [w for w in items if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences", []))]


def workload_of(cluster: KubeCluster, namespace: str, uid: str) -> dict[str, Any] | None:
    found = workloads_of(cluster, namespace, uid)
    return found[0] if found else None


def admitted(cluster: KubeCluster, namespace: str, uid: str) -> dict[str, Any] | None:
    workload = workload_of(cluster, namespace, uid)
    return workload if is_true(workload, "Admitted") else None


def pods(cluster: KubeCluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cluster.get(
        f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"
    )["items"]
    return [p for p in found if not p["metadata"].get("deletionTimestamp")]


def placed_in_pool(found: list[dict[str, Any]], pool: str, count: int) -> list[dict[str, Any]] | None:
    """``count`` pods, each with the flavor's node selector and bound to a node of the pool."""
    if len(found) < count:
        return None
    for pod in found:
        if (pod["spec"].get("nodeSelector") or {}).get(POOL_LABEL) != pool or not pod["spec"].get("nodeName"):
            return None
    return found


def preempt_with_high_priority_job(
    kueue: Kueue, setup: Setup, cpu: str, run_duration: str = "3s"
) -> dict[str, Any]:
    """A Job of the high WorkloadPriorityClass asking for ``cpu``: it preempts lower priorities."""
    job = job_manifest(f"preemptor-{secrets.token_hex(2)}", "user-queue", cpu=cpu, run_duration=run_duration)
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = HIGH
    return kueue.create_job(setup.namespace, job)


def quota_released(kueue: Kueue, setup: Setup) -> bool:
    status = kueue.cluster_queue(setup.cluster_queue).get("status") or {}
    if status.get("reservingWorkloads") or status.get("admittedWorkloads"):
        return False
    for flavor in status.get("flavorsReservation") or []:
        for resource in flavor.get("resources") or []:
            if str(resource.get("total")) not in ("0", "0m"):
                return False
    return True


def wait_finished(cluster: KubeCluster, namespace: str, uid: str, timeout: float = 90) -> dict[str, Any]:
    return wait(
        lambda: (w := workload_of(cluster, namespace, uid)) is not None and is_true(w, "Finished") and w,
        timeout,
        "the Workload to be Finished",
    )


def lifecycle(
    cluster: KubeCluster,
    kueue: Kueue,
    setup: Setup,
    *,
    path: str,
    uid: str,
    selector: str,
    pod_count: int,
    suspended: Any,
    preemptor_cpu: str,
    templates: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Admitted and resumed with the flavor on its pods; preempted, stopped and restored; resumed again.

    ``suspended(obj)`` reads the kind's suspend field, ``templates(obj)`` its pod templates
    (to see the flavor's node selector removed while it waits). Returns both rounds' pods.
    """
    wait(lambda: admitted(cluster, setup.namespace, uid), 60, "the Workload admitted")
    wait(lambda: suspended(cluster.get(path)) is False, 30, "resumed")
    first = wait(
        lambda: placed_in_pool(pods(cluster, setup.namespace, selector), setup.pool, pod_count), 90, "pods"
    )
    preemptor = preempt_with_high_priority_job(kueue, setup, cpu=preemptor_cpu)
    wait(lambda: is_true(workload_of(cluster, setup.namespace, uid), "Evicted"), 60, "the Workload evicted")
    wait(lambda: suspended(cluster.get(path)) is True, 30, "suspended")

    def restored() -> bool:
        return all(
            POOL_LABEL not in ((t.get("spec") or {}).get("nodeSelector") or {})
            for t in templates(cluster.get(path))
        )

    wait(restored, 30, "the pod templates restored")
    wait(lambda: not pods(cluster, setup.namespace, selector), 60, "the pods gone")
    wait(
        lambda: is_true(kueue.job(setup.namespace, preemptor["metadata"]["name"]), "Complete"),
        60,
        "preemptor",
    )
    wait(lambda: admitted(cluster, setup.namespace, uid), 60, "admitted again")
    wait(lambda: suspended(cluster.get(path)) is False, 30, "resumed again")
    second = wait(
        lambda: placed_in_pool(pods(cluster, setup.namespace, selector), setup.pool, pod_count),
        90,
        "pods again",
    )
    assert {p["metadata"]["uid"] for p in second}.isdisjoint(p["metadata"]["uid"] for p in first)
    return first, second
