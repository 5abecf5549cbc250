"""The same behaviour suite against every Store backend: MemoryStore and SQLiteStore."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pykueue.errors import AlreadyExists, Conflict, NotFound
from pykueue.store.base import Manifest, Store, WatchEvent
from pykueue.store.memory import MemoryStore
from pykueue.store.sqlite import SQLiteStore

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    def make() -> Store:
        if request.param == "memory":
            return MemoryStore(now=lambda: NOW)
        return SQLiteStore(tmp_path / "store.db", now=lambda: NOW, poll_seconds=0.01)

    return make


def queue(name: str, namespace: str = "team-a", cq: str = "main") -> Manifest:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def test_create_sets_system_fields_and_get_returns_a_copy(make_store: Callable[[], Store]) -> None:
    async def scenario() -> None:
        store = make_store()
        created = await store.create(queue("q1"))
        meta = created["metadata"]
        assert meta["resourceVersion"] and meta["uid"] and meta["generation"] == 1
        assert meta["creationTimestamp"] == "2026-01-01T12:00:00Z"
        got = await store.get("LocalQueue", "team-a", "q1")
        got["spec"]["clusterQueue"] = "changed"
        again = await store.get("LocalQueue", "team-a", "q1")
        assert again["spec"]["clusterQueue"] == "main"
        with pytest.raises(AlreadyExists):
            await store.create(queue("q1"))
        with pytest.raises(NotFound):
            await store.get("LocalQueue", "team-a", "nope")

    run(scenario())


def test_namespaced_kinds_default_to_the_default_namespace(make_store: Callable[[], Store]) -> None:
    async def scenario() -> None:
        store = make_store()
        obj = queue("q1")
        del obj["metadata"]["namespace"]
        await store.create(obj)
        assert (await store.get("LocalQueue", "default", "q1"))["metadata"]["namespace"] == "default"

    run(scenario())


def test_versions_increase_globally_and_list_reports_the_latest(make_store: Callable[[], Store]) -> None:
    async def scenario() -> None:
        store = make_store()
        a = await store.create(queue("a"))
        b = await store.create(queue("b", namespace="team-b"))
        assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
        items, version = await store.list("LocalQueue")
        assert [i["metadata"]["name"] for i in items] == ["a", "b"]
        assert version == b["metadata"]["resourceVersion"]
        only_b, _ = await store.list("LocalQueue", "team-b")
        assert [i["metadata"]["name"] for i in only_b] == ["b"]

    run(scenario())


def test_a_stale_write_is_refused_with_conflict(make_store: Callable[[], Store]) -> None:
    async def scenario() -> None:
        store = make_store()
        first = await store.create(queue("q"))
        second = dict(first, spec={"clusterQueue": "other"})
        updated = await store.update(second)
        assert updated["metadata"]["generation"] == 2
        stale = dict(first, spec={"clusterQueue": "third"})
        with pytest.raises(Conflict):
            await store.update(stale)
        with pytest.raises(Conflict):
            await store.update_status(dict(first, status={"x": 1}))
        assert (await store.get("LocalQueue", "team-a", "q"))["spec"]["clusterQueue"] == "other"

    run(scenario())


def test_update_keeps_status_and_update_status_keeps_spec(make_store: Callable[[], Store]) -> None:
    async def scenario() -> None:
        store = make_store()
        created = await store.create(queue("q"))
        with_status = await store.update_status(dict(created, status={"pendingWorkloads": 3}, spec={}))
        assert with_status["spec"] == {"clusterQueue": "main"}
        assert with_status["metadata"]["generation"] == 1  # status writes never bump generation
        edited = dict(with_status, spec={"clusterQueue": "b"}, status={"pendingWorkloads": 0})
        after = await store.update(edited)
        assert after["status"] == {"pendingWorkloads": 3}
        assert after["spec"] == {"clusterQueue": "b"}

    run(scenario())


def test_delete_then_get_is_not_found(make_store: Callable[[], Store]) -> None:
    async def scenario() -> None:
        store = make_store()
        await store.create(queue("q"))
        await store.delete("LocalQueue", "team-a", "q")
        with pytest.raises(NotFound):
            await store.get("LocalQueue", "team-a", "q")
        with pytest.raises(NotFound):
            await store.delete("LocalQueue", "team-a", "q")

    run(scenario())


async def _take(events: AsyncIterator[WatchEvent], count: int) -> list[WatchEvent]:
    got: list[WatchEvent] = []
    async with asyncio.timeout(5):
        async for event in events:
            got.append(event)
            if len(got) == count:
                break
    return got


def test_watch_replays_after_a_version_and_follows_new_changes(make_store: Callable[[], Store]) -> None:
    async def scenario() -> None:
        store = make_store()
        first = await store.create(queue("a"))
        await store.create(
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "c"}, "spec": {}}
        )
        events = store.watch("LocalQueue", first["metadata"]["resourceVersion"])
        waiter = asyncio.create_task(_take(events, 3))
        await asyncio.sleep(0)
        b = await store.create(queue("b"))
        await store.update_status(dict(b, status={"pendingWorkloads": 1}))
        await store.delete("LocalQueue", "team-a", "a")
        got = await waiter
        assert [(e.type, e.object["metadata"]["name"]) for e in got] == [
            ("ADDED", "b"),
            ("MODIFIED", "b"),
            ("DELETED", "a"),
        ]
        versions = [int(e.resource_version) for e in got]
        assert versions == sorted(versions)

    run(scenario())
