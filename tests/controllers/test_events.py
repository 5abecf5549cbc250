"""Events for Workloads and jobs: upstream's reasons, written once, never a flood."""

from __future__ import annotations

import asyncio

from pykueue.engine import events as engine_events
from pykueue.engine.events import Event
from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.events import PER_OBJECT_BURST, EventRecorder, workload_events
from pykueue.reconcilers.manager import Manager
from pykueue.store.memory import MemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _workload(name: str, uid: str) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "uid": uid},
    }


async def _events(store: MemoryStore) -> list[dict[str, object]]:
    items, _ = await store.list("Event", "team")
    return items


def test_an_event_names_its_object_reason_and_component() -> None:
    async def run() -> list[dict[str, object]]:
        store = MemoryStore()
        recorder = EventRecorder(store, clock=Clock())
        assert recorder.record(_workload("job-a", "u1"), "Normal", "QuotaReserved", "Quota reserved in cq")
        await recorder.drain()
        return await _events(store)

    (event,) = asyncio.run(run())
    assert event["reason"] == "QuotaReserved" and event["type"] == "Normal"
    assert event["involvedObject"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": "job-a",
        "namespace": "team",
        "uid": "u1",
        "resourceVersion": "",
    }
    assert event["source"] == {"component": "kueue-admission"}


def test_a_jobs_events_are_reported_by_its_frameworks_job_controller() -> None:
    # Upstream's job reconcilers record with `<framework>-kueue-controller` (jobframework/setup.go);
    # only the scheduler's decisions on Workloads are `kueue-admission`'s.
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team", "labels": {jobframework.QUEUE_NAME_LABEL: "main"}},
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        },
    }

    async def run() -> list[dict[str, object]]:
        store = MemoryStore()
        manager = Manager(
            store, registry=integrations.registry(("batch/job",)), events=EventRecorder(store, clock=Clock())
        )
        await store.create(job)
        await manager.jobs.sync()
        await manager.jobs.reconcile()
        assert manager.events is not None
        await manager.events.drain()
        return await _events(store)

    (event,) = asyncio.run(run())
    assert (event["reason"], event["involvedObject"]["kind"]) == ("CreatedWorkload", "Job")  # type: ignore[index]
    assert event["source"] == {"component": "batch/job-kueue-controller"}
    assert event["reportingComponent"] == "batch/job-kueue-controller"


def test_the_same_event_is_written_once_in_ten_minutes() -> None:
    clock = Clock()

    async def run() -> int:
        store = MemoryStore()
        recorder = EventRecorder(store, clock=clock)
        wl = _workload("job-a", "u1")
        for _ in range(5):
            recorder.record(wl, "Warning", "Pending", "couldn't assign flavors")
        recorder.record(wl, "Warning", "Pending", "another reason in words")
        clock.now += 601
        recorder.record(wl, "Warning", "Pending", "couldn't assign flavors")
        await recorder.drain()
        return len(await _events(store))

    assert asyncio.run(run()) == 3


def test_one_object_gets_a_burst_then_one_event_in_five_minutes() -> None:
    clock = Clock()

    async def run() -> tuple[int, int]:
        store = MemoryStore()
        recorder = EventRecorder(store, clock=clock, qps=1000, burst=1000)
        wl = _workload("job-a", "u1")
        for i in range(PER_OBJECT_BURST + 10):
            recorder.record(wl, "Normal", "Preempted", f"message {i}")
        clock.now += 300
        recorder.record(wl, "Normal", "Preempted", "after five minutes")
        recorder.record(wl, "Normal", "Preempted", "too soon again")
        other = recorder.record(_workload("job-b", "u2"), "Normal", "Preempted", "another object")
        assert other
        await recorder.drain()
        return len(await _events(store)), recorder.dropped

    written, dropped = asyncio.run(run())
    assert written == PER_OBJECT_BURST + 1 + 1
    assert dropped == 10 + 1


def test_all_objects_together_are_held_to_qps() -> None:
    clock = Clock()

    async def run() -> int:
        store = MemoryStore()
        recorder = EventRecorder(store, clock=clock, qps=2, burst=5)
        for i in range(20):
            recorder.record(_workload(f"job-{i}", f"u{i}"), "Normal", "Admitted", "admitted")
        clock.now += 2  # four more tokens
        for i in range(20, 40):
            recorder.record(_workload(f"job-{i}", f"u{i}"), "Normal", "Admitted", "admitted")
        await recorder.drain()
        return len(await _events(store))

    assert asyncio.run(run()) == 5 + 4


def test_engine_decisions_map_to_upstreams_reasons() -> None:
    def reasons(event: Event) -> list[str]:
        return [reason for _, reason, _ in workload_events(event)]

    admitted = Event(1, "team/a", engine_events.ADMITTED, "m", "Admitted")
    reserved = Event(1, "team/a", engine_events.ADMITTED, "m", "QuotaReserved")
    assert reasons(admitted) == ["QuotaReserved", "Admitted"]
    assert reasons(reserved) == ["QuotaReserved"]
    assert reasons(Event(1, "team/a", engine_events.CHECKS_PASSED, "m")) == ["Admitted"]
    timeout = Event(
        1, "team/a", engine_events.EVICTED, "m", "PodsReadyTimeout", underlying_cause="WaitForStart"
    )
    assert reasons(timeout) == ["EvictedDueToPodsReadyTimeout"]
    limit = Event(
        1, "team/a", engine_events.EVICTED, "m", "Deactivated", underlying_cause="RequeuingLimitExceeded"
    )
    assert reasons(limit) == ["EvictedDueToDeactivatedDueToRequeuingLimitExceeded"]
    assert workload_events(Event(1, "team/a", engine_events.PENDING, "m", "Pending"))[0][0] == "Warning"


class SlowStore(MemoryStore):
    """Creates take a while; counts how many are under way at once."""

    def __init__(self) -> None:
        super().__init__()
        self.now_writing = 0
        self.most_at_once = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def create(self, obj: dict[str, object]) -> dict[str, object]:  # type: ignore[override]
        self.now_writing += 1
        self.most_at_once = max(self.most_at_once, self.now_writing)
        try:
            await self.gate.wait()
            await asyncio.sleep(0.001)
            return await super().create(obj)
        finally:
            self.now_writing -= 1


def test_events_are_written_one_at_a_time_in_order() -> None:
    async def run() -> tuple[int, list[str]]:
        store = SlowStore()
        recorder = EventRecorder(store, clock=Clock(), qps=1000, burst=1000)
        for i in range(10):
            recorder.record(_workload(f"job-{i}", f"u{i}"), "Normal", "Admitted", "admitted")
        await recorder.drain()
        items = await _events(store)
        ordered = sorted(items, key=lambda e: int(e["metadata"]["resourceVersion"]))  # type: ignore[index]
        return store.most_at_once, [e["involvedObject"]["name"] for e in ordered]  # type: ignore[index]

    most_at_once, names = asyncio.run(run())
    assert most_at_once == 1
    assert names == [f"job-{i}" for i in range(10)]


def test_events_beyond_the_queue_limit_are_dropped_not_queued() -> None:
    async def run() -> tuple[list[bool], int, int]:
        store = SlowStore()
        store.gate.clear()  # the API server does not answer for now
        recorder = EventRecorder(store, clock=Clock(), qps=1000, burst=1000, queue_limit=3)
        taken = [
            recorder.record(_workload(f"job-{i}", f"u{i}"), "Normal", "Admitted", "admitted")
            for i in range(6)
        ]
        await asyncio.sleep(0.01)  # the writer took the first; three wait behind it
        taken.append(recorder.record(_workload("job-6", "u6"), "Normal", "Admitted", "admitted"))
        store.gate.set()
        await recorder.drain()
        return taken, len(await _events(store)), recorder.dropped

    taken, written, dropped = asyncio.run(run())
    assert taken == [True, True, True, False, False, False, True]
    assert written == 4 and dropped == 3


class StalledStore(MemoryStore):
    """An API server that takes writes and never answers."""

    async def create(self, obj: dict[str, object]) -> dict[str, object]:  # type: ignore[override]
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_close_gives_up_on_a_stalled_server_and_leaves_no_write_pending() -> None:
    async def run() -> tuple[EventRecorder, list[asyncio.Task[object]]]:
        recorder = EventRecorder(StalledStore(), clock=Clock())
        recorder.record(_workload("job-a", "u1"), "Normal", "QuotaReserved", "one")
        recorder.record(_workload("job-b", "u2"), "Normal", "QuotaReserved", "two")
        await asyncio.sleep(0)  # the first write is under way
        await recorder.close(grace_seconds=0.05)
        return recorder, [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    recorder, pending = asyncio.run(run())
    assert pending == []
    assert (recorder.written, recorder.dropped) == (0, 2)


def test_close_writes_what_is_queued_when_the_server_answers() -> None:
    async def run() -> tuple[EventRecorder, list[dict[str, object]]]:
        store = MemoryStore()
        recorder = EventRecorder(store, clock=Clock())
        recorder.record(_workload("job-a", "u1"), "Normal", "QuotaReserved", "one")
        recorder.record(_workload("job-b", "u2"), "Normal", "QuotaReserved", "two")
        await recorder.close()
        recorder.record(_workload("job-c", "u3"), "Normal", "QuotaReserved", "three")
        await recorder.drain()
        return recorder, await _events(store)

    recorder, events = asyncio.run(run())
    assert [e["message"] for e in events] == ["one", "two", "three"]
    assert (recorder.written, recorder.dropped) == (3, 0)
