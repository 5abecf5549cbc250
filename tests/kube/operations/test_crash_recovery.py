"""Crash safety on the real control plane: kill -9 of the controller mid-admission, the API server restarted.

The store is the only truth (docs/kubernetes.md): a restarted controller lists everything
and rebuilds the engine from the Workloads' status, so it can neither admit a workload twice
nor leak quota. These tests check that from the outside, sampling the objects while it runs.
"""

from __future__ import annotations

import time
from typing import Any

from ..conftest import NodeFactory
from ..controller.conftest import KUEUE, Kueue, is_true, job_manifest, wait
from ..controller.test_job_integration import _cluster_queue, _flavor, _local_queue
from ..controlplane import KubeCluster, Process
from .conftest import Controllers
from .test_metrics_and_visibility import workload

QUOTA = 4
JOBS = 16


def _owned(workloads: list[dict[str, Any]], job: dict[str, Any]) -> list[dict[str, Any]]:
    uid = job["metadata"]["uid"]
    return [
        w for w in workloads if any(r.get("uid") == uid for r in w["metadata"].get("ownerReferences", []))
    ]


def _cpu(w: dict[str, Any]) -> int:
    return sum(int(ps.get("count", 1)) for ps in w["spec"]["podSets"])  # 1 CPU a pod here


def _check(cluster: KubeCluster, ns: str) -> tuple[int, int]:
    """Invariants at one instant; (admitted and unfinished CPUs, completed jobs)."""
    jobs = cluster.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
    workloads = cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
    for job in jobs:
        owned = _owned(workloads, job)
        assert len(owned) <= 1, f"job {job['metadata']['name']} has {len(owned)} workloads"
        running = job["spec"].get("suspend") is False and not is_true(job, "Complete")
        if running:
            assert owned, f"job {job['metadata']['name']} runs without a Workload"
            status = owned[0].get("status") or {}
            assert status.get("admission") or is_true(owned[0], "Finished"), (
                f"job {job['metadata']['name']} runs but its Workload is not admitted"
            )
    held = sum(
        _cpu(w) for w in workloads if (w.get("status") or {}).get("admission") and not is_true(w, "Finished")
    )
    assert held <= QUOTA, f"{held} CPUs admitted with a quota of {QUOTA}"
    return held, sum(1 for job in jobs if is_true(job, "Complete"))


def test_kill_9_mid_admission_and_restart_admits_nothing_twice_and_leaks_nothing(
    kwok_cluster: KubeCluster,
    kueue: Kueue,
    controllers: Controllers,
    fake_nodes: NodeFactory,
    kube_namespace: str,
) -> None:
    ns, cq = kube_namespace, f"{kube_namespace}-cq"
    fake_nodes(2)
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(cq, f"{ns}-flavor", str(QUOTA)))
    kueue.apply(_local_queue(ns, "queue", cq))
    for i in range(JOBS):
        kueue.create_job(ns, job_manifest(f"job-{i}", "queue", run_duration="2s"))
    first = controllers.start()

    def some_admitted() -> bool:
        workloads = kwok_cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
        return any((w.get("status") or {}).get("admission") for w in workloads)

    wait(some_admitted, 60, "the first admissions", interval=0.05)
    first.kill()
    _check(kwok_cluster, ns)
    second = controllers.start()
    deadline = time.monotonic() + 180
    completed = 0
    while completed < JOBS:
        assert time.monotonic() < deadline, f"only {completed} of {JOBS} jobs completed"
        assert second.process.poll() is None, second.log()
        _, completed = _check(kwok_cluster, ns)
        time.sleep(0.3)

    def quota_back() -> dict[str, Any] | None:
        status = kueue.cluster_queue(cq).get("status") or {}
        reserved = {
            r["name"]: r["total"] for f in status.get("flavorsReservation", []) for r in f["resources"]
        }
        done = status.get("reservingWorkloads") == 0 and status.get("pendingWorkloads") == 0
        return status if done and reserved.get("cpu") == "0" else None

    wait(quota_back, 30, "every CPU back in the ClusterQueue")
    workloads = kwok_cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
    jobs = kwok_cluster.get(f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
    for job in jobs:
        assert len(_owned(workloads, job)) == 1
        wait(lambda job=job: is_true(kueue.workload_of(job), "Finished"), 30, "Workload Finished")
        pods = kueue.pods_of(ns, job["metadata"]["name"])
        assert len(pods) == 1, f"job {job['metadata']['name']} ran {len(pods)} pods"  # started once
    assert second.stop() == 0


def restart_apiserver(cluster: KubeCluster, down_seconds: float) -> None:
    """Stop kube-apiserver, wait, start it again with the same flags and port (etcd keeps the data)."""
    old = cluster.processes["kube-apiserver"]
    old.stop()
    time.sleep(down_seconds)
    cluster.processes["kube-apiserver"] = Process(old.name, old.argv, old.log_path).start()

    def ready() -> bool:
        try:
            return cluster._readyz()
        except OSError:  # connection refused while it starts
            return False

    wait(ready, 120, "kube-apiserver /readyz after the restart", interval=0.5)


def _finish(cluster: KubeCluster, ns: str, name: str) -> None:
    path = f"{KUEUE}/namespaces/{ns}/workloads/{name}"
    obj = cluster.get(path)
    obj["status"].setdefault("conditions", []).append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "done",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    cluster.request("PUT", f"{path}/status", obj)


def test_the_controller_reconnects_after_an_api_server_restart_and_converges(
    kwok_cluster: KubeCluster, kueue: Kueue, controllers: Controllers, kube_namespace: str
) -> None:
    ns, cq = kube_namespace, f"{kube_namespace}-cq"
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(cq, f"{ns}-flavor", "2"))
    kueue.apply(_local_queue(ns, "queue", cq))
    for name in ("a", "b"):
        kwok_cluster.create(f"{KUEUE}/namespaces/{ns}/workloads", workload(ns, name))
    controller = controllers.start()
    controller.wait_running()

    def admitted(names: set[str]) -> bool:
        items = kwok_cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
        holding = {
            w["metadata"]["name"] for w in items if is_true(w, "Admitted") and not is_true(w, "Finished")
        }
        return holding == names

    wait(lambda: admitted({"a", "b"}), 30, "a and b admitted")
    restart_apiserver(kwok_cluster, down_seconds=5)
    assert controller.process.poll() is None, controller.log()
    # New work after the restart: the watches resumed (or re-listed) and the passes go on.
    for name in ("c", "d"):
        kwok_cluster.create(f"{KUEUE}/namespaces/{ns}/workloads", workload(ns, name))
    for name in ("a", "b"):
        _finish(kwok_cluster, ns, name)
    wait(lambda: admitted({"c", "d"}), 60, "c and d admitted after the restart")

    def converged() -> bool:
        status = kueue.cluster_queue(cq).get("status") or {}
        return status.get("reservingWorkloads") == 2 and status.get("pendingWorkloads") == 0

    wait(converged, 30, "ClusterQueue status after the restart")
    assert controller.http("/healthz")[0] == 200
    for name in ("a", "b", "c", "d"):
        kwok_cluster.delete(f"{KUEUE}/namespaces/{ns}/workloads/{name}")
    assert controller.stop() == 0
