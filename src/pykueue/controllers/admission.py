"""The admission controller: the engine, fed from a store, writing its decisions back.

    store ──list/watch──▶ informer cache ──parse──▶ engine State
                                                    │ run cycles until settled
    store ◀──update_status (Workload)───────────────┘

The store is the only source of truth. At start the controller lists every
kind and rebuilds the engine's state from it: a Workload whose status holds an
admission holds its quota again, so a crash or restart never admits a workload
twice nor leaks quota. Decisions are written as Workload status with the
resourceVersion last seen; a conflict means someone else wrote first, and the
next pass works from their version.

The controller never computes quota itself and never talks to jobs: job
adapters and the local executor react to the Workload status it writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pykueue.api import manifests
from pykueue.controllers import workload_status
from pykueue.controllers.queue_status import count_writes as _count
from pykueue.engine import intake, loading, scheduler
from pykueue.engine.config import EngineConfig
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload
from pykueue.errors import Conflict, InputError, NotFound
from pykueue.store.base import Key, Manifest, Store, WatchEvent, resource_version

log = logging.getLogger(__name__)

# Applied in this order at start, so that references resolve before their users.
KINDS = (
    "Namespace",
    "ResourceFlavor",
    "AdmissionCheck",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "WorkloadPriorityClass",
    "PriorityClass",
    "LimitRange",
    "Workload",
)
MAX_CYCLES_PER_PASS = 1000


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _version(obj: Manifest) -> int:
    text = resource_version(obj)
    return int(text) if text.isdigit() else 0


def _signature(wl: Workload, stored: Manifest) -> tuple[Any, ...]:
    """What a workload's desired status is built from, cheaply comparable."""
    admission = None
    if wl.admission is not None:
        admission = (
            wl.admission.cluster_queue,
            tuple(
                (ps.name, ps.count, tuple(ps.flavors.items()), tuple(ps.resource_usage.items()))
                for ps in wl.admission.pod_sets
            ),
        )
    conditions = tuple(
        (c.type, c.status, c.reason, c.message, c.last_transition) for c in wl.conditions.values()
    )
    return (resource_version(stored), admission, conditions, wl.requeue_count, wl.requeue_at)


def _reclaimable(obj: Manifest) -> Any:
    """Pods that finished and give their quota back: the one status field the engine reads."""
    return (obj.get("status") or {}).get("reclaimablePods")


@dataclass
class AdmissionController:
    """Keeps one engine state in step with one store."""

    store: Store
    config: EngineConfig = field(default_factory=EngineConfig)
    clock: Callable[[], datetime] = _utc_now
    state: State = field(init=False)
    cache: dict[Key, Manifest] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    rejected: dict[Key, str] = field(default_factory=dict)
    # Per workload, what its stored status was last found to agree with (see `write_back`).
    settled: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    write_concurrency: int = 16
    # Look at every workload on the next write-back, not only the touched ones.
    rescan: bool = True

    def __post_init__(self) -> None:
        self.state = State(config=self.config)

    # ------------------------------------------------------------------- sync

    async def sync(self) -> None:
        """Rebuild the engine state from everything stored now."""
        self.state = State(config=self.config)
        self.state.now = intake.micros(self.clock())
        self.cache.clear()
        self.settled.clear()
        self.rescan = True
        for kind in KINDS:
            items, version = await self.store.list(kind)
            self.versions[kind] = version
            for obj in items:
                self._apply(obj)

    def handle(self, event: WatchEvent) -> None:
        """Apply one watched change to the cache and the engine."""
        obj = event.object
        key = Key.of(obj)
        if event.type == "DELETED":
            self.cache.pop(key, None)
            self.rejected.pop(key, None)
            loading.delete(self.state, key.kind, key.namespace, key.name)
            return
        previous = self.cache.get(key)
        if previous is not None and _version(obj) <= _version(previous):
            return  # our own write echoed back, or an older version we already moved past
        if key.kind == "Workload" and previous is not None and self._only_status_changed(previous, obj):
            if workload_status.is_finished(obj):
                self.cache[key] = obj
                self._finish(key)
                return
            if _reclaimable(previous) == _reclaimable(obj):
                # Someone else's status write (ours come back with a version already cached):
                # compare it with the engine's view on the next write-back.
                self.cache[key] = obj
                self.state.touched.add(f"{key.namespace or 'default'}/{key.name}")
                return
        self._apply(obj)

    @staticmethod
    def _only_status_changed(old: Manifest, new: Manifest) -> bool:
        return old.get("spec") == new.get("spec") and old.get("metadata", {}).get("generation") == new.get(
            "metadata", {}
        ).get("generation")

    def _apply(self, obj: Manifest) -> None:
        key = Key.of(obj)
        self.cache[key] = obj
        try:
            parsed = manifests.parse_object(obj, source=str(key))
        except InputError as exc:
            # A stored object the engine cannot read is reported, never half-applied.
            self.rejected[key] = str(exc)
            log.warning("ignoring %s: %s", key, exc)
            return
        self.rejected.pop(key, None)
        if key.kind == "Workload" and workload_status.is_finished(obj):
            self._finish(key)
            return
        loading.apply(self.state, parsed)

    def _finish(self, key: Key) -> None:
        engine_key = f"{key.namespace or 'default'}/{key.name}"
        wl = self.state.workloads.get(engine_key)
        if wl is None:
            return
        if wl.admission is not None:
            self.state.finish(engine_key)
        else:
            self.state.delete_workload(engine_key)
        self.state.finished.pop(engine_key, None)  # nothing to remember: the store has it

    # -------------------------------------------------------------- reconcile

    async def reconcile(self) -> int:
        """Run the scheduler until it settles and write every changed Workload status."""
        self.state.advance_clock(intake.micros(self.clock()))
        for _ in range(MAX_CYCLES_PER_PASS):
            result = scheduler.run_cycle(self.state)
            if not result.changed:
                break
        return await self.write_back()

    async def write_back(self) -> int:
        """Write the status of every workload whose engine view differs from the store.

        Only the workloads the engine touched since the last write-back, or whose stored
        object changed, are looked at (``rescan`` asks for all of them once, a safety net
        the manager pulls now and then). Building a status document costs a deep copy; a
        cheap signature of what it is built from skips those that still agree. The writes
        go out ``write_concurrency`` at a time: each is one round trip to the API server,
        and a cycle that admits one head per queue has many of them.
        """
        if self.rescan:
            self.rescan = False
            candidates: list[str] = list(self.state.workloads)
        else:
            candidates = sorted(self.state.touched)
        self.state.touched.clear()
        updates = []
        for engine_key in candidates:
            wl = self.state.workloads.get(engine_key)
            if wl is None:
                continue
            key = Key("Workload", wl.namespace, wl.name)
            stored = self.cache.get(key)
            if stored is None:
                continue
            signature = _signature(wl, stored)
            if self.settled.get(engine_key) == signature:
                continue
            desired = workload_status.desired_status(wl, stored.get("status"))
            if desired == (stored.get("status") or {}):
                self.settled[engine_key] = signature
                continue
            updates.append((key, stored, desired, engine_key))
        if not updates:
            return 0
        gate = asyncio.Semaphore(self.write_concurrency)

        async def write(key: Key, stored: Manifest, desired: dict[str, Any], engine_key: str) -> int:
            async with gate:
                return await self._write_status(key, stored, desired, engine_key)

        return _count(await asyncio.gather(*(write(*update) for update in updates), return_exceptions=True))

    async def _write_status(
        self, key: Key, stored: Manifest, desired: dict[str, Any], engine_key: str
    ) -> int:
        update = dict(stored)
        update["status"] = desired
        try:
            written = await self.store.update_status(update)
        except Conflict:
            try:
                fresh = await self.store.get(key.kind, key.namespace, key.name)
            except NotFound:
                return 0
            self.handle(WatchEvent("MODIFIED", fresh, resource_version(fresh)))
            return 0
        except NotFound:
            loading.delete(self.state, "Workload", key.namespace, key.name)
            self.cache.pop(key, None)
            return 0
        self.cache[key] = written
        return 1

    # -------------------------------------------------------------------- run

    async def run(self, stop: asyncio.Event, resync_seconds: float = 1.0) -> None:
        """Sync, then follow every kind's changes and reconcile until ``stop`` is set."""
        await self.sync()
        await self.reconcile()
        events: asyncio.Queue[WatchEvent] = asyncio.Queue()
        watchers = [asyncio.create_task(self._follow(kind, events)) for kind in KINDS]
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    event = await asyncio.wait_for(events.get(), timeout=resync_seconds)
                    self.handle(event)
                    while not events.empty():
                        self.handle(events.get_nowait())
                await self.reconcile()
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def _follow(self, kind: str, events: asyncio.Queue[WatchEvent]) -> None:
        async for event in self.store.watch(kind, self.versions.get(kind, "0")):
            self.versions[kind] = event.resource_version
            await events.put(event)
