"""Feature gate AssignQueueLabelsForPods (on by default, as upstream): an admitted job's pod
templates, and an ungated pod, carry the names of the queues that admitted them.

Against the in-memory store; tests/kube/controller/test_pods.py checks it on an API server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pykueue.engine.config import EngineConfig
from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.integrations.pod import PodAdapter
from pykueue.reconcilers.job_reconciler import JobReconciler
from pykueue.reconcilers.jobframework import CLUSTER_QUEUE_LABEL, LOCAL_QUEUE_LABEL, PodSetInfo
from pykueue.reconcilers.manager import Manager
from pykueue.store.base import WatchEvent
from pykueue.store.memory import MemoryStore

QUEUED = {jobframework.QUEUE_NAME_LABEL: "team-queue"}


def _admitted(workload: dict[str, Any], cluster_queue: str = "cq-a") -> dict[str, Any]:
    workload["status"] = {
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [{"name": "main", "flavors": {}}]},
        "conditions": [
            {"type": "QuotaReserved", "status": "True"},
            {"type": "Admitted", "status": "True"},
        ],
    }
    return workload


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "team-a", "labels": dict(QUEUED)},
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }


async def _start_and_evict(reconciler: JobReconciler, store: MemoryStore) -> tuple[Any, Any]:
    """The Job's template labels once admitted, then once its Workload lost the admission."""
    await store.create(_job())
    await reconciler.sync()
    await reconciler.reconcile()
    [workload] = (await store.list("Workload"))[0]
    admitted = await store.update_status(_admitted(workload))
    reconciler.handle(WatchEvent("MODIFIED", admitted, str(admitted["metadata"]["resourceVersion"])))
    await reconciler.reconcile()
    running = await store.get("Job", "team-a", "j")
    admitted["status"] = {"conditions": []}
    evicted = await store.update_status(admitted)
    reconciler.handle(WatchEvent("MODIFIED", evicted, str(evicted["metadata"]["resourceVersion"])))
    for _ in range(3):  # suspend, then restore the template (each write seen as its watch event)
        await reconciler.reconcile()
        job = await store.get("Job", "team-a", "j")
        reconciler.handle(WatchEvent("MODIFIED", job, str(job["metadata"]["resourceVersion"])))
    stopped = await store.get("Job", "team-a", "j")
    return running["spec"]["template"]["metadata"]["labels"], stopped["spec"]["template"]["metadata"][
        "labels"
    ]


def test_a_started_job_gets_its_queues_labels_and_loses_them_when_stopped() -> None:
    store = MemoryStore()
    running, stopped = asyncio.run(
        _start_and_evict(JobReconciler(store, integrations.registry(), dict), store)
    )
    assert running == {"app": "x", LOCAL_QUEUE_LABEL: "team-queue", CLUSTER_QUEUE_LABEL: "cq-a"}
    assert stopped == {"app": "x"}


def test_with_the_gate_off_a_started_job_gets_no_queue_labels() -> None:
    store = MemoryStore()
    reconciler = JobReconciler(store, integrations.registry(), dict, assign_queue_labels=False)
    running, _ = asyncio.run(_start_and_evict(reconciler, store))
    assert running == {"app": "x"}


@pytest.mark.parametrize(
    ("cluster_queue", "local_queue", "wanted"),
    [
        ("cq-a", "lq", {LOCAL_QUEUE_LABEL: "lq", CLUSTER_QUEUE_LABEL: "cq-a"}),
        # A ClusterQueue name that is a DNS subdomain but no DNS label is left out, as upstream.
        ("cq.example", "lq", {LOCAL_QUEUE_LABEL: "lq"}),
        # A LocalQueue name too long for a label value: left out, so the pod can still be updated.
        ("cq-a", "q" * 64, {CLUSTER_QUEUE_LABEL: "cq-a"}),
    ],
)
def test_queue_names_that_cannot_be_label_values_are_left_out(
    cluster_queue: str, local_queue: str, wanted: dict[str, str]
) -> None:
    workload = _admitted({"spec": {"queueName": local_queue}}, cluster_queue)
    assert jobframework.queue_labels(workload) == wanted


def test_an_ungated_pod_gets_the_queue_labels_without_being_placed_by_topology() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}], "containers": []},
    }
    info = jobframework.with_queue_labels(PodSetInfo("main", 1), _admitted({"spec": {"queueName": "lq"}}))
    PodAdapter().run_with_pod_sets(pod, [info])
    assert pod["metadata"]["labels"] == {"app": "x", LOCAL_QUEUE_LABEL: "lq", CLUSTER_QUEUE_LABEL: "cq-a"}
    assert not pod["spec"].get("schedulingGates")
    assert "annotations" not in pod["metadata"]


@pytest.mark.parametrize(("gates", "wanted"), [({}, True), ({"AssignQueueLabelsForPods": False}, False)])
def test_the_manager_hands_the_gate_to_the_job_and_pod_reconcilers(
    gates: dict[str, bool], wanted: bool
) -> None:
    manager = Manager(
        MemoryStore(),
        config=EngineConfig(feature_gates=gates),
        registry=integrations.registry(("batch/job", "pod")),
    )
    assert manager.jobs.assign_queue_labels is wanted
    assert manager.pods is not None and manager.pods.assign_queue_labels is wanted
