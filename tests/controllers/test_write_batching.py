"""How the controller spends API writes: status writes go out together, queue statuses coalesce."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from pykueue.controllers.admission import AdmissionController
from pykueue.controllers.queue_status import QueueStatusWriter
from pykueue.engine import status as engine_status
from pykueue.store.base import Key, Manifest, WatchEvent, resource_version
from pykueue.store.memory import MemoryStore

EXAMPLES = Path(__file__).parents[2] / "examples"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class SlowStore(MemoryStore):
    """A store whose status writes take a while, counting how many are in flight at once."""

    def __init__(self) -> None:
        super().__init__(now=lambda: NOW)
        self.in_flight = 0
        self.most_in_flight = 0
        self.status_writes = 0

    async def update_status(self, obj: Manifest) -> Manifest:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            self.status_writes += 1
            return await super().update_status(obj)
        finally:
            self.in_flight -= 1


async def _loaded(store: MemoryStore, *files: str) -> None:
    for name in files:
        for doc in yaml.safe_load_all((EXAMPLES / name).read_text()):
            if doc:
                await store.create(doc)


def _many_workloads(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": f"w{i}", "namespace": "research"},
            "spec": {
                "queueName": "main",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                        },
                    }
                ],
            },
        }
        for i in range(count)
    ]


def test_workload_status_writes_go_out_several_at_a_time_but_bounded() -> None:
    async def scenario() -> SlowStore:
        store = SlowStore()
        await _loaded(store, "queues.yaml")
        for doc in _many_workloads(30):
            await store.create(doc)
        controller = AdmissionController(store, clock=lambda: NOW)
        controller.write_concurrency = 4
        await controller.sync()
        writes = await controller.reconcile()
        assert writes == store.status_writes == 30  # each one admitted or told why it waits
        return store

    store = asyncio.run(scenario())
    assert 1 < store.most_in_flight <= 4


def test_queue_status_is_written_at_most_once_per_interval_and_the_latest_goes_out() -> None:
    async def scenario() -> None:
        store = MemoryStore(now=lambda: NOW)
        await _loaded(store, "queues.yaml", "workloads.yaml")
        controller = AdmissionController(store, clock=lambda: NOW)
        await controller.sync()
        await controller.reconcile()
        ticks = [100.0]
        writer = QueueStatusWriter(
            store, clock=lambda: NOW, min_interval_seconds=1.0, monotonic=lambda: ticks[0]
        )
        assert await writer.write(controller.state, controller.cache) > 0
        cq = Key("ClusterQueue", "", "research")
        status_before = controller.cache[cq]["status"]

        # A workload finishes: the queue's counts change, but its status was just written.
        finished = next(
            obj
            for key, obj in controller.cache.items()
            if key.kind == "Workload"
            and (obj.get("status") or {}).get("admission", {}).get("clusterQueue") == "research"
        )
        finished = {
            **finished,
            "status": {
                **finished["status"],
                "conditions": [
                    *finished["status"]["conditions"],
                    {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"},
                ],
            },
        }
        await store.update_status(finished)
        fresh = await store.get("Workload", finished["metadata"]["namespace"], finished["metadata"]["name"])
        controller.handle(WatchEvent("MODIFIED", fresh, resource_version(fresh)))
        await controller.reconcile()
        ticks[0] = 100.5
        assert await writer.write(controller.state, controller.cache) == 0
        assert (await store.get("ClusterQueue", "", "research"))["status"] == status_before

        ticks[0] = 101.1  # the interval has passed: the latest counts go out
        assert await writer.write(controller.state, controller.cache) > 0
        stored = (await store.get("ClusterQueue", "", "research"))["status"]
        latest = engine_status.cluster_queue_status(controller.state, "research")
        assert stored != status_before
        assert {k: stored[k] for k in latest if k != "conditions"} == {
            k: v for k, v in latest.items() if k != "conditions"
        }

    asyncio.run(scenario())
