"""Metrics and the visibility API scraped over HTTP from a `pykueue controller` process on the real control plane."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ..controller.conftest import KUEUE, Kueue, is_true, wait
from ..controller.test_job_integration import _cluster_queue, _flavor, _local_queue
from ..controlplane import KubeCluster
from .conftest import Controllers

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta1"


def workload(namespace: str, name: str, priority: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "queue",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                            ],
                        }
                    },
                }
            ],
        },
    }


def scrape(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, frozenset({"replica_role": "standalone", **labels}.items()))]


def tenant_token(cluster: KubeCluster, namespace: str) -> str:
    """A ServiceAccount allowed to read LocalQueues' pending workloads in its namespace only."""
    cluster.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant"}},
    )
    cluster.create(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pending-reader"},
            "rules": [
                {
                    "apiGroups": ["visibility.kueue.x-k8s.io"],
                    "resources": ["localqueues/pendingworkloads"],
                    "verbs": ["get"],
                }
            ],
        },
    )
    cluster.create(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "pending-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pending-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        },
    )
    answer = cluster.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/tenant/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(answer["status"]["token"])


def test_metrics_equal_the_objects_and_tenants_see_only_their_namespace(
    kwok_cluster: KubeCluster, kueue: Kueue, controllers: Controllers, kube_namespace: str
) -> None:
    ns = kube_namespace
    cq = f"{ns}-cq"
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(cq, f"{ns}-flavor", "2"))
    kueue.apply(_local_queue(ns, "queue", cq))
    for i, priority in enumerate([0, 0, 0, 5, 0]):
        kwok_cluster.create(f"{KUEUE}/namespaces/{ns}/workloads", workload(ns, f"w{i}", priority))
    controller = controllers.start()
    controller.wait_running()
    assert controller.http("/healthz") == (200, "ok")
    assert controller.http("/readyz") == (200, "ok")

    def settled() -> list[dict[str, Any]] | None:
        items: list[dict[str, Any]] = kwok_cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
        admitted = [w for w in items if is_true(w, "Admitted")]
        status = kueue.cluster_queue(cq).get("status") or {}
        return items if len(admitted) == 2 and status.get("pendingWorkloads") == 3 else None

    items = wait(settled, 30, "two admitted, three pending")
    admitted = {w["metadata"]["name"] for w in items if is_true(w, "Admitted")}
    assert "w3" in admitted  # the highest priority goes first

    status, text = controller.http("/metrics")
    assert status == 200
    samples = scrape(text)
    assert value(samples, "kueue_admitted_workloads_total", cluster_queue=cq, priority_class="") == 2
    assert value(samples, "kueue_reserving_active_workloads", cluster_queue=cq) == 2
    assert value(samples, "kueue_admitted_active_workloads", cluster_queue=cq) == 2
    pending = sum(
        value(samples, "kueue_pending_workloads", cluster_queue=cq, status=s)
        for s in ("active", "inadmissible")
    )
    cq_status = kueue.cluster_queue(cq)["status"]
    assert pending == cq_status["pendingWorkloads"] == 3
    assert value(samples, "kueue_cluster_queue_status", cluster_queue=cq, status="active") == 1
    for name in ("kueue_cluster_queue_nominal_quota", "kueue_cluster_queue_resource_usage"):
        labels = {"cohort": "", "cluster_queue": cq, "flavor": f"{ns}-flavor", "resource": "cpu"}
        assert value(samples, name, **labels) == 2
    used = cq_status["flavorsUsage"][0]["resources"]
    assert {r["name"]: r["total"] for r in used}["cpu"] == "2"
    assert value(samples, "kueue_admission_wait_time_seconds_count", cluster_queue=cq, priority_class="") == 2
    # Both admissions are stored: none waits in the admissions' lane of the write queue.
    assert value(samples, "pykueue_workload_status_writes_waiting", lane="admission") == 0

    # Visibility: an admin reads the ClusterQueue; the tenant only its own LocalQueue.
    status, body = controller.http(f"{VISIBILITY}/clusterqueues/{cq}/pendingworkloads", kwok_cluster.token)
    assert status == 200, body
    summary = json.loads(body)
    assert summary["kind"] == "PendingWorkloadsSummary"
    # Equal priorities: by creation (whole seconds on the API server), then by uid, as the engine sorts.
    waiting = [w for w in items if w["metadata"]["name"] not in admitted]
    order = sorted(waiting, key=lambda w: (w["metadata"]["creationTimestamp"], w["metadata"]["uid"]))
    assert [i["metadata"]["name"] for i in summary["items"]] == [w["metadata"]["name"] for w in order]
    assert [i["positionInClusterQueue"] for i in summary["items"]] == [0, 1, 2]
    assert all(i["localQueueName"] == "queue" and i["metadata"]["namespace"] == ns for i in summary["items"])

    token = tenant_token(kwok_cluster, ns)
    lq_path = f"{VISIBILITY}/namespaces/{ns}/localqueues/queue/pendingworkloads"
    status, body = controller.http(lq_path, token)
    assert status == 200, body
    assert [i["positionInLocalQueue"] for i in json.loads(body)["items"]] == [0, 1, 2]
    assert controller.http(f"{VISIBILITY}/clusterqueues/{cq}/pendingworkloads", token)[0] == 403
    assert (
        controller.http(f"{VISIBILITY}/namespaces/default/localqueues/queue/pendingworkloads", token)[0]
        == 403
    )
    assert controller.http(lq_path)[0] == 401
    for w in items:
        kwok_cluster.delete(f"{KUEUE}/namespaces/{ns}/workloads/{w['metadata']['name']}")


def test_pending_workloads_carry_their_estimated_start(
    kwok_cluster: KubeCluster, kueue: Kueue, controllers: Controllers, kube_namespace: str
) -> None:
    ns = kube_namespace
    cq = f"{ns}-cq"
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(cq, f"{ns}-flavor", "1"))
    kueue.apply(_local_queue(ns, "queue", cq))
    first = workload(ns, "first")
    first["spec"]["maximumExecutionTimeSeconds"] = 600
    kwok_cluster.create(f"{KUEUE}/namespaces/{ns}/workloads", first)
    controller = controllers.start()
    controller.wait_running()
    path = f"{KUEUE}/namespaces/{ns}/workloads"
    wait(lambda: is_true(kwok_cluster.get(f"{path}/first"), "Admitted"), 30, "the first workload admitted")
    kwok_cluster.create(path, workload(ns, "second"))

    def annotated() -> dict[str, Any] | None:
        obj: dict[str, Any] = kwok_cluster.get(f"{path}/second")
        return obj if "pykueue.io/estimated-start" in (obj["metadata"].get("annotations") or {}) else None

    second = wait(annotated, 60, "the estimated-start annotation")
    estimate = json.loads(second["metadata"]["annotations"]["pykueue.io/estimated-start"])
    # The first one ends by its maximumExecutionTimeSeconds at the latest, 600 s after its
    # admission; nothing has finished yet, so half of it is expected (a limit is an upper bound).
    reserved = next(
        c["lastTransitionTime"]
        for c in kwok_cluster.get(f"{path}/first")["status"]["conditions"]
        if c["type"] == "QuotaReserved"
    )
    started = datetime.fromisoformat(reserved.replace("Z", "+00:00"))

    def after_start(field: str) -> float:
        return (datetime.fromisoformat(estimate[field].replace("Z", "+00:00")) - started).total_seconds()

    assert abs(after_start("high") - 600) <= 1
    assert abs(after_start("at") - 300) <= 1
    assert 0 <= after_start("low") <= after_start("at")
    assert estimate["basis"] == "maximumExecutionTimeSeconds as an upper bound (nothing finished yet)"

    status, body = controller.http(f"{VISIBILITY}/clusterqueues/{cq}/pendingworkloads", kwok_cluster.token)
    assert status == 200, body
    [item] = json.loads(body)["items"]
    assert item["metadata"]["name"] == "second" and item["estimatedStart"] == estimate

    for name in ("first", "second"):
        kwok_cluster.delete(f"{path}/{name}")
