"""The controller with nothing but the least-privilege RBAC of `pykueue manifests`.

The controller runs on a ServiceAccount token bound to `pykueue.kube.deploy.rbac`,
not as cluster admin, through a preemption round trip (Workloads created, status
written, a Job suspended, restored and resumed) and a Job deletion, so a verb missing
from the ClusterRole fails here rather than in a user's cluster.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest

from pykueue.kube import deploy
from pykueue.store import kubernetes

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from .conftest import ControllerThread, Kueue, is_true, job_manifest, wait
from .test_job_integration import _admitted, _cluster_queue, _flavor, _local_queue, _running


@pytest.fixture
def service_account_controller(
    kwok_cluster: KubeCluster, kueue_crds: list[str]
) -> Iterator[ControllerThread]:
    system = f"pykueue-system-{secrets.token_hex(3)}"
    kwok_cluster.create_namespace(system)
    docs = deploy.rbac(deploy.DeployConfig(namespace=system))
    names = []
    for doc in docs:
        kwok_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(doc))
        names.append((doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace", "")))
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    token = kwok_cluster.create(
        f"/api/v1/namespaces/{system}/serviceaccounts/{deploy.SERVICE_ACCOUNT}/token", request
    )["status"]["token"]
    assert kwok_cluster.creds is not None
    config = kubernetes.KubeConfig(
        server=kwok_cluster.server, ca_file=str(kwok_cluster.creds.ca_cert), token=token
    )
    thread = ControllerThread(config).start()
    try:
        yield thread
    finally:
        thread.stop()
        for kind, name, namespace in names:
            if not namespace:
                kwok_cluster.kubectl("delete", kind.lower(), name, "--ignore-not-found", check=False)
        kwok_cluster.delete(f"/api/v1/namespaces/{system}")


def test_the_manifests_rbac_is_enough_for_preemption_and_cleanup(
    kueue: Kueue, service_account_controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    ns = kube_namespace
    fake_nodes(2, labels={"pool": ns})
    kueue.apply(_flavor(f"{ns}-flavor", {"pool": ns}))
    kueue.apply(_cluster_queue(f"{ns}-a", f"{ns}-flavor", "2", cohort=f"{ns}-cohort"))
    kueue.apply(
        _cluster_queue(
            f"{ns}-b", f"{ns}-flavor", "4", cohort=f"{ns}-cohort", preemption={"reclaimWithinCohort": "Any"}
        )
    )
    kueue.apply(_local_queue(ns, "queue-a", f"{ns}-a"))
    kueue.apply(_local_queue(ns, "queue-b", f"{ns}-b"))
    borrower = kueue.create_job(ns, job_manifest("borrower", "queue-a", parallelism=5, run_duration="30s"))
    wait(lambda: _admitted(kueue, borrower) and _running(kueue, ns, "borrower"), 30, "the borrower running")
    assert kueue.job(ns, "borrower")["spec"]["template"]["spec"]["nodeSelector"] == {"pool": ns}

    owner = kueue.create_job(ns, job_manifest("owner", "queue-b", parallelism=3, run_duration="1s"))
    wait(lambda: _admitted(kueue, owner), 30, "the owner admitted")
    wait(
        lambda: (
            (j := kueue.job(ns, "borrower"))["spec"].get("suspend") is True
            and "nodeSelector" not in j["spec"]["template"]["spec"]
        ),
        30,
        "the borrower suspended and its template restored",
    )
    wait(lambda: is_true(kueue.workload_of(owner), "Finished"), 60, "the owner finished")
    wait(lambda: _admitted(kueue, borrower) and _running(kueue, ns, "borrower"), 60, "the borrower resumed")
    status = wait(
        lambda: (s := kueue.cluster_queue(f"{ns}-a").get("status")) and s.get("admittedWorkloads") == 1 and s,
        30,
        "queue status written",
    )
    assert status["pendingWorkloads"] == 0

    kueue.cluster.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/borrower")
    wait(lambda: kueue.workload_of(borrower) is None, 30, "the deleted Job's Workload to go")
