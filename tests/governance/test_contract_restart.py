"""A preemption contract's count survives a restart of the controller.

The controller writes a preempted workload's preemption times on the Workload
(``pykueue.io/preempted-at``) when its ClusterQueue's contract counts preemptions, and
reads them back when it starts: a workload that used up its ``maxPreemptions`` stays
protected after the restart. Without a contract the Workload is left as upstream writes it.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pykueue.api import governance
from pykueue.reconcilers.admission import AdmissionController
from pykueue.store.base import WatchEvent, resource_version
from pykueue.store.memory import MemoryStore

KUEUE = "kueue.x-k8s.io/v1beta2"
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def _queues(contract: dict[str, Any] | None) -> list[dict[str, Any]]:
    annotations = {governance.PREEMPTION_CONTRACT: json.dumps(contract)} if contract else {}
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "train", "annotations": annotations},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": "team"},
            "spec": {"clusterQueue": "train"},
        },
    ]


def _workload(name: str, priority: int) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "queueName": "main",
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


async def _feed(controller: AdmissionController, store: MemoryStore, name: str) -> None:
    obj = await store.get("Workload", "team", name)
    controller.handle(WatchEvent("MODIFIED", obj, resource_version(obj)))


async def _admitted(store: MemoryStore) -> set[str]:
    items, _ = await store.list("Workload")
    return {
        w["metadata"]["name"]
        for w in items
        if (w.get("status") or {}).get("admission")
        and not any(c["type"] == "Finished" for c in w["status"].get("conditions", []))
    }


async def _finish(controller: AdmissionController, store: MemoryStore, name: str) -> None:
    done = await store.get("Workload", "team", name)
    done["status"].setdefault("conditions", []).append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "",
            "lastTransitionTime": "2026-01-01T12:00:00Z",
        }
    )
    await store.update_status(done)
    await _feed(controller, store, name)


async def _settle(controller: AdmissionController, store: MemoryStore) -> None:
    """Passes until nothing is written, each pass fed the objects it wrote (as a watch would)."""
    for _ in range(10):
        if await controller.reconcile() == 0:
            return
        items, _ = await store.list("Workload")
        for obj in items:
            controller.handle(WatchEvent("MODIFIED", obj, resource_version(obj)))


async def _run(contract: dict[str, Any] | None) -> tuple[set[str], dict[str, str]]:
    """low runs; high-1 preempts it and finishes; low runs again; the controller restarts;
    high-2 arrives. What runs then, and the annotations low carries."""
    clock = Clock()
    store = MemoryStore(now=clock)
    for doc in [*_queues(contract), _workload("low", 0)]:
        await store.create(doc)
    first = AdmissionController(store, clock=clock)
    await first.sync()
    await _settle(first, store)
    assert await _admitted(store) == {"low"}

    clock.now += timedelta(minutes=10)
    await store.create(_workload("high-1", 10))
    await _feed(first, store, "high-1")
    await _settle(first, store)
    assert await _admitted(store) == {"high-1"}

    clock.now += timedelta(minutes=10)
    await _finish(first, store, "high-1")
    await _settle(first, store)
    assert await _admitted(store) == {"low"}

    clock.now += timedelta(minutes=10)
    second = AdmissionController(store, clock=clock)
    await second.sync()
    await store.create(_workload("high-2", 10))
    await _feed(second, store, "high-2")
    await _settle(second, store)
    low = await store.get("Workload", "team", "low")
    return await _admitted(store), dict(low["metadata"].get("annotations") or {})


def test_a_workload_that_used_up_its_preemptions_stays_protected_after_a_restart() -> None:
    admitted, annotations = asyncio.run(_run({"maxPreemptions": 1, "window": "24h"}))
    assert admitted == {"low"}, "high-2 must wait: low was already preempted once within the window"
    times = governance.preempted_at(annotations)
    assert times == (int((START + timedelta(minutes=10)).timestamp() * 10**6),)


def test_without_a_contract_the_workload_carries_no_times_and_is_preempted_again() -> None:
    admitted, annotations = asyncio.run(_run(None))
    assert admitted == {"high-2"}
    assert governance.PREEMPTED_AT not in annotations


def test_the_times_read_back_as_written() -> None:
    times = (1_700_000_000_123_456, 1_700_000_600_000_000)
    text = governance.preempted_at_text(times)
    assert text == "2023-11-14T22:13:20.123456Z,2023-11-14T22:23:20.000000Z"
    assert governance.preempted_at({governance.PREEMPTED_AT: text}) == times
    assert governance.preempted_at({governance.PREEMPTED_AT: "garbage," + text.split(",")[0]}) == times[:1]
