"""How the controller spends API writes: status writes go out together, queue statuses coalesce."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest

from pykueue.engine import status as engine_status
from pykueue.reconcilers.admission import AdmissionController
from pykueue.reconcilers.metrics import Metrics
from pykueue.reconcilers.queue_status import QueueStatusWriter
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


async def _slow_store_with(workloads: int) -> tuple[SlowStore, AdmissionController]:
    store = SlowStore()
    await _loaded(store, "queues.yaml")
    for doc in _many_workloads(workloads):
        await store.create(doc)
    return store, AdmissionController(store, clock=lambda: NOW)


def test_workload_status_writes_go_out_several_at_a_time_but_bounded() -> None:
    async def scenario() -> SlowStore:
        store, controller = await _slow_store_with(30)
        controller.write_concurrency = 4
        await controller.sync()
        writes = await controller.reconcile()
        assert writes == store.status_writes == 30  # each one admitted or told why it waits
        return store

    store = asyncio.run(scenario())
    assert 1 < store.most_in_flight <= 4 + 1  # four for admissions, one for pending explanations


async def _queue_writer() -> tuple[MemoryStore, AdmissionController, QueueStatusWriter, list[float]]:
    """The example queues and workloads admitted, and a queue status writer on a clock the
    test moves (``ticks[0]``), at most one write per queue a second."""
    store = MemoryStore(now=lambda: NOW)
    await _loaded(store, "queues.yaml", "workloads.yaml")
    controller = AdmissionController(store, clock=lambda: NOW)
    await controller.sync()
    await controller.reconcile()
    ticks = [100.0]
    writer = QueueStatusWriter(store, clock=lambda: NOW, min_interval_seconds=1.0, monotonic=lambda: ticks[0])
    return store, controller, writer, ticks


def test_queue_status_is_written_at_most_once_per_interval_and_the_latest_goes_out() -> None:
    async def scenario() -> None:
        store, controller, writer, ticks = await _queue_writer()
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


def _local_queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "research"},
        "spec": {"clusterQueue": "research"},
    }


def test_a_new_queue_gets_its_first_status_at_once_and_a_swapped_one_within_the_interval() -> None:
    """A pass looks only at the queues due at the front of its order (not at every queue): a
    queue the engine did not have is found when the number of queues changes, and at the latest
    when the interval has passed (a deletion and a creation in one pass keep the number)."""

    async def scenario() -> None:
        store, controller, writer, ticks = await _queue_writer()
        await writer.write(controller.state, controller.cache)

        async def change(create: str, delete: str | None = None) -> None:
            made = await store.create(_local_queue(create))
            controller.handle(WatchEvent("ADDED", made, resource_version(made)))
            if delete is not None:
                gone = await store.get("LocalQueue", "research", delete)
                await store.delete("LocalQueue", "research", delete)
                controller.handle(WatchEvent("DELETED", gone, resource_version(gone)))
            await controller.reconcile()

        await change("extra")
        ticks[0] = 100.1
        assert await writer.write(controller.state, controller.cache) == 1
        assert (await store.get("LocalQueue", "research", "extra")).get("status")

        await change("swapped", delete="extra")
        ticks[0] = 100.2
        assert await writer.write(controller.state, controller.cache) == 0  # not listed yet
        ticks[0] = 101.2
        await writer.write(controller.state, controller.cache)
        assert (await store.get("LocalQueue", "research", "swapped")).get("status")

    asyncio.run(scenario())


def test_queue_count_changes_share_a_budget_news_does_not() -> None:
    async def scenario() -> None:
        store, controller, writer, ticks = await _queue_writer()
        writer.max_writes_per_second = 1.0
        queues = [k for k in controller.cache if k.kind in ("ClusterQueue", "LocalQueue")]
        # Every queue's first status is news: all of them go, whatever the budget.
        assert await writer.write(controller.state, controller.cache) == len(queues)

        # Two admitted workloads of the research queue finish: its counts change (and its
        # LocalQueue's), but it stays busy, so that is no news and waits for the budget.
        done = [
            obj
            for key, obj in controller.cache.items()
            if key.kind == "Workload"
            and (obj.get("status") or {}).get("admission", {}).get("clusterQueue") == "research"
        ][:2]
        for obj in done:
            status = {**obj["status"], "conditions": [*obj["status"]["conditions"], _finished()]}
            fresh = await store.update_status({**obj, "status": status})
            controller.handle(WatchEvent("MODIFIED", fresh, resource_version(fresh)))
        await controller.reconcile()
        research = (await store.get("ClusterQueue", "", "research"))["status"]
        assert research["pendingWorkloads"] or research["reservingWorkloads"]

        ticks[0] = 101.1  # one more write's worth of budget
        assert await writer.write(controller.state, controller.cache) == 1
        assert (await store.get("ClusterQueue", "", "research"))["status"] != research  # queues first

    asyncio.run(scenario())


def test_a_queue_status_that_waited_for_a_slot_says_what_the_engine_says_when_it_goes() -> None:
    # A thousand new queues queue a thousand first statuses; by a queue's turn it may have
    # turned busy, and a stale "idle" would tell readers (upstream's runner) it is done.
    async def scenario() -> None:
        store = SlowStore()
        await _loaded(store, "queues.yaml", "workloads.yaml")
        controller = AdmissionController(store, clock=lambda: NOW)
        await controller.sync()
        await controller.reconcile()
        writer = QueueStatusWriter(
            store, clock=lambda: NOW, min_interval_seconds=1.0, monotonic=lambda: 100.0, concurrency=1
        )
        writer.background = True
        store.most_in_flight = 0
        assert await writer.write(controller.state, controller.cache) == 4  # first statuses, one at a time
        last = list(controller.state.cluster_queues)[-1]  # the other ClusterQueue's write goes first
        queue = Key("ClusterQueue", "", last)
        before = engine_status.cluster_queue_status(controller.state, last)
        assert before["reservingWorkloads"] > 0

        # While the first write travels, a workload of the other queue finishes.
        done = next(
            obj
            for key, obj in controller.cache.items()
            if key.kind == "Workload"
            and (obj.get("status") or {}).get("admission", {}).get("clusterQueue") == last
        )
        status = {**done["status"], "conditions": [*done["status"]["conditions"], _finished()]}
        fresh = await MemoryStore.update_status(store, {**done, "status": status})
        controller.handle(WatchEvent("MODIFIED", fresh, resource_version(fresh)))
        now = engine_status.cluster_queue_status(controller.state, last)
        assert now["reservingWorkloads"] == before["reservingWorkloads"] - 1

        await writer.drain()
        assert store.most_in_flight == 1
        stored = (await store.get(queue.kind, queue.namespace, queue.name))["status"]
        assert stored["reservingWorkloads"] == now["reservingWorkloads"]

    asyncio.run(scenario())


class RecordingStore(MemoryStore):
    """A store that notes whose status is written, in order."""

    def __init__(self) -> None:
        super().__init__(now=lambda: NOW)
        self.written: list[str] = []

    async def update_status(self, obj: Manifest) -> Manifest:
        self.written.append(f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}")
        await asyncio.sleep(0)
        return await super().update_status(obj)


def test_news_of_busy_queues_goes_before_the_first_status_of_idle_ones() -> None:
    # A thousand new queues each have a first status to write; upstream's runner ends its
    # run when no ClusterQueue it has seen says busy, so the few with work go first.
    async def scenario() -> list[str]:
        store = RecordingStore()
        await _loaded(store, "queues.yaml")
        for doc in _many_workloads(2):  # both in research: product stays idle
            await store.create(doc)
        controller = AdmissionController(store, clock=lambda: NOW)
        await controller.sync()
        await controller.reconcile()
        store.written.clear()
        writer = QueueStatusWriter(store, clock=lambda: NOW, monotonic=lambda: 100.0, concurrency=1)
        writer.background = True
        assert await writer.write(controller.state, controller.cache) == 4
        await writer.drain()
        return store.written

    assert asyncio.run(scenario()) == [
        "ClusterQueue /research",
        "LocalQueue research/main",
        "ClusterQueue /product",
        "LocalQueue product/main",
    ]


def _finished() -> dict[str, str]:
    return {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done"}


def test_background_writes_let_the_pass_return_and_send_what_they_learn_to_the_outbox() -> None:
    async def scenario() -> None:
        store, controller = await _slow_store_with(6)
        outbox: asyncio.Queue[WatchEvent] = asyncio.Queue()
        controller.outbox = outbox
        await controller.sync()
        # Someone else writes w0 after our list: our write of w0 will conflict.
        other = await store.get("Workload", "research", "w0")
        await store.update_status({**other, "status": {"conditions": []}})
        store.status_writes = 0

        started = await controller.reconcile()
        assert started == 6 and store.status_writes == 0  # the pass did not wait for them
        await controller.drain()
        assert store.status_writes == 6  # six sent: five written, w0's refused with a conflict
        learned = outbox.get_nowait()
        assert (learned.type, learned.object["metadata"]["name"]) == ("MODIFIED", "w0")
        assert outbox.empty()
        w0 = await store.get("Workload", "research", "w0")
        assert not (w0.get("status") or {}).get("admission")  # not yet: the next pass does it

        controller.handle(learned)
        await controller.reconcile()
        await controller.drain()
        w0 = await store.get("Workload", "research", "w0")
        assert (w0.get("status") or {}).get("admission", {}).get("clusterQueue") == "research"

    asyncio.run(scenario())


def test_a_pass_decides_no_further_ahead_of_the_writes_than_max_ahead() -> None:
    async def scenario() -> None:
        store, controller = await _slow_store_with(12)  # twelve 1-CPU workloads, 32 CPUs free
        controller.outbox = asyncio.Queue()
        controller.max_ahead = 4
        await controller.sync()

        def admitted() -> int:
            return sum(1 for wl in controller.state.workloads.values() if wl.admission is not None)

        await controller.reconcile()
        assert admitted() == 4  # four queued for their writes: the pass stopped there
        await controller.reconcile()
        assert admitted() == 4  # still queued: no room ahead
        await controller.drain()
        await controller.reconcile()
        assert admitted() == 8
        await controller.drain()
        controller.max_ahead = 0  # no limit
        await controller.reconcile()
        await controller.drain()
        assert admitted() == 12
        stored = [await store.get("Workload", "research", f"w{i}") for i in range(12)]
        assert all((obj.get("status") or {}).get("admission") for obj in stored)

    asyncio.run(scenario())


def test_a_pass_with_room_for_one_admission_decides_the_best_head_of_all_queues() -> None:
    # One cycle would admit the head of every queue; with room for one it admits the
    # best and leaves the other untried, so a later, better head still goes first.
    async def scenario() -> None:
        store = SlowStore()
        await _loaded(store, "queues.yaml")
        docs = _many_workloads(2)
        docs[0]["metadata"]["name"] = "routine"
        docs[1]["metadata"].update(name="deadline", namespace="product")
        docs[1]["spec"]["priority"] = 1000
        for doc in docs:
            await store.create(doc)
        controller = AdmissionController(store, clock=lambda: NOW)
        controller.outbox = asyncio.Queue()
        controller.max_ahead = 1
        await controller.sync()
        await controller.reconcile()
        admitted = {wl.name for wl in controller.state.workloads.values() if wl.admission is not None}
        assert admitted == {"deadline"}
        routine = controller.state.workloads["research/routine"]
        assert "QuotaReserved" not in routine.conditions  # untried: nothing to explain
        await controller.drain()
        await controller.reconcile()
        await controller.drain()
        assert routine.admission is not None

    asyncio.run(scenario())


def test_a_pending_workloads_new_words_wait_for_the_refresh_interval_a_status_change_does_not() -> None:
    async def scenario() -> None:
        store = MemoryStore(now=lambda: NOW)
        await _loaded(store, "queues.yaml", "workloads.yaml")
        clock = [NOW]
        controller = AdmissionController(store, clock=lambda: clock[0])
        controller.words_refresh_seconds = 5.0
        await controller.sync()
        await controller.reconcile()
        written = await store.get("Workload", "product", "too-big")
        reserved = _condition(written, "QuotaReserved")
        assert reserved is not None and reserved["status"] == "False"

        async def someone_rewrites(message: str, reason: str) -> None:
            obj = await store.get("Workload", "product", "too-big")
            conditions = [
                {**c, "message": message, "reason": reason} if c["type"] == "QuotaReserved" else c
                for c in obj["status"]["conditions"]
            ]
            fresh = await store.update_status({**obj, "status": {**obj["status"], "conditions": conditions}})
            controller.handle(WatchEvent("MODIFIED", fresh, resource_version(fresh)))

        # Other words, one second after ours: ours go back only when the interval is over.
        await someone_rewrites("stale words", reserved["reason"])
        clock[0] = NOW + timedelta(seconds=1)
        await controller.reconcile()
        assert (
            _condition(await store.get("Workload", "product", "too-big"), "QuotaReserved")["message"]
            == "stale words"
        )
        clock[0] = NOW + timedelta(seconds=6)
        await controller.reconcile()
        assert _condition(await store.get("Workload", "product", "too-big"), "QuotaReserved") == reserved

        # Another reason while it stays pending is words too; a status change is not.
        await someone_rewrites("stale words", "SomethingElse")
        clock[0] = NOW + timedelta(seconds=7)
        await controller.reconcile()
        stored = _condition(await store.get("Workload", "product", "too-big"), "QuotaReserved")
        assert stored is not None and stored["reason"] == "SomethingElse"
        clock[0] = NOW + timedelta(seconds=12)
        await controller.reconcile()
        assert _condition(await store.get("Workload", "product", "too-big"), "QuotaReserved") == reserved

        obj = await store.get("Workload", "product", "too-big")
        wiped = await store.update_status({**obj, "status": {}})  # its explanation gone: news
        controller.handle(WatchEvent("MODIFIED", wiped, resource_version(wiped)))
        clock[0] = NOW + timedelta(seconds=13)
        await controller.reconcile()
        assert _condition(await store.get("Workload", "product", "too-big"), "QuotaReserved") == reserved

    asyncio.run(scenario())


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == kind), None)


class ExplanationsHeldStore(MemoryStore):
    """Writes of a status without an admission wait for ``explain``; the rest go through."""

    def __init__(self) -> None:
        super().__init__(now=lambda: NOW)
        self.explain = asyncio.Event()
        self.writes: dict[str, list[bool]] = {}

    async def update_status(self, obj: Manifest) -> Manifest:
        admitted = bool((obj.get("status") or {}).get("admission"))
        self.writes.setdefault(obj["metadata"]["name"], []).append(admitted)
        if not admitted:
            await self.explain.wait()
        return await super().update_status(obj)


def test_a_queued_explanation_goes_out_as_the_admission_it_became_ahead_of_the_backlog() -> None:
    async def scenario() -> None:
        store = ExplanationsHeldStore()
        await _loaded(store, "queues.yaml")
        # Each ClusterQueue: one workload filling its own 32 CPUs, one more that would borrow.
        for namespace in ("research", "product"):
            for i, doc in enumerate(_many_workloads(2)):
                doc["metadata"].update(name=f"{namespace}-{i}", namespace=namespace)
                doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
                    "cpu"
                ] = "32"
                await store.create(doc)
        controller = AdmissionController(store, clock=lambda: NOW)
        controller.write_concurrency = 4  # one slot for explanations
        controller.outbox = asyncio.Queue()
        await controller.sync()
        await controller.reconcile()
        for _ in range(100):
            if len(store.writes) == 3:
                break
            await asyncio.sleep(0.01)
        admitted = {name for name, writes in store.writes.items() if writes == [True]}
        held = [name for name, writes in store.writes.items() if writes == [False]]
        assert len(admitted) == 2 and len(held) == 1  # one explanation holds the one slot
        # The held explanation and the one queued behind it.
        assert controller.write_backlog() == {"admission": 0, "explanation": 2}
        exposed = Metrics(write_backlog=controller.write_backlog)
        text = generate_latest(exposed.registry).decode()
        assert (
            'pykueue_workload_status_writes_waiting{lane="explanation",replica_role="standalone"} 2.0' in text
        )
        waiting = {key.split("/")[1] for key, wl in controller.state.workloads.items() if not wl.admission}
        (queued,) = waiting - set(held)
        assert controller.state.workloads[f"{queued.split('-')[0]}/{queued}"].conditions  # explained

        # The admitted workload of the queued one's ClusterQueue finishes: it is admitted next.
        (done_name,) = {name for name in admitted if name.split("-")[0] == queued.split("-")[0]}
        obj = await store.get("Workload", queued.split("-")[0], done_name)
        conditions = [
            *obj["status"]["conditions"],
            {"type": "Finished", "status": "True", "reason": "Succeeded"},
        ]
        done = await MemoryStore.update_status(
            store, {**obj, "status": {**obj["status"], "conditions": conditions}}
        )
        controller.handle(WatchEvent("MODIFIED", done, resource_version(done)))
        await controller.reconcile()
        assert controller.state.workloads[f"{queued.split('-')[0]}/{queued}"].admission is not None
        for _ in range(100):
            if store.writes.get(queued):
                break
            await asyncio.sleep(0.01)
        # It never waited for the explanation slot: one write, its admission.
        assert store.writes[queued] == [True]
        assert (await store.get("Workload", queued.split("-")[0], queued))["status"]["admission"]
        assert store.writes[held[0]] == [False]  # still held

        store.explain.set()
        await controller.drain()
        assert store.writes[queued] == [True]
        assert store.writes[held[0]] == [False]
        assert (await store.get("Workload", held[0].split("-")[0], held[0]))["status"]["conditions"]

    asyncio.run(scenario())
