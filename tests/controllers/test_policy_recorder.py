"""The Kubernetes-mode policy recorder on the in-memory store: restarts, deletions, retention."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from pykueue.reconcilers import policy_recorder
from pykueue.reconcilers.policy_recorder import PolicyRecorder
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


def versioned(name: str, weight: str, generation: int, uid: str = "u1", **meta: Any) -> Manifest:
    obj = cohort(name, weight)
    obj["metadata"] = {**obj["metadata"], "generation": generation, "uid": uid, **meta}
    return obj


def test_events_of_an_unchanged_generation_are_skipped_but_metadata_and_recreation_count() -> None:
    store = MemoryStore()

    async def run() -> None:
        rec = recorder(store)
        await rec.start([versioned("a", "1", 1)])
        # The queue's own status writes: same generation, same metadata.
        for n in range(3):
            rec.handle(WatchEvent("MODIFIED", {**versioned("a", "1", 1), "status": {"x": n}}, str(10 + n)))
        rec.handle(WatchEvent("MODIFIED", versioned("a", "1", 1, labels={"team": "x"}), "20"))  # label only
        rec.handle(WatchEvent("MODIFIED", versioned("a", "2", 2, labels={"team": "x"}), "21"))  # spec
        rec.handle(WatchEvent("DELETED", versioned("a", "2", 2, labels={"team": "x"}), "22"))
        rec.handle(WatchEvent("ADDED", versioned("a", "2", 1, uid="u2"), "23"))  # created again
        await rec.flush()

    asyncio.run(run())
    assert kept(store) == [
        (1, "a", "create"),
        (2, "a", "update"),
        (3, "a", "update"),
        (4, "a", "delete"),
        (5, "a", "create"),
    ]


class RefusingStore(MemoryStore):
    """Refuses ConfigMap creates until told otherwise (a namespace that does not exist yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = True
        self.tries = 0

    async def create(self, obj: Manifest) -> Manifest:
        if obj.get("kind") == "ConfigMap":
            self.tries += 1
            if self.refuse:
                raise policy_recorder.NotFound(f'namespaces "{NS}" not found')
        return await super().create(obj)


def test_a_revision_that_cannot_be_written_is_retried_after_a_while_not_every_pass() -> None:
    store = RefusingStore()
    now = [NOW]
    rec = PolicyRecorder(store, NS, clock=lambda: now[0])

    async def run() -> list[int]:
        await rec.start([cohort("a", "1")])
        written = [await rec.flush() for _ in range(5)]  # five passes within a second
        assert store.tries == 1
        now[0] = NOW + timedelta(seconds=policy_recorder.RETRY_SECONDS)
        store.refuse = False
        written.append(await rec.flush())
        return written

    assert asyncio.run(run()) == [0, 0, 0, 0, 0, 1]
    assert store.tries == 2 and kept(store) == [(1, "a", "create")]
