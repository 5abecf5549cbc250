"""An in-memory `Store`: the reference behaviour of every backend, and a test double for none.

It keeps one global, increasing resourceVersion (as etcd does), deep-copies
what goes in and out so callers can never alias stored state, and fans every
change out to the watchers of its kind. ``now`` is injected so tests and the
simulator control the timestamps it writes.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from pykueue.errors import AlreadyExists, Conflict, NotFound
from pykueue.store.base import Key, Manifest, WatchEvent, resource_version

NAMESPACED = frozenset({"LocalQueue", "Workload", "LimitRange", "Job", "Pod", "Lease"})


def _utc_now() -> datetime:
    return datetime.now(UTC)


class MemoryStore:
    """Objects in a dict, with versions and watches."""

    def __init__(self, now: Callable[[], datetime] = _utc_now) -> None:
        self._objects: dict[Key, Manifest] = {}
        self._version = 0
        self._now = now
        self._history: list[WatchEvent] = []
        self._watchers: list[tuple[str, asyncio.Queue[WatchEvent]]] = []

    # ----------------------------------------------------------------- reading

    async def get(self, kind: str, namespace: str, name: str) -> Manifest:
        obj = self._objects.get(Key(kind, namespace, name))
        if obj is None:
            raise NotFound(f"{Key(kind, namespace, name)} not found")
        return copy.deepcopy(obj)

    async def list(self, kind: str, namespace: str | None = None) -> tuple[list[Manifest], str]:
        items = [
            copy.deepcopy(obj)
            for key, obj in sorted(self._objects.items(), key=lambda item: str(item[0]))
            if key.kind == kind and (namespace is None or key.namespace == namespace)
        ]
        return items, str(self._version)

    # ----------------------------------------------------------------- writing

    async def create(self, obj: Manifest) -> Manifest:
        stored = copy.deepcopy(obj)
        key = Key.of(stored)
        if not key.name:
            raise NotFound("an object needs metadata.name")
        if key in self._objects:
            raise AlreadyExists(f"{key} already exists")
        meta = stored.setdefault("metadata", {})
        if key.kind in NAMESPACED and not meta.get("namespace"):
            meta["namespace"] = "default"
            key = Key.of(stored)
        meta["uid"] = meta.get("uid") or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{key}/{self._version + 1}"))
        meta.setdefault("creationTimestamp", self._now().strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta["generation"] = 1
        return self._write(key, stored, "ADDED")

    async def update(self, obj: Manifest) -> Manifest:
        key, current = self._current(obj)
        stored = copy.deepcopy(obj)
        stored["status"] = copy.deepcopy(current.get("status", {}))
        self._keep_system_fields(stored, current)
        if _spec_of(stored) != _spec_of(current):
            stored["metadata"]["generation"] = int(current["metadata"].get("generation", 1)) + 1
        return self._write(key, stored, "MODIFIED")

    async def update_status(self, obj: Manifest) -> Manifest:
        key, current = self._current(obj)
        stored = copy.deepcopy(current)
        stored["status"] = copy.deepcopy(obj.get("status", {}))
        return self._write(key, stored, "MODIFIED")

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        key = Key(kind, namespace, name)
        obj = self._objects.pop(key, None)
        if obj is None:
            raise NotFound(f"{key} not found")
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self._publish(WatchEvent("DELETED", copy.deepcopy(obj), str(self._version)))

    def _current(self, obj: Manifest) -> tuple[Key, Manifest]:
        key = Key.of(obj)
        current = self._objects.get(key)
        if current is None:
            raise NotFound(f"{key} not found")
        wanted = resource_version(obj)
        if wanted and wanted != resource_version(current):
            raise Conflict(f"{key}: the object has been modified (resourceVersion {wanted} is stale)")
        return key, current

    @staticmethod
    def _keep_system_fields(stored: Manifest, current: Manifest) -> None:
        meta = stored.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "generation"):
            if field in current["metadata"]:
                meta[field] = current["metadata"][field]

    def _write(self, key: Key, stored: Manifest, kind: Any) -> Manifest:
        self._version += 1
        stored["metadata"]["resourceVersion"] = str(self._version)
        self._objects[key] = stored
        self._publish(WatchEvent(kind, copy.deepcopy(stored), str(self._version)))
        return copy.deepcopy(stored)

    # ---------------------------------------------------------------- watching

    def _publish(self, event: WatchEvent) -> None:
        self._history.append(event)
        kind = event.object.get("kind")
        for watched, queue in self._watchers:
            if watched == kind:
                queue.put_nowait(event)

    async def watch(self, kind: str, since: str) -> AsyncIterator[WatchEvent]:
        queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
        after = int(since or 0)
        for event in self._history:
            if event.object.get("kind") == kind and int(event.resource_version) > after:
                queue.put_nowait(event)
        entry = (kind, queue)
        self._watchers.append(entry)
        try:
            while True:
                yield await queue.get()
        finally:
            self._watchers.remove(entry)


def _spec_of(obj: Manifest) -> Any:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
