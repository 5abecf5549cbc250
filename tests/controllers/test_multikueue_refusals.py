"""A worker that will not run what the manager sent: the manager says so and lets the quota go.

The manager's controller polls a worker held in memory (a `MemoryStore` behind the calls the
controller makes to a worker's API server): tests/kube/multikueue runs the same on real API
servers. Here the worker's Kueue has finished the pre-built Workload OutOfSync, which a worker
of another Kueue may do for reasons of its own, or refuses the job copy.
"""

from __future__ import annotations

import asyncio
import builtins
from datetime import UTC, datetime
from typing import Any

from pykueue.errors import FieldProblem, ValidationError
from pykueue.multikueue import controller as multikueue
from pykueue.multikueue.clusters import ClusterConnections, Connection
from pykueue.reconcilers import integrations, jobframework
from pykueue.store.base import Key, Manifest
from pykueue.store.memory import MemoryStore

NS = "team-a"
ORIGIN = {jobframework.MULTIKUEUE_ORIGIN_LABEL: "multikueue"}
CHECK = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "mk"},
    "spec": {
        "controllerName": multikueue.CONTROLLER_NAME,
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"},
    },
}
CONFIG = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "MultiKueueConfig",
    "metadata": {"name": "mk"},
    "spec": {"clusters": ["w1"]},
}


class Worker:
    """A worker's API server as the controller uses it, over a `MemoryStore`."""

    def __init__(self, refuse: str = "") -> None:
        self.store = MemoryStore()
        self.refuse = refuse

    async def list(self, kind: str, namespace: str | None = None) -> tuple[builtins.list[Manifest], str]:
        return await self.store.list(kind, namespace)

    async def list_selected(
        self, kind: str, namespace: str | None = None, label_selector: str = ""
    ) -> tuple[builtins.list[Manifest], str]:
        items, version = await self.store.list(kind, namespace)
        name, _, value = label_selector.partition("=")
        return [i for i in items if (i["metadata"].get("labels") or {}).get(name) == value], version

    async def create(self, obj: Manifest) -> Manifest:
        if self.refuse and obj.get("kind") == "Job":
            raise ValidationError([FieldProblem("spec", self.refuse, f"Job {NS}/j")])
        return await self.store.create(obj)

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        await self.store.delete(kind, namespace, name)

    async def close(self) -> None:
        return None


class Workers(ClusterConnections):
    """Connections to workers held in memory, every one active (a name per MultiKueueCluster)."""

    def __init__(self, workers: dict[str, Worker]) -> None:
        super().__init__(MemoryStore(), "kueue-system", lambda: datetime.now(UTC))
        self.connections = {
            name: Connection(name, store=worker, active=True, reason="Active")
            for name, worker in workers.items()
        }

    async def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None


def _job() -> Manifest:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": NS,
            "uid": "job-uid",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "managedBy": multikueue.CONTROLLER_NAME,
            "suspend": False,
            "parallelism": 1,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": 1}}}]}},
        },
    }


def _workload() -> Manifest:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-j",
            "namespace": NS,
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": True}
            ],
        },
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main"}]},
            "admissionChecks": [
                {"name": "mk", "state": "Ready", "message": 'The workload got reservation on "w1"'}
            ],
            "clusterName": "w1",
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}],
        },
    }


def _sent(finished: dict[str, str] | None) -> Manifest:
    """The Workload the manager sent to w1, as w1's Kueue left it."""
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    if finished is not None:
        conditions.append({"type": "Finished", "status": "True", **finished})
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-j",
            "namespace": NS,
            "labels": dict(ORIGIN),
            "annotations": {jobframework.MULTIKUEUE_WORKLOAD_ANNOTATION: "job-j"},
        },
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
        "status": {"conditions": conditions},
    }


def _poll(
    worker: Worker, workers: dict[str, Worker] | None = None, clusters: tuple[str, ...] = ("w1",)
) -> tuple[Manifest, list[tuple[str, str, str]]]:
    """One poll of the manager with w1 holding what ``worker`` holds (or the MultiKueueClusters
    ``workers``, its config listing ``clusters``): the Workload's check entry, the Events."""

    async def run() -> tuple[Manifest, list[tuple[str, str, str]]]:
        manager = MemoryStore()
        config = {**CONFIG, "spec": {"clusters": list(clusters)}}
        objects = [await manager.create(obj) for obj in (CHECK, config, _job(), _workload())]
        cache = {Key.of(obj): obj for obj in objects}
        job = objects[2]
        events: list[tuple[str, str, str]] = []
        controller = multikueue.MultiKueueController(
            manager,
            integrations.registry(("batch/job",)),
            cache,
            lambda uid: job if uid == "job-uid" else None,
            on_event=lambda obj, kind, reason, message: events.append((kind, reason, message)),
        )
        controller.clusters = Workers(workers or {"w1": worker})
        await controller.poll()
        stored = await manager.get("Workload", NS, "job-j")
        entry: Manifest = stored["status"]["admissionChecks"][0]
        return entry, events

    return asyncio.run(run())


def _with_copy(sent: Manifest, cluster: str = "w1") -> Worker:
    """A worker holding the job copy and ``sent``, with uids of its own (an API server's are random)."""
    worker = Worker()
    sent = {**sent, "metadata": {**sent["metadata"], "uid": f"{cluster}-workload"}}

    async def fill() -> None:
        job: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "j",
                "namespace": NS,
                "uid": f"{cluster}-job",
                "labels": {**ORIGIN, jobframework.PREBUILT_WORKLOAD_KEY: "job-j"},
                "annotations": {jobframework.MULTIKUEUE_WORKLOAD_ANNOTATION: "job-j"},
            },
            "spec": {"suspend": True},
        }
        await worker.store.create(job)
        await worker.store.create(sent)

    asyncio.run(fill())
    return worker


def test_a_copy_the_worker_finished_out_of_sync_is_dispatched_again_and_told() -> None:
    out_of_sync = {"reason": "OutOfSync", "message": "The prebuilt workload is out of sync with its user job"}
    entry, events = _poll(_with_copy(_sent(out_of_sync)))
    expected = (
        'Remote workload on worker cluster "w1" is out of sync with its user job, resetting for '
        "re-dispatch: The prebuilt workload is out of sync with its user job"
    )
    assert (entry["state"], entry["message"]) == ("Retry", expected)
    assert events == [("Warning", "MultiKueue", expected)]


def test_a_copy_that_runs_keeps_its_check_ready() -> None:
    entry, events = _poll(_with_copy(_sent(None)))
    assert entry["state"] == "Ready"
    assert events == []


def test_a_job_the_winner_refuses_is_told_on_the_managers_workload() -> None:
    # w1 reserved quota for the Workload sent first, then its API server refuses the job.
    worker = Worker(refuse="denied by policy no-jobs-here")
    asyncio.run(worker.store.create(_sent(None)))
    entry, events = _poll(worker)
    assert entry["state"] == "Ready", "tried again on the next poll, as upstream"
    assert entry["message"].startswith('The worker "w1" refused the job: '), entry["message"]
    assert "spec: denied by policy no-jobs-here" in entry["message"]
    assert events == [("Warning", "MultiKueue", entry["message"])]
