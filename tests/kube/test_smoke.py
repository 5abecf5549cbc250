"""Smoke tests of the real control plane the kube fixtures start (see docs/testing.md)."""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import NodeFactory
from .controlplane import ApiError, KubeCluster, Process, conditions_of, wait_for

pytestmark = pytest.mark.kube


def _job(name: str, *, completions: int, node_selector: dict[str, str], **pod_extra: Any) -> dict[str, Any]:
    annotations = pod_extra.pop("annotations", {})
    resources = pod_extra.pop("resources", {"requests": {"cpu": "1", "memory": "1Gi"}})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "backoffLimit": pod_extra.pop("backoff_limit", 6),
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": node_selector,
                    "containers": [
                        {"name": "main", "image": "registry.invalid/sleep:1", "resources": resources}
                    ],
                    **pod_extra,
                },
            },
        },
    }


def _job_condition(job: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in conditions_of(job))


def _pods_of(cluster: KubeCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    pods = cluster.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{job}")
    return list(pods["items"])


def test_apiserver_authenticates_and_authorizes(kube_apiserver: KubeCluster) -> None:
    version = kube_apiserver.get("/version")
    assert version["major"] == "1"
    assert version["gitVersion"].startswith(f"v1.{version['minor']}.")

    # kubectl authenticates with the kubeconfig's client certificate ...
    review = json.loads(kube_apiserver.kubectl("auth", "whoami", "-o", "json"))
    assert review["status"]["userInfo"]["username"] == "pykueue-admin"
    assert "system:masters" in review["status"]["userInfo"]["groups"]
    # ... the HTTP helper with the bearer token; anonymous requests are not authorized.
    assert kube_apiserver.request("GET", "/readyz", raw=True) == "ok"
    assert kube_apiserver.creds is not None
    ca_cert = kube_apiserver.creds.ca_cert
    anonymous = urllib.request.Request(f"{kube_apiserver.server}/api/v1/namespaces")
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(anonymous, context=ssl.create_default_context(cafile=str(ca_cert)), timeout=10)
    assert denied.value.code in (401, 403)
    bogus = urllib.request.Request(
        f"{kube_apiserver.server}/api/v1/namespaces", headers={"Authorization": "Bearer not-a-token"}
    )
    with pytest.raises(urllib.error.HTTPError) as unauthenticated:
        urllib.request.urlopen(bogus, context=ssl.create_default_context(cafile=str(ca_cert)), timeout=10)
    assert unauthenticated.value.code == 401


def test_service_account_tokens_are_issued_and_rbac_applies(
    kube_apiserver: KubeCluster, kube_namespace: str
) -> None:
    kube_apiserver.kubectl("create", "serviceaccount", "reader", "-n", kube_namespace)
    token = kube_apiserver.kubectl("create", "token", "reader", "-n", kube_namespace).strip()
    assert kube_apiserver.creds is not None
    context = ssl.create_default_context(cafile=str(kube_apiserver.creds.ca_cert))

    def status_of(path: str) -> int:
        req = urllib.request.Request(
            kube_apiserver.server + path, headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with urllib.request.urlopen(req, context=context, timeout=10) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    pods = f"/api/v1/namespaces/{kube_namespace}/pods"
    assert status_of(pods) == 403  # authenticated as the ServiceAccount, but no role yet
    kube_apiserver.kubectl(
        "create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", kube_namespace
    )
    kube_apiserver.kubectl(
        "create", "rolebinding", "reader", "--role=pod-reader",
        f"--serviceaccount={kube_namespace}:reader", "-n", kube_namespace,
    )  # fmt: skip
    wait_for(lambda: status_of(pods) == 200, timeout=30, what="the RoleBinding to take effect")
    assert status_of("/api/v1/namespaces") == 403  # still nothing cluster-wide


def test_namespace_create_read_delete(kube_apiserver: KubeCluster) -> None:
    kube_apiserver.kubectl("create", "namespace", "smoke-ns", "--dry-run=server")
    assert kube_apiserver.get_or_none("/api/v1/namespaces/smoke-ns") is None  # dry run stored nothing
    kube_apiserver.kubectl("create", "namespace", "smoke-ns")
    ns = kube_apiserver.get("/api/v1/namespaces/smoke-ns")
    assert ns["status"]["phase"] == "Active"
    with pytest.raises(ApiError) as conflict:
        kube_apiserver.create("/api/v1/namespaces", {"metadata": {"name": "smoke-ns"}})
    assert conflict.value.status == 409
    kube_apiserver.delete("/api/v1/namespaces/smoke-ns")


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.smoke.pykueue.test
spec:
  group: smoke.pykueue.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              colour: {type: string, default: blue}
          status:
            type: object
            properties:
              ready: {type: boolean}
"""


def test_crd_is_installed_and_served(kube_apiserver: KubeCluster, kube_namespace: str) -> None:
    kube_apiserver.kubectl("apply", "-f", "-", input=CRD)
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.smoke.pykueue.test"
    wait_for(
        lambda: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in conditions_of(kube_apiserver.get(crd_path))
        ),
        timeout=60,
        what="the Widget CRD to be Established",
    )
    base = f"/apis/smoke.pykueue.test/v1/namespaces/{kube_namespace}/widgets"
    # Discovery can lag the Established condition by a moment.
    wait_for(lambda: kube_apiserver.get_or_none(base) is not None, timeout=30, what="the widgets resource")

    created = kube_apiserver.create(
        base,
        {
            "apiVersion": "smoke.pykueue.test/v1",
            "kind": "Widget",
            "metadata": {"name": "w1"},
            "spec": {"size": 3},
        },
    )
    assert created["spec"] == {"size": 3, "colour": "blue"}  # structural-schema default applied

    # Status is a subresource: writing it through the main resource is ignored, /status stores it.
    created["status"] = {"ready": True}
    kube_apiserver.request("PUT", f"{base}/w1", created)
    assert "status" not in kube_apiserver.get(f"{base}/w1")
    current = kube_apiserver.get(f"{base}/w1")
    current["status"] = {"ready": True}
    kube_apiserver.request("PUT", f"{base}/w1/status", current)

    read_back = json.loads(
        kube_apiserver.kubectl("get", "widgets.smoke.pykueue.test", "w1", "-n", kube_namespace, "-o", "json")
    )
    assert read_back["spec"] == {"size": 3, "colour": "blue"}
    assert read_back["status"] == {"ready": True}

    with pytest.raises(ApiError) as invalid:
        kube_apiserver.create(
            base,
            {
                "apiVersion": "smoke.pykueue.test/v1",
                "kind": "Widget",
                "metadata": {"name": "w2"},
                "spec": {"size": 0},
            },
        )
    assert invalid.value.status == 422
    names = [w["metadata"]["name"] for w in kube_apiserver.get(base)["items"]]
    assert names == ["w1"]
    kube_apiserver.kubectl("delete", "-f", "-", "--wait=false", input=CRD)


def test_fake_nodes_carry_labels_taints_and_capacity(fake_nodes: NodeFactory) -> None:
    nodes = fake_nodes(
        2,
        labels={"pool": "smoke", "topology.kubernetes.io/zone": "z1"},
        taints=["dedicated=smoke:NoSchedule"],
        capacity={"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"},
    )
    assert len(nodes) == 2
    for node in nodes:
        assert node["metadata"]["labels"]["pool"] == "smoke"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z1"
        assert {"key": "dedicated", "value": "smoke", "effect": "NoSchedule"} in node["spec"]["taints"]
        for resources in (node["status"]["capacity"], node["status"]["allocatable"]):
            assert resources["cpu"] == "16"
            assert resources["memory"] == "64Gi"
            assert resources["nvidia.com/gpu"] == "4"
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-")


def test_job_pods_are_scheduled_run_and_complete(
    kwok_cluster: KubeCluster, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    pool = {"pool": "jobs"}
    good = {n["metadata"]["name"] for n in fake_nodes(2, labels=pool, capacity={"cpu": "2"})}
    # Same label, but tainted: the scheduler must keep the Job's pods (no toleration) off it.
    tainted = {
        n["metadata"]["name"] for n in fake_nodes(1, labels=pool, taints=["dedicated=other:NoSchedule"])
    }

    job = _job("sleepy", completions=4, node_selector=pool, annotations={"pykueue.test/run-duration": "3s"})
    kwok_cluster.create(f"/apis/batch/v1/namespaces/{kube_namespace}/jobs", job)

    phases_seen: dict[str, set[str]] = {}

    def completed() -> dict[str, Any] | None:
        for pod in _pods_of(kwok_cluster, kube_namespace, "sleepy"):
            phases_seen.setdefault(pod["metadata"]["name"], set()).add(pod["status"].get("phase", ""))
        current = kwok_cluster.get(f"/apis/batch/v1/namespaces/{kube_namespace}/jobs/sleepy")
        assert not _job_condition(current, "Failed"), current["status"]
        return current if _job_condition(current, "Complete") else None

    done = wait_for(completed, timeout=180, interval=0.25, what="Job sleepy to complete")
    assert done["status"]["succeeded"] == 4
    assert done["status"].get("failed", 0) == 0

    pods = _pods_of(kwok_cluster, kube_namespace, "sleepy")
    assert len(pods) == 4
    for pod in pods:
        assert pod["spec"]["nodeName"] in good
        assert pod["spec"]["nodeName"] not in tainted
        assert pod["status"]["phase"] == "Succeeded"
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["exitCode"] == 0
    # Two 2-cpu nodes, 1-cpu pods: all four fit at once, so both nodes got pods.
    assert {pod["spec"]["nodeName"] for pod in pods} == good
    # Pods went through Running (they stayed there 3 s) before they Succeeded.
    assert any("Running" in seen for seen in phases_seen.values()), phases_seen


def test_scheduler_respects_extended_resources(
    kwok_cluster: KubeCluster, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    pool = {"pool": "gpu"}
    (gpu_node,) = fake_nodes(1, labels=pool, capacity={"nvidia.com/gpu": "2"})
    fake_nodes(2, labels=pool)  # no GPUs
    job = _job(
        "trainer",
        completions=2,
        node_selector=pool,
        resources={"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
    )
    kwok_cluster.create(f"/apis/batch/v1/namespaces/{kube_namespace}/jobs", job)
    path = f"/apis/batch/v1/namespaces/{kube_namespace}/jobs/trainer"
    wait_for(
        lambda: _job_condition(kwok_cluster.get(path), "Complete"),
        timeout=180,
        what="Job trainer to complete",
    )
    nodes = {pod["spec"]["nodeName"] for pod in _pods_of(kwok_cluster, kube_namespace, "trainer")}
    assert nodes == {gpu_node["metadata"]["name"]}


def test_failing_pods_fail_the_job(
    kwok_cluster: KubeCluster, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    pool = {"pool": "fail"}
    fake_nodes(1, labels=pool)
    job = _job(
        "doomed",
        completions=1,
        node_selector=pool,
        backoff_limit=0,
        annotations={"pykueue.test/fail": "true"},
    )
    kwok_cluster.create(f"/apis/batch/v1/namespaces/{kube_namespace}/jobs", job)
    path = f"/apis/batch/v1/namespaces/{kube_namespace}/jobs/doomed"
    failed = wait_for(
        lambda: (lambda j: j if _job_condition(j, "Failed") else None)(kwok_cluster.get(path)),
        timeout=180,
        what="Job doomed to fail",
    )
    assert failed["status"]["failed"] == 1
    assert not _job_condition(failed, "Complete")
    reasons = {c["reason"] for c in failed["status"]["conditions"] if c["type"] == "Failed"}
    assert reasons == {"BackoffLimitExceeded"}


def test_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    # A shell that ignores SIGTERM and has a child: stop() must still leave nothing behind.
    child_pid_file = tmp_path / "child.pid"
    script = f"trap '' TERM; sleep 300 & echo $! > {child_pid_file}; wait"
    proc = Process("stubborn", ["bash", "-c", script], tmp_path / "stubborn.log").start()
    child = wait_for(
        lambda: (
            int(child_pid_file.read_text())
            if child_pid_file.exists() and child_pid_file.read_text()
            else None
        ),
        timeout=10,
        what="the stub's child to start",
    )
    os.kill(child, 0)  # alive
    start = time.monotonic()
    proc.stop(grace=1.0)
    assert time.monotonic() - start < 10
    assert not proc.running()

    def gone(pid_or_group: int, kill: Callable[[int, int], None]) -> bool:
        try:
            kill(pid_or_group, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(lambda: gone(child, os.kill), timeout=10, what="the child to be gone")
    wait_for(lambda: gone(proc.pid, os.killpg), timeout=10, what="the process group to be gone")
