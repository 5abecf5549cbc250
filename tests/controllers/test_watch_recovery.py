"""A watch that fails for good (its version gone) is replaced by a fresh list, not retried for ever."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from pykueue.errors import Unavailable
from pykueue.reconcilers.manager import Manager
from pykueue.store.base import WatchEvent
from pykueue.store.memory import MemoryStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class ForgetfulStore(MemoryStore):
    """Refuses every watch from a version below ``floor``, as a trimmed change log does."""

    def __init__(self) -> None:
        super().__init__(now=lambda: NOW)
        self.floor = 0
        self.refused = 0

    async def watch(self, kind: str, since: str) -> AsyncIterator[WatchEvent]:
        if int(since or 0) < self.floor:
            self.refused += 1
            raise Unavailable(f"version {since} of {kind} is gone")
        async for event in super().watch(kind, since):
            yield event


def _flavor(name: str) -> dict[str, object]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}}


def test_a_gone_watch_version_is_replaced_by_a_fresh_list() -> None:
    async def scenario() -> None:
        store = ForgetfulStore()
        await store.create(_flavor("kept"))
        await store.create(_flavor("dropped"))
        manager = Manager(store, clock=lambda: NOW)
        await manager.admission.sync()
        assert set(manager.admission.state.flavors) == {"kept", "dropped"}
        await store.delete("ResourceFlavor", "", "dropped")
        await store.create(_flavor("added"))
        store.floor = 10**6  # every version the manager knows is gone
        events: asyncio.Queue[WatchEvent] = asyncio.Queue()
        follower = asyncio.create_task(manager._follow("ResourceFlavor", "1", events))
        seen: list[tuple[str, str]] = []
        try:
            while {("MODIFIED", "added"), ("DELETED", "dropped")} - set(seen):
                event = await asyncio.wait_for(events.get(), timeout=10)
                seen.append((event.type, event.object["metadata"]["name"]))
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
        assert store.refused >= 1
        assert ("MODIFIED", "kept") in seen

    asyncio.run(scenario())
