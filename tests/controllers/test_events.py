"""Events for Workloads and jobs: upstream's reasons, written once, never a flood."""

from __future__ import annotations

import asyncio

from pykueue.controllers.events import PER_OBJECT_BURST, EventRecorder, workload_events
from pykueue.engine import state as engine_state
from pykueue.engine.state import Event
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

    admitted = Event(1, "team/a", engine_state.ADMITTED, "m", "Admitted")
    reserved = Event(1, "team/a", engine_state.ADMITTED, "m", "QuotaReserved")
    assert reasons(admitted) == ["QuotaReserved", "Admitted"]
    assert reasons(reserved) == ["QuotaReserved"]
    assert reasons(Event(1, "team/a", engine_state.CHECKS_PASSED, "m")) == ["Admitted"]
    timeout = Event(
        1, "team/a", engine_state.EVICTED, "m", "PodsReadyTimeout", underlying_cause="WaitForStart"
    )
    assert reasons(timeout) == ["EvictedDueToPodsReadyTimeout"]
    limit = Event(
        1, "team/a", engine_state.EVICTED, "m", "Deactivated", underlying_cause="RequeuingLimitExceeded"
    )
    assert reasons(limit) == ["EvictedDueToDeactivatedDueToRequeuingLimitExceeded"]
    assert workload_events(Event(1, "team/a", engine_state.PENDING, "m", "Pending"))[0][0] == "Warning"
