"""The Kubernetes-mode policy recorder on the in-memory store: restarts, deletions, retention."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from pykueue.controllers import policy_recorder
from pykueue.controllers.policy_recorder import PolicyRecorder
from pykueue.store.base import Manifest, WatchEvent
from pykueue.store.memory import MemoryStore

NS = "kueue-system"
NOW = datetime(2026, 12, 1, 19, 45, tzinfo=UTC)


def cohort(name: str, weight: str, manager: str = "kubectl", at: str = "2026-12-01T19:00:00Z") -> Manifest:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {
            "name": name,
            "resourceVersion": "5",
            "managedFields": [
                {"manager": "old-tool", "operation": "Update", "time": "2026-01-01T00:00:00Z"},
                {"manager": manager, "operation": "Apply", "time": at},
            ],
        },
        "spec": {"fairSharing": {"weight": weight}},
        "status": {"x": 1},
    }


def recorder(store: MemoryStore, retention: int = 500) -> PolicyRecorder:
    return PolicyRecorder(store, NS, clock=lambda: NOW, retention=retention)


def kept(store: MemoryStore) -> list[tuple[int, str, str]]:
    revisions = asyncio.run(policy_recorder.load(store, NS))
    return [(r.rev, r.name, r.operation) for r in revisions]


def test_changes_while_down_are_recorded_once_and_unchanged_objects_not_at_all() -> None:
    store = MemoryStore()

    async def first_run() -> None:
        rec = recorder(store)
        await rec.start([cohort("a", "1"), cohort("b", "1")])
        rec.handle(WatchEvent("MODIFIED", {**cohort("a", "1"), "status": {"x": 2}}, "6"))  # status only
        rec.handle(WatchEvent("MODIFIED", cohort("a", "2", manager="kubectl-edit"), "7"))
        assert await rec.flush() == 3

    asyncio.run(first_run())
    assert kept(store) == [(1, "a", "create"), (2, "b", "create"), (3, "a", "update")]
    first = asyncio.run(policy_recorder.load(store, NS))
    assert first[2].who == "kubectl-edit (Apply)" and first[2].at == "2026-12-01T19:45:00Z"

    async def restart(current: list[Manifest]) -> int:
        rec = recorder(store)
        await rec.start(current)
        return await rec.flush()

    assert asyncio.run(restart([cohort("a", "2"), cohort("b", "1")])) == 0
    # While down: a changed weight, b deleted, c created.
    assert asyncio.run(restart([cohort("a", "3"), cohort("c", "1")])) == 3
    assert kept(store)[3:] == [(4, "a", "update"), (5, "c", "create"), (6, "b", "delete")]
    deleted = asyncio.run(policy_recorder.load(store, NS))[-1]
    assert deleted.who == policy_recorder.UNKNOWN_WHILE_DOWN and deleted.after is None


def test_retention_drops_the_oldest_but_never_the_latest_of_an_object_that_exists() -> None:
    store = MemoryStore()

    async def run() -> None:
        rec = recorder(store, retention=3)
        await rec.start([cohort("keep", "1")])  # rev 1: the only revision of "keep"
        for weight in ("1", "2", "3", "4"):
            rec.handle(WatchEvent("MODIFIED", cohort("busy", weight), "9"))
        rec.handle(WatchEvent("DELETED", cohort("busy", "4"), "10"))
        await rec.flush()

    asyncio.run(run())
    # Six revisions, three kept: "keep"'s only one, and the newest two of "busy".
    assert kept(store) == [(1, "keep", "create"), (5, "busy", "update"), (6, "busy", "delete")]
    assert kept(store)[-1][2] == "delete"


def test_a_deletion_seen_on_the_watch_names_no_user() -> None:
    store = MemoryStore()

    async def run() -> Any:
        rec = recorder(store)
        await rec.start([cohort("a", "1")])
        rec.handle(WatchEvent("DELETED", cohort("a", "1"), "8"))
        await rec.flush()
        return (await policy_recorder.load(store, NS))[-1]

    last = asyncio.run(run())
    assert (last.operation, last.who) == ("delete", policy_recorder.UNKNOWN_DELETER)
    assert policy_recorder.who_changed({"metadata": {}}) == "unknown (no managedFields)"


def test_the_user_of_the_admission_request_for_exactly_that_object_is_named() -> None:
    store = MemoryStore()

    def review(obj: Manifest, user: str) -> dict[str, Any]:
        return {"operation": "UPDATE", "namespace": "", "object": obj, "userInfo": {"username": user}}

    async def run() -> list[str]:
        rec = recorder(store)
        await rec.start([cohort("a", "1")])
        rec.note_request(review(cohort("a", "2"), "alice"))
        rec.note_request(review(cohort("a", "9"), "mallory"))  # asked for, never stored
        rec.handle(WatchEvent("MODIFIED", cohort("a", "2"), "8"))
        rec.handle(WatchEvent("MODIFIED", cohort("a", "3"), "9"))  # no request seen: managedFields
        await rec.flush()
        return [r.who for r in await policy_recorder.load(store, NS)]

    assert asyncio.run(run()) == ["kubectl (Apply)", "alice (admission request)", "kubectl (Apply)"]
