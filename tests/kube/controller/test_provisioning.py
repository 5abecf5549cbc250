"""The ProvisioningRequest admission check on the real control plane, the test playing the autoscaler.

Our minimal ProvisioningRequest CRD (tests/kube/data) is installed before the
controller starts, as the cluster autoscaler's would be. A Job queued to a
ClusterQueue whose AdmissionCheck names `kueue.x-k8s.io/provisioning-request`
gets its quota reserved, then waits (suspended, QuotaReserved=True, Admitted=False)
while a ProvisioningRequest and its PodTemplate ask for capacity. The test writes
the autoscaler's answer into the request's status and watches the check follow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..controlplane import ApiError, KubeCluster
from .conftest import ControllerThread, Kueue, condition, is_true, job_manifest, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue

CRD = Path(__file__).resolve().parent.parent / "data" / "provisioningrequest-crd.yaml"
PROVREQ = "/apis/autoscaling.x-k8s.io/v1"
CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS = "autoscaling.x-k8s.io/provisioning-class-name"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"


@pytest.fixture(scope="module")
def provreq_crd(kwok_cluster: KubeCluster, kueue_crds: list[str]) -> Iterator[None]:
    kwok_cluster.kubectl("apply", "--server-side", "-f", str(CRD))
    kwok_cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "crd/provisioningrequests.autoscaling.x-k8s.io",
        "--timeout=30s",
    )
    wait(
        lambda: (
            "provisioningrequests"
            in kwok_cluster.kubectl("api-resources", "--api-group=autoscaling.x-k8s.io")
        ),
        30,
        "discovery of provisioningrequests",
    )
    try:
        yield
    finally:
        kwok_cluster.kubectl("delete", "-f", str(CRD), "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture
def prov_controller(kwok_cluster: KubeCluster, provreq_crd: None) -> Iterator[ControllerThread]:
    thread = ControllerThread(str(kwok_cluster.kubeconfig)).start()
    try:
        yield thread
    finally:
        thread.stop()


def _setup(kueue: Kueue, ns: str, config_spec: dict[str, Any]) -> str:
    """Flavor, config, check, ClusterQueue naming the check, LocalQueue ``queue``; the check's name."""
    check = f"{ns}-prov"
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ProvisioningRequestConfig",
            "metadata": {"name": f"{ns}-prc"},
            "spec": config_spec,
        }
    )
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {
                "controllerName": CONTROLLER_NAME,
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": f"{ns}-prc",
                },
            },
        }
    )
    kueue.apply(
        _cluster_queue(
            f"{ns}-cq", f"{ns}-flavor", "4", admissionChecksStrategy={"admissionChecks": [{"name": check}]}
        )
    )
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    active = wait(
        lambda: is_true(kueue.cluster.get(f"/apis/kueue.x-k8s.io/v1beta2/admissionchecks/{check}"), "Active"),
        30,
        "the AdmissionCheck Active",
    )
    assert active
    return check


def _requests(kueue: Kueue, ns: str) -> dict[str, dict[str, Any]]:
    items = kueue.cluster.get(f"{PROVREQ}/namespaces/{ns}/provisioningrequests")["items"]
    return {item["metadata"]["name"]: item for item in items}


def _answer(kueue: Kueue, ns: str, name: str, conditions: dict[str, str], message: str = "") -> None:
    """Write the autoscaler's conditions into a request's status."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    body = {
        "status": {
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "reason": kind,
                    "message": message or f"{kind} by the test",
                    "lastTransitionTime": now,
                }
                for kind, status in conditions.items()
            ]
        }
    }
    kueue.cluster.request(
        "PATCH",
        f"{PROVREQ}/namespaces/{ns}/provisioningrequests/{name}/status",
        body,
        content_type="application/merge-patch+json",
    )


def _check(workload: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    for entry in ((workload or {}).get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == name:
            return dict(entry)
    return None


def test_a_job_is_admitted_once_its_provisioning_request_is_provisioned(
    kueue: Kueue, prov_controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    check = _setup(
        kueue, ns, {"provisioningClassName": CHECK_CAPACITY, "parameters": {"ValidUntilSeconds": "60"}}
    )
    job = job_manifest("train", "queue", parallelism=2, annotations={"provreq.kueue.x-k8s.io/Team": "ml"})
    created = kueue.create_job(ns, job)

    workload = wait(lambda: kueue.workload_of(created), 30, "the workload")
    name = f"{workload['metadata']['name']}-{check}-1"
    request = wait(lambda: _requests(kueue, ns).get(name), 30, f"ProvisioningRequest {name}")
    assert request["spec"]["provisioningClassName"] == CHECK_CAPACITY
    assert request["spec"]["parameters"] == {"ValidUntilSeconds": "60", "Team": "ml"}
    assert request["spec"]["podSets"] == [{"podTemplateRef": {"name": f"ppt-{name}-main"}, "count": 2}]
    owner = request["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == (
        "Workload",
        workload["metadata"]["name"],
        True,
    )

    template = kueue.cluster.get(f"/api/v1/namespaces/{ns}/podtemplates/ppt-{name}-main")
    containers = template["template"]["spec"]["containers"]
    assert containers[0]["resources"]["requests"]["cpu"] == "1"
    wait(
        lambda: any(
            r["kind"] == "ProvisioningRequest" and r.get("controller")
            for r in kueue.cluster.get(f"/api/v1/namespaces/{ns}/podtemplates/ppt-{name}-main")["metadata"][
                "ownerReferences"
            ]
        ),
        30,
        "the PodTemplate handed over to its request",
    )

    # Quota held, waiting for the check: the job stays suspended.
    held = kueue.workload_of(created)
    assert is_true(held, "QuotaReserved") and not is_true(held, "Admitted")
    assert (_check(held, check) or {}).get("state") == "Pending"
    assert kueue.job(ns, "train")["spec"]["suspend"] is True

    # The autoscaler accepts, then reports progress: the message shows on the check.
    _answer(kueue, ns, name, {"Accepted": "True", "Provisioned": "False"}, "Provisioning, ETA 5 minutes")
    wait(
        lambda: (
            (_check(kueue.workload_of(created), check) or {}).get("message") == "Provisioning, ETA 5 minutes"
        ),
        30,
        "the autoscaler's progress on the check",
    )
    assert kueue.job(ns, "train")["spec"]["suspend"] is True

    _answer(kueue, ns, name, {"Accepted": "True", "Provisioned": "True"}, "Capacity is ready")
    admitted = wait(
        lambda: (w := kueue.workload_of(created)) and is_true(w, "Admitted") and w,
        30,
        "the workload admitted",
    )
    state = _check(admitted, check)
    assert state is not None and state["state"] == "Ready"
    assert state["podSetUpdates"] == [{"name": "main", "annotations": {CONSUME: name, CLASS: CHECK_CAPACITY}}]

    started = wait(
        lambda: (j := kueue.job(ns, "train"))["spec"].get("suspend") is False and j, 30, "the job started"
    )
    annotations = started["spec"]["template"]["metadata"]["annotations"]
    assert annotations[CONSUME] == name
    assert annotations[CLASS] == CHECK_CAPACITY


def test_a_failed_request_is_retried_then_the_workload_is_deactivated(
    kueue: Kueue, prov_controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    check = _setup(
        kueue,
        ns,
        {
            "provisioningClassName": CHECK_CAPACITY,
            "retryStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 1, "backoffMaxSeconds": 2},
        },
    )
    created = kueue.create_job(ns, job_manifest("flaky", "queue"))
    workload = wait(lambda: kueue.workload_of(created), 30, "the workload")
    first = f"{workload['metadata']['name']}-{check}-1"
    second = f"{workload['metadata']['name']}-{check}-2"
    wait(lambda: first in _requests(kueue, ns), 30, "the first attempt")

    _answer(kueue, ns, first, {"Failed": "True"}, "out of stock")
    # Retry: the reservation is released and the workload requeued; the old attempt goes.
    evicted = wait(
        lambda: (
            (w := kueue.workload_of(created))
            and (condition(w, "Evicted") or {}).get("status") == "True"
            and w
        ),
        30,
        "the workload evicted by the Retry",
    )
    assert condition(evicted, "Evicted")["reason"] == "AdmissionCheck"
    wait(lambda: second in _requests(kueue, ns), 60, "the second attempt")
    wait(lambda: first not in _requests(kueue, ns), 30, "the failed attempt deleted")
    again = kueue.workload_of(created)
    assert is_true(again, "QuotaReserved") and not is_true(again, "Admitted")
    assert (_check(again, check) or {}).get("retryCount") == 1
    assert kueue.job(ns, "flaky")["spec"]["suspend"] is True

    # The second attempt fails too: past backoffLimitCount (1) the check is Rejected.
    _answer(kueue, ns, second, {"Failed": "True"}, "still out of stock")
    final = wait(
        lambda: (w := kueue.workload_of(created)) and w["spec"].get("active") is False and w,
        30,
        "the workload deactivated",
    )
    wait(
        lambda: (
            "AdmissionCheck" in str((condition(kueue.workload_of(created), "Evicted") or {}).get("reason"))
        ),
        30,
        "the deactivation explained",
    )
    assert final["metadata"]["name"] == workload["metadata"]["name"]
    assert kueue.job(ns, "flaky")["spec"]["suspend"] is True
    wait(lambda: not _requests(kueue, ns), 30, "the requests cleaned up after the eviction")


def test_a_job_without_managed_resources_needs_no_request(
    kueue: Kueue, prov_controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    check = _setup(
        kueue, ns, {"provisioningClassName": CHECK_CAPACITY, "managedResources": ["example.com/gpu"]}
    )
    created = kueue.create_job(ns, job_manifest("cpu-only", "queue"))
    admitted = wait(
        lambda: (w := kueue.workload_of(created)) and is_true(w, "Admitted") and w,
        30,
        "the workload admitted",
    )
    state = _check(admitted, check)
    assert state is not None and state["state"] == "Ready"
    assert state["message"] == "the provisioning request is not needed"
    assert not _requests(kueue, ns)
    wait(lambda: kueue.job(ns, "cpu-only")["spec"].get("suspend") is False, 30, "the job started")


def test_a_check_whose_config_is_missing_is_not_active(
    kueue: Kueue, prov_controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": f"{ns}-orphan"},
            "spec": {
                "controllerName": CONTROLLER_NAME,
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "none",
                },
            },
        }
    )

    def inactive() -> dict[str, Any] | None:
        try:
            obj = kueue.cluster.get(f"/apis/kueue.x-k8s.io/v1beta2/admissionchecks/{ns}-orphan")
        except ApiError:
            return None
        cond = condition(obj, "Active")
        return cond if cond and cond["status"] == "False" else None

    cond = wait(inactive, 30, "Active=False on the check")
    assert cond["reason"] == "BadParametersRef"
