"""The visibility API as an aggregated API of the real kube-apiserver (issue 18, issue 23's leftover).

`pykueue controller --local-webhooks --webhook-host <this host's address>` registers the
APIServices ``v1beta2``/``v1beta1.visibility.kueue.x-k8s.io``; requests then go through the
API server's aggregation layer (front-proxy client certificate, ``X-Remote-User``) to the
controller, which asks a SubjectAccessReview before it answers from the engine.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pykueue.kube import certs
from pykueue.store import kubernetes

from ..controlplane import ControlPlaneError, KubeCluster
from .conftest import Kueue, LocalController, is_true, wait
from .test_drop_in import _workload
from .test_job_integration import _cluster_queue, _flavor, _local_queue

VISIBILITY = "/apis/visibility.kueue.x-k8s.io"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def _prioritized(ns: str, name: str, queue: str, priority: int) -> dict[str, Any]:
    workload = _workload(ns, name, queue)
    workload["spec"]["priority"] = priority
    return workload


def _queue_of_three(kueue: Kueue, ns: str) -> str:
    """One running Workload and two pending ones (the later one of higher priority); the ClusterQueue."""
    cq = f"{ns}-cq"
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(cq, f"{ns}-flavor", "1"))
    kueue.apply(_local_queue(ns, "team", cq))
    kueue.apply(_prioritized(ns, "first", "team", 0))
    wait(
        lambda: is_true(
            kueue.cluster.get_or_none(f"{KUEUE}/namespaces/{ns}/workloads/first"), "QuotaReserved"
        ),
        30,
        "the first Workload to take the quota",
    )
    kueue.apply(_prioritized(ns, "low", "team", 0))
    kueue.apply(_prioritized(ns, "high", "team", 100))
    return cq


def _raw(cluster: KubeCluster, path: str, *args: str) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(cluster.kubectl("get", "--raw", path, *args))
    return answer


def _pending(summary: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    return [
        (
            item["metadata"]["name"],
            item["priority"],
            item["positionInClusterQueue"],
            item["positionInLocalQueue"],
        )
        for item in summary["items"]
    ]


def test_pending_workloads_are_read_through_the_api_servers_aggregation_layer(
    kueue: Kueue, visibility_controller: LocalController, kube_namespace: str
) -> None:
    ns = kube_namespace
    cq = _queue_of_three(kueue, ns)
    expected = [("high", 100, 0, 0), ("low", 0, 1, 1)]

    # Each read is the live queue: between two reads a scheduling pass may try a workload
    # again and the order may move for a moment (a tried one waits behind one not tried
    # yet). So every view is read until it shows the settled order.
    def settled(path: str, want: list[tuple[str, int, int, int]]) -> dict[str, Any]:
        def read() -> dict[str, Any] | None:
            answer = _raw(kueue.cluster, path)
            return answer if _pending(answer) == want else None

        found: dict[str, Any] = wait(read, 30, f"{path} to list {want}")
        return found

    def listed() -> dict[str, Any] | None:
        summary = _raw(kueue.cluster, f"{VISIBILITY}/v1beta2/clusterqueues/{cq}/pendingworkloads")
        return summary if len(summary["items"]) == 2 else None

    wait(listed, 30, "both pending Workloads in the summary")
    summary = settled(f"{VISIBILITY}/v1beta2/clusterqueues/{cq}/pendingworkloads", expected)
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert summary["items"][0]["localQueueName"] == "team"
    assert summary["items"][0]["metadata"]["namespace"] == ns

    old = settled(f"{VISIBILITY}/v1beta1/clusterqueues/{cq}/pendingworkloads", expected)
    assert old["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    settled(f"{VISIBILITY}/v1beta2/namespaces/{ns}/localqueues/team/pendingworkloads", expected)
    settled(f"{VISIBILITY}/v1beta2/clusterqueues/{cq}/pendingworkloads?offset=1&limit=1", expected[1:])

    # Discovery, as kubectl reads it: both versions, v1beta2 preferred, the subresources listed.
    versions = kueue.cluster.kubectl("api-versions").split()
    assert {"visibility.kueue.x-k8s.io/v1beta2", "visibility.kueue.x-k8s.io/v1beta1"} <= set(versions)
    assert _raw(kueue.cluster, VISIBILITY)["preferredVersion"]["version"] == "v1beta2"
    listed_resources = _raw(kueue.cluster, f"{VISIBILITY}/v1beta2")["resources"]
    assert {"clusterqueues/pendingworkloads", "localqueues/pendingworkloads"} <= {
        r["name"] for r in listed_resources
    }

    with pytest.raises(ControlPlaneError) as missing:
        kueue.cluster.kubectl(
            "get", "--raw", f"{VISIBILITY}/v1beta2/clusterqueues/{ns}-nope/pendingworkloads"
        )
    assert "NotFound" in str(missing.value) or "not found" in str(missing.value)


def test_the_api_servers_authorization_decides_who_reads_which_queue(
    kueue: Kueue, visibility_controller: LocalController, kube_namespace: str
) -> None:
    ns = kube_namespace
    cq = _queue_of_three(kueue, ns)
    tenant = f"tenant-{ns}"
    local_path = f"{VISIBILITY}/v1beta2/namespaces/{ns}/localqueues/team/pendingworkloads"
    cluster_path = f"{VISIBILITY}/v1beta2/clusterqueues/{cq}/pendingworkloads"

    with pytest.raises(ControlPlaneError) as refused:
        kueue.cluster.kubectl("get", "--raw", local_path, f"--as={tenant}")
    assert "Forbidden" in str(refused.value) or "forbidden" in str(refused.value)

    # Upstream's batch-user role (which our manifests ship) lets a tenant read its LocalQueues.
    kueue.cluster.kubectl(
        "create",
        "rolebinding",
        "tenant-batch",
        "--clusterrole=kueue-batch-user-role",
        f"--user={tenant}",
        "-n",
        ns,
    )

    def read() -> dict[str, Any] | None:
        try:
            return _raw(kueue.cluster, local_path, f"--as={tenant}")
        except ControlPlaneError:
            return None  # until the API server's RBAC cache has the new binding

    summary = wait(read, 15, "the tenant's read to be allowed")
    assert {item["metadata"]["name"] for item in summary["items"]} <= {"low", "high"}
    with pytest.raises(ControlPlaneError) as cluster_wide:
        kueue.cluster.kubectl("get", "--raw", cluster_path, f"--as={tenant}")
    assert "forbidden" in str(cluster_wide.value).lower()


def _direct(controller: LocalController, path: str, cert: tuple[Path, Path] | None, user: str) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*cert)
    request = urllib.request.Request(
        f"https://{controller.address}:{controller.port}{path}",
        headers={"X-Remote-User": user, "X-Remote-Group": "system:masters"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_only_the_front_proxy_is_believed_about_who_asks(
    kueue: Kueue, visibility_controller: LocalController, kube_namespace: str, kwok_cluster: KubeCluster
) -> None:
    ns = kube_namespace
    cq = _queue_of_three(kueue, ns)
    path = f"{VISIBILITY}/v1beta2/clusterqueues/{cq}/pendingworkloads"
    assert kwok_cluster.creds is not None
    creds = kwok_cluster.creds
    # No certificate: the headers are anyone's.
    assert _direct(visibility_controller, path, None, "system:admin") == 401
    # A certificate from the same CA but not the allowed proxy name (an ordinary client's).
    assert _direct(visibility_controller, path, (creds.admin_cert, creds.admin_key), "system:admin") == 401
    # The API server's own proxy certificate: believed, then authorized (system:masters).
    front_proxy = (creds.front_proxy_cert, creds.front_proxy_key)
    assert _direct(visibility_controller, path, front_proxy, "system:admin") == 200


# Publishing goes to the APIServices alone here: the webhook configurations named do not exist.
ONLY_API_SERVICES = certs.CertConfig(
    mutating_webhook="none-such", validating_webhook="none-such", crd_names=()
)


def test_a_rotated_ca_reaches_the_api_services(
    visibility_controller: LocalController, kwok_cluster: KubeCluster
) -> None:
    path = "/apis/apiregistration.k8s.io/v1/apiservices/v1beta2.visibility.kueue.x-k8s.io"
    current = base64.b64decode(kwok_cluster.get(path)["spec"]["caBundle"])
    rotated = current + current  # what a rotation publishes: a bundle that differs

    async def publish(bundle: bytes) -> list[str]:
        store = kubernetes.KubernetesStore(kubernetes.load_kubeconfig(kwok_cluster.kubeconfig))
        try:
            return await certs.publish(store, ONLY_API_SERVICES, bundle)
        finally:
            await store.close()

    changed = asyncio.run(publish(rotated))
    assert {f"APIService/{v}.visibility.kueue.x-k8s.io" for v in ("v1beta2", "v1beta1")} <= set(changed)
    assert base64.b64decode(kwok_cluster.get(path)["spec"]["caBundle"]) == rotated
    asyncio.run(publish(current))
    assert base64.b64decode(kwok_cluster.get(path)["spec"]["caBundle"]) == current
