"""A cluster's queues and workloads, followed read-only, for `pykueue dashboard`.

    API server ──list/watch──▶ AdmissionController's cache and engine State
                               (never a scheduling cycle, never a write)

The view shows what the cluster's own controller decided and wrote, whichever it
is (pykueue's or upstream Kueue's): a Workload whose status holds an admission
holds its quota in the view's engine, its QuotaReserved condition says why it
waits, and the engine's queues, built from the same objects, give the positions.
The view runs `AdmissionController.sync` and `handle` only; `reconcile`, the one
step that decides and writes, is never called. Estimated starts are the ones the
controller wrote on the Workloads (`estimated_start`).

A controller keeps its own version of a Workload's status and ignores the echo of
its writes; the view has no version of its own, so every change of a Workload
replaces the view's copy with the stored one, status included.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from pykueue.engine import intake, loading
from pykueue.engine.state import State
from pykueue.kube import estimate_annotations
from pykueue.reconcilers.admission import KINDS, AdmissionController
from pykueue.store.base import Key, Manifest, Store, WatchEvent


@dataclass
class ClusterView:
    store: Store
    admission: AdmissionController = field(init=False)
    synced: bool = False

    def __post_init__(self) -> None:
        self.admission = AdmissionController(self.store)

    @property
    def state(self) -> State | None:
        return self.admission.state if self.synced else None

    def workloads(self) -> list[Manifest]:
        return [obj for key, obj in self.admission.cache.items() if key.kind == "Workload"]

    def estimated_start(self, workload_key: str) -> dict[str, str | None] | None:
        """A pending workload's estimated start, as the cluster's pykueue controller last wrote it.

        The view runs no estimator of its own (it would need the runtimes the controller
        learned); it reads the controller's ``pykueue.io/estimated-start`` annotation, which
        an upstream Kueue controller does not write.
        """
        namespace, _, name = workload_key.partition("/")
        obj = self.admission.cache.get(Key("Workload", namespace, name))
        wl = self.admission.state.workloads.get(workload_key)
        if obj is None or wl is None or wl.admission is not None:
            return None
        written = estimate_annotations.written(obj)
        return dict(written) if written is not None else None

    async def run(self, stop: asyncio.Event, interval: float = 1.0) -> None:
        """List everything, then follow every kind's changes until ``stop`` is set."""
        await self.admission.sync()
        self.synced = True
        events: asyncio.Queue[WatchEvent] = asyncio.Queue()
        watchers = [asyncio.create_task(self._follow(kind, events)) for kind in KINDS]
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    self._take(await asyncio.wait_for(events.get(), timeout=interval))
                    while not events.empty():
                        self._take(events.get_nowait())
                # Backoffs end with the clock, not with an event.
                self.admission.state.set_clock(intake.micros(self.admission.clock()))
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    def _take(self, event: WatchEvent) -> None:
        key = Key.of(event.object)
        if key.kind == "Workload" and event.type != "DELETED":
            # The stored status is the truth: forget the view's copy, then read it anew.
            loading.delete(self.admission.state, key.kind, key.namespace, key.name)
            self.admission.cache.pop(key, None)
        self.admission.handle(event)

    async def _follow(self, kind: str, events: asyncio.Queue[WatchEvent]) -> None:
        async for event in self.store.watch(kind, self.admission.versions.get(kind, "0")):
            self.admission.versions[kind] = event.resource_version
            await events.put(event)
