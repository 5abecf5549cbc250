"""Lease-based leader election over the in-memory store, on a fake monotonic clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from pykueue.kube import leader
from pykueue.store.memory import MemoryStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _elector(store: MemoryStore, identity: str, clock: Clock) -> leader.LeaderElector:
    return leader.LeaderElector(
        store, "kueue-system", identity=identity, monotonic=clock, wall_clock=lambda: NOW
    )


def _run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_first_replica_acquires_and_the_second_waits_for_the_lease_duration() -> None:
    async def scenario() -> None:
        store, clock = MemoryStore(now=lambda: NOW), Clock()
        a, b = _elector(store, "a", clock), _elector(store, "b", clock)
        assert await a.try_acquire_or_renew()
        assert a.may_write() and not b.may_write()
        assert not await b.try_acquire_or_renew()
        assert b.holder() == "a"
        # a renews: the record changes, so b's observation restarts.
        clock.t += 8
        assert await a.try_acquire_or_renew()
        clock.t += 8
        assert not await b.try_acquire_or_renew()
        # a stops renewing: its own fence closes after renew_deadline (10 s) ...
        clock.t += 10.5
        assert not a.may_write()
        assert not await b.try_acquire_or_renew()  # ... before b may take over (15 s)
        clock.t += 5
        assert await b.try_acquire_or_renew()
        lease = await store.get("Lease", "kueue-system", leader.DEFAULT_LEASE_NAME)
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1
        assert lease["spec"]["leaseDurationSeconds"] == 15
        # a comes back: it sees b's lease and stays a follower.
        assert not await a.try_acquire_or_renew()
        assert not a.may_write()

    asyncio.run(scenario())


def test_the_fence_refuses_writes_once_the_lease_is_not_held() -> None:
    async def scenario() -> None:
        store, clock = MemoryStore(now=lambda: NOW), Clock()
        a = _elector(store, "a", clock)
        fenced = leader.FencedStore(store, a.may_write)
        flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
        with pytest.raises(leader.NotLeader):
            await fenced.create(flavor)
        assert await a.try_acquire_or_renew()
        await fenced.create(flavor)
        clock.t += 11
        with pytest.raises(leader.NotLeader):
            await fenced.delete("ResourceFlavor", "", "f")
        assert (await fenced.get("ResourceFlavor", "", "f"))["metadata"]["name"] == "f"  # reads still work

    asyncio.run(scenario())


def test_run_cancels_the_leading_task_when_the_lease_is_taken() -> None:
    async def scenario() -> None:
        store = MemoryStore(now=lambda: NOW)
        timing = leader.LeaseTiming(lease_duration=1.5, renew_deadline=1.0, retry_period=0.05)
        a = leader.LeaderElector(store, "ns", identity="a", timing=timing)
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def lead() -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        stop = asyncio.Event()
        runner = asyncio.create_task(a.run(lead, stop))
        await asyncio.wait_for(started.wait(), 5)
        # Someone else overwrites the lease (e.g. after a long pause of ours).
        lease = await store.get("Lease", "ns", leader.DEFAULT_LEASE_NAME)
        lease["spec"]["holderIdentity"] = "intruder"
        await store.update(lease)
        assert await asyncio.wait_for(runner, 5) is False
        assert cancelled.is_set()
        assert not a.may_write()

    asyncio.run(scenario())


def test_a_graceful_stop_releases_the_lease_for_the_standby() -> None:
    async def scenario() -> None:
        store = MemoryStore(now=lambda: NOW)
        timing = leader.LeaseTiming(lease_duration=30, renew_deadline=20, retry_period=0.05)
        a = leader.LeaderElector(store, "ns", identity="a", timing=timing)
        b = leader.LeaderElector(store, "ns", identity="b", timing=timing)
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        led: list[str] = []

        def leading(name: str) -> object:
            async def lead() -> None:
                led.append(name)
                await asyncio.Event().wait()

            return lead

        run_a = asyncio.create_task(a.run(leading("a"), stop_a))  # type: ignore[arg-type]
        while led != ["a"]:
            await asyncio.sleep(0.01)
        run_b = asyncio.create_task(b.run(leading("b"), stop_b))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        assert led == ["a"]
        stop_a.set()
        assert await run_a is True
        # Released: b need not wait 30 s.
        await asyncio.wait_for(_until(lambda: led == ["a", "b"]), 5)
        stop_b.set()
        assert await run_b is True

    asyncio.run(scenario())


async def _until(probe: object) -> None:
    while not probe():  # type: ignore[operator]
        await asyncio.sleep(0.01)


def test_timing_must_be_ordered() -> None:
    with pytest.raises(ValueError):
        leader.LeaseTiming(lease_duration=10, renew_deadline=10, retry_period=2)


def test_a_replica_stands_by_only_once_it_has_seen_the_lease() -> None:
    """/readyz of a follower is 200 while it stands by; one that never reached the API server is not."""

    async def scenario() -> None:
        store, clock = MemoryStore(now=lambda: NOW), Clock()
        a, b = _elector(store, "a", clock), _elector(store, "b", clock)
        assert not b.standing_by  # started, the API server not asked yet
        assert await a.try_acquire_or_renew()
        assert not a.standing_by  # leading
        assert not await b.try_acquire_or_renew()
        assert b.standing_by

    _run(scenario())
