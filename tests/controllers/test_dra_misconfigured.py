"""A job whose devices cannot be charged is queued all the same: its Workload says why it waits.

As upstream's workload controller marks it: QuotaReserved=False, reason Misconfigured, the
message naming the field; a Warning event on the Workload tells `kubectl describe` the same.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.events import EventRecorder
from pykueue.reconcilers.manager import Manager
from pykueue.store.base import WatchEvent, resource_version
from pykueue.store.memory import MemoryStore

from .test_dra import job, template

KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUES: list[dict[str, Any]] = [
    {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "example.com/gpu"],
                    "flavors": [
                        {
                            "name": "default",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "10"},
                                {"name": "example.com/gpu", "nominalQuota": "8"},
                            ],
                        }
                    ],
                }
            ],
        },
    },
    {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"clusterQueue": "cq"},
    },
]


def _run(*objs: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    async def run() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        store = MemoryStore()
        settings = jobframework.Settings(device_classes={"gpu.example.com": "example.com/gpu"})
        manager = Manager(
            store,
            registry=integrations.registry(("batch/job",)),
            settings=settings,
            events=EventRecorder(store),
        )
        for obj in [*QUEUES, *objs]:
            await store.create(obj)
        await manager.sync()
        for _ in range(4):
            await manager.reconcile()
            for kind in ("Workload", "ClusterQueue", "LocalQueue", "Job"):
                for obj in (await store.list(kind))[0]:
                    manager.dispatch(WatchEvent("MODIFIED", obj, resource_version(obj)))
        assert manager.events is not None
        await manager.events.drain()
        [workload] = (await store.list("Workload"))[0]
        return workload, (await store.list("Event", "default"))[0]

    return asyncio.run(run())


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in workload.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def test_an_unmapped_device_class_makes_the_workload_misconfigured_with_an_event() -> None:
    fpga = template("fpga", {"name": "x", "exactly": {"deviceClassName": "fpga.example.com"}})
    workload, events = _run(fpga, job("fpga"))
    reserved = _condition(workload, "QuotaReserved")
    assert reserved is not None and reserved["status"] == "False"
    assert reserved["reason"] == "Misconfigured"
    assert "DeviceClass fpga.example.com is not mapped in DRA configuration" in reserved["message"]
    assert "spec.podSets[0].template.spec.resourceClaims[0]" in reserved["message"]
    assert not workload["status"].get("admission")
    warnings = [
        e
        for e in events
        if e["involvedObject"]["kind"] == "Workload" and e["type"] == "Warning"  # type: ignore[index]
    ]
    assert warnings and all("fpga.example.com is not mapped" in str(e["message"]) for e in warnings)
    assert [e["reason"] for e in warnings] == ["Pending"]
    on_job = [e for e in events if e["involvedObject"]["kind"] == "Job" and e["type"] == "Warning"]  # type: ignore[index]
    assert [e["reason"] for e in on_job] == ["Pending"] and "fpga.example.com" in str(on_job[0]["message"])


def test_a_mapped_device_class_is_admitted_charged() -> None:
    gpu = template("gpu", {"name": "x", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}})
    workload, _ = _run(gpu, job("gpu"))
    admitted = _condition(workload, "Admitted")
    assert admitted is not None and admitted["status"] == "True"
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"]["example.com/gpu"] == "2"
