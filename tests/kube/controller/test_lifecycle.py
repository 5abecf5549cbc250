"""What the controller leaves alone, what it cleans up, and the queue status it writes."""

from __future__ import annotations

from typing import Any

from pykueue.engine.config import EngineConfig, FairSharing

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from .conftest import ControllerThread, Kueue, condition, is_true, job_manifest, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue


def _passes_after(controller: ControllerThread, count: int) -> None:
    """Wait until the controller has made ``count`` more passes (each sees every event before it)."""
    start = controller.run_in_loop(lambda: controller.manager.passes if controller.manager else 0)
    wait(
        lambda: (
            controller.run_in_loop(lambda: controller.manager.passes if controller.manager else 0)
            >= start + count
        ),
        30,
        f"{count} controller passes",
    )


def test_jobs_without_a_queue_label_are_left_alone(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.create_job(ns, job_manifest("held", None, suspend=True))
    free = kueue.create_job(ns, job_manifest("free", None, suspend=False))
    wait(lambda: is_true(kueue.job(ns, "free"), "Complete"), 60, "the unqueued job to run to the end")
    _passes_after(controller, 3)
    assert kueue.job(ns, "held")["spec"]["suspend"] is True
    assert kueue.workload_of(free) is None
    assert kueue.cluster.get(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")["items"] == []


def test_queue_status_counts_reservations_and_conditions_as_upstream(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "3"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    first = kueue.create_job(ns, job_manifest("first", "queue", parallelism=2, run_duration="60s"))
    # Created in the same second, the two would be ordered by uid: let the first in before.
    wait(lambda: is_true(kueue.workload_of(first), "Admitted"), 30, "the first job admitted")
    second = kueue.create_job(ns, job_manifest("second", "queue", parallelism=2, run_duration="1s"))

    def cq_settled() -> dict[str, Any] | None:
        status = kueue.cluster_queue(f"{ns}-cq").get("status") or {}
        return (
            status if status.get("pendingWorkloads") == 1 and status.get("admittedWorkloads") == 1 else None
        )

    status = wait(cq_settled, 30, "ClusterQueue status: 1 pending, 1 admitted")
    assert status["reservingWorkloads"] == 1
    assert status["flavorsReservation"] == [
        {
            "name": f"{ns}-flavor",
            "resources": [
                {"name": "cpu", "total": "2", "borrowed": "0"},
                {"name": "memory", "total": "400Mi", "borrowed": "0"},
            ],
        }
    ]
    active = condition({"status": status}, "Active")
    assert active is not None
    assert (active["status"], active["reason"]) == ("True", "Ready")
    assert active["lastTransitionTime"]

    # Each queue's status is written at most every 2 s on its own (docs/operations.md): the
    # LocalQueue's may come a moment after the ClusterQueue's.
    def lq_settled() -> dict[str, Any] | None:
        status = kueue.local_queue(ns, "queue").get("status") or {}
        return status if status.get("admittedWorkloads") == 1 else None

    lq = wait(lq_settled, 30, "LocalQueue status: 1 admitted")
    assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (1, 1, 1)
    lq_active = condition({"status": lq}, "Active")
    assert lq_active is not None and lq_active["status"] == "True"

    pending = kueue.workload_of(second)
    reserved = condition(pending, "QuotaReserved")
    assert reserved is not None and reserved["status"] == "False"
    assert "cpu" in reserved["message"] and (
        "insufficient" in reserved["message"] or "quota" in reserved["message"]
    )

    # Deleting the running Job deletes its Workload and frees the quota for the next one.
    first_workload = kueue.workload_of(first)
    assert first_workload is not None
    kueue.cluster.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/first")
    wait(lambda: kueue.workload_of(first) is None, 30, "the deleted Job's Workload to go")
    wait(lambda: is_true(kueue.job(ns, "second"), "Complete"), 60, "the second job to run to the end")

    # A ClusterQueue naming a flavor that does not exist is inactive, and says why.
    kueue.apply(_cluster_queue(f"{ns}-broken", f"{ns}-missing", "1"))
    broken = wait(
        lambda: (
            (c := condition(kueue.cluster_queue(f"{ns}-broken"), "Active")) and c["status"] == "False" and c
        ),
        30,
        "the broken ClusterQueue inactive",
    )
    assert broken["reason"] == "FlavorNotFound", broken


def test_a_workload_created_directly_is_admitted_and_an_orphan_is_deleted(
    kueue: Kueue, controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    pod_set = {
        "name": "main",
        "count": 2,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
    }
    direct = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "direct", "namespace": ns},
        "spec": {"queueName": "queue", "podSets": [pod_set]},
    }
    kueue.apply(direct)
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
    admitted = wait(
        lambda: (w := kueue.cluster.get(f"{path}/direct")) and is_true(w, "Admitted") and w, 30, "admitted"
    )
    assert admitted["status"]["admission"]["clusterQueue"] == f"{ns}-cq"

    orphan = {
        **direct,
        "metadata": {
            "name": "orphan",
            "namespace": ns,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "gone",
                    "uid": "00000000-0000-0000-0000-000000000000",
                    "controller": True,
                }
            ],
        },
    }
    kueue.cluster.create(path, orphan)
    wait(lambda: kueue.cluster.get_or_none(f"{path}/orphan") is None, 30, "the orphan Workload deleted")
    assert kueue.cluster.get_or_none(f"{path}/direct") is not None


def test_with_fair_sharing_queues_and_cohorts_report_their_weighted_share(
    kwok_cluster: KubeCluster, kueue: Kueue, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": f"{ns}-cohort"},
            "spec": {},
        }
    )
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-a", f"{ns}-flavor", "1", cohort=f"{ns}-cohort"))
    kueue.apply(_cluster_queue(f"{ns}-b", f"{ns}-flavor", "3", cohort=f"{ns}-cohort"))
    kueue.apply(_local_queue(ns, "queue-a", f"{ns}-a"))
    config = EngineConfig(fair_sharing=FairSharing(enable=True))
    controller = ControllerThread(str(kwok_cluster.kubeconfig), config=config).start()
    try:
        job = kueue.create_job(ns, job_manifest("borrows", "queue-a", parallelism=3, run_duration="30s"))
        wait(lambda: is_true(kueue.workload_of(job), "Admitted"), 30, "admitted while borrowing")
        share = wait(
            lambda: (
                (kueue.cluster_queue(f"{ns}-a").get("status") or {})
                .get("fairSharing", {})
                .get("weightedShare")
            ),
            30,
            "a positive weighted share on the borrowing queue",
        )
        assert share > 0
        cohort = wait(
            lambda: kueue.cluster.get(f"/apis/kueue.x-k8s.io/v1beta2/cohorts/{ns}-cohort").get("status"),
            30,
            "the Cohort status",
        )
        assert "fairSharing" in cohort
        assert kueue.cluster_queue(f"{ns}-b")["status"]["fairSharing"]["weightedShare"] == 0
    finally:
        controller.stop()


def test_a_deactivated_workload_is_pending_nowhere_and_the_counts_agree_across_a_restart(
    kueue: Kueue, controller: ControllerThread, kube_namespace: str, kwok_cluster: KubeCluster
) -> None:
    # As upstream, pending counts only the Workloads a queue may admit: the LocalQueue (what a
    # tenant sees) says what its ClusterQueue says, deactivated ones in neither.
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "1"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    jobs = [kueue.create_job(ns, job_manifest(name, "queue", cpu="2")) for name in ("waits", "off")]
    wait(lambda: all(kueue.workload_of(j) for j in jobs), 30, "both Workloads")
    off = kueue.workload_of(jobs[1])
    assert off is not None
    kueue.cluster.kubectl(
        "patch",
        "workload",
        off["metadata"]["name"],
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"active":false}}',
    )

    def counts() -> tuple[int | None, int | None]:
        cq = (kueue.cluster_queue(f"{ns}-cq").get("status") or {}).get("pendingWorkloads")
        lq = (kueue.local_queue(ns, "queue").get("status") or {}).get("pendingWorkloads")
        return cq, lq

    seen: list[tuple[int | None, int | None]] = []

    def agreed() -> bool:
        seen.append(counts())
        return seen[-1] == (1, 1)

    try:
        wait(agreed, 30, "1 pending in the ClusterQueue and the LocalQueue")
    except AssertionError:
        raise AssertionError(f"(ClusterQueue, LocalQueue) pendingWorkloads: {seen[-1]}, not (1, 1)") from None
    controller.stop()
    again = ControllerThread(str(kwok_cluster.kubeconfig)).start()
    try:
        _passes_after(again, 3)
        # the restarted controller rewrites both queues' status from what it read (the second
        # Workload it finds deactivated): the same counts
        assert counts() == (1, 1)
        assert (
            kueue.cluster.get(
                f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{off['metadata']['name']}"
            )["spec"]["active"]
            is False
        )
    finally:
        again.stop()
