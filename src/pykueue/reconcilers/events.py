"""Kubernetes Events on Workloads and jobs, with upstream's reasons, so `kubectl describe` tells the story.

    on a Workload   QuotaReserved, Admitted, Pending (Warning), Preempted,
                    MaximumExecutionTimeExceeded (Warning),
                    EvictedDueTo<Reason>[DueTo<UnderlyingCause>], PodsReady
    on a job        CreatedWorkload, Started, Suspended, Stopped, FinishedWorkload, DeletedWorkload

Each names the component that reports it as upstream's do: the scheduler's decisions on a
Workload ``kueue-admission``, a job's events its framework's job reconciler
(``<framework>-kueue-controller``, e.g. ``batch/job-kueue-controller``), and the deletion of a
finished Workload the workload controller (``kueue-workload-controller``).

Events never hold a decision back and never flood the API server, as
client-go's event broadcaster: they are written in the background, one at a
time and in order, so a busy API server that answers slowly gets fewer; at
most ``queue_limit`` wait, and one more is dropped; the same reason and
message for the same object within ten minutes is written once; each object
may have a burst of 25 events, then one every five minutes (the broadcaster's
spam filter); and all events together are limited to ``qps`` (``burst`` at
once). An event that cannot be written is dropped (it is a record, not state)
and counted in ``dropped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pykueue.engine import events as engine_events
from pykueue.engine import execution_time
from pykueue.engine.events import Event
from pykueue.engine.state import State
from pykueue.errors import StoreError
from pykueue.store.base import Key, Manifest, Store

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
DEDUP_SECONDS = 600.0
PER_OBJECT_BURST = 25
PER_OBJECT_REFILL_SECONDS = 300.0
MAX_MESSAGE = 1024
REMEMBERED = 10_000  # objects whose recent events are remembered, at most
# Upstream's event recorders (cmd/kueue/main.go, pkg/controller/core, jobframework/setup.go).
ADMISSION = "kueue-admission"
WORKLOAD_CONTROLLER = "kueue-workload-controller"


def job_controller(framework: str) -> str:
    """The component of a job reconciler's events: upstream names it after the framework."""
    return f"{framework}-kueue-controller"


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class EventRecorder:
    """Writes core/v1 Events about objects through a store, rate-limited."""

    store: Store
    component: str = ADMISSION
    qps: float = 10.0
    burst: int = 50
    # Events waiting for the writer, at most (client-go's broadcaster keeps 1,000 too).
    queue_limit: int = 1000
    clock: Callable[[], float] = time.monotonic
    dropped: int = 0
    written: int = 0
    _global: _Bucket | None = None
    _per_object: dict[str, _Bucket] = field(default_factory=dict)
    _recent: dict[tuple[str, str, str], float] = field(default_factory=dict)
    _queue: deque[Manifest] = field(default_factory=deque)
    _writer: asyncio.Task[None] | None = None
    _in_flight: bool = False

    def record(self, obj: Manifest, kind: str, reason: str, message: str, component: str = "") -> bool:
        """Queue one event about ``obj`` (reported by ``component``, else the recorder's);
        False when a limit or the dedup dropped it."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or Key.of(obj))
        now = self.clock()
        fingerprint = (uid, reason, message)
        if now - self._recent.get(fingerprint, -DEDUP_SECONDS - 1) < DEDUP_SECONDS:
            return False
        if len(self._queue) >= self.queue_limit or not self._take(uid, now):
            self.dropped += 1
            return False
        self._recent[fingerprint] = now
        self._forget_old(now)
        self._queue.append(self._event(obj, kind, reason, message, component or self.component))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_queued())
        return True

    def _take(self, uid: str, now: float) -> bool:
        if self._global is None:
            self._global = _Bucket(float(self.burst), now)
        mine = self._per_object.setdefault(uid, _Bucket(float(PER_OBJECT_BURST), now))
        _refill(self._global, now, self.qps, self.burst)
        _refill(mine, now, 1.0 / PER_OBJECT_REFILL_SECONDS, PER_OBJECT_BURST)
        if self._global.tokens < 1 or mine.tokens < 1:
            return False
        self._global.tokens -= 1
        mine.tokens -= 1
        return True

    def _forget_old(self, now: float) -> None:
        if len(self._recent) > REMEMBERED:
            self._recent = {k: at for k, at in self._recent.items() if now - at < DEDUP_SECONDS}
        if len(self._per_object) > REMEMBERED:
            self._per_object = {k: b for k, b in self._per_object.items() if b.tokens < PER_OBJECT_BURST - 1}

    def _event(self, obj: Manifest, kind: str, reason: str, message: str, component: str) -> Manifest:
        meta = obj.get("metadata") or {}
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name', 'object')}.{secrets.token_hex(8)}",
                "namespace": meta.get("namespace") or "default",
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "name": meta.get("name", ""),
                "namespace": meta.get("namespace") or "default",
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "type": kind,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

    async def _write_queued(self) -> None:
        try:
            while self._queue:
                event = self._queue.popleft()
                self._in_flight = True  # `close` counts it if it never comes back
                try:
                    await self.store.create(event)
                    self.written += 1
                except StoreError as exc:
                    self.dropped += 1
                    log.debug("event %s not written: %s", event["reason"], exc)
                self._in_flight = False
        finally:
            self._writer = None

    async def drain(self) -> None:
        """Wait until every queued event is written or dropped."""
        while self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    async def close(self, grace_seconds: float = 2.0) -> None:
        """On the way out: write what is queued for a moment, then drop the rest, so that no
        write is left pending when the event loop ends (a later `record` starts again)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.drain(), grace_seconds)
        writer = self._writer
        if writer is not None:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        self.dropped += len(self._queue) + int(self._in_flight)
        self._queue.clear()
        self._in_flight = False
        self._writer = None


def _refill(bucket: _Bucket, now: float, rate: float, cap: int) -> None:
    bucket.tokens = min(float(cap), bucket.tokens + (now - bucket.at) * rate)
    bucket.at = now


def workload_events(event: Event) -> list[tuple[str, str, str]]:
    """The Kubernetes Events (type, reason, message) upstream records for an engine decision."""
    if event.type == engine_events.ADMITTED:
        # Upstream's scheduler records QuotaReserved for every reservation, and Admitted
        # too when no admission check is left to wait for.
        reserved = (NORMAL, "QuotaReserved", event.message)
        return [reserved, (NORMAL, "Admitted", event.message)] if event.reason == "Admitted" else [reserved]
    if event.type == engine_events.CHECKS_PASSED:
        return [(NORMAL, "Admitted", event.message)]
    if event.type == engine_events.PENDING:
        return [(WARNING, "Pending", event.message)]
    if event.type == engine_events.PREEMPTED:
        return [(NORMAL, "Preempted", event.message)]
    if event.type == engine_events.EVICTED:
        reason = f"EvictedDueTo{event.reason or 'Eviction'}"
        if event.reason == "Deactivated" and event.underlying_cause:
            # Only a deactivation names its cause in the reason (WaitForStart and
            # WaitForRecovery are metric labels, never part of an event's reason).
            reason = f"{reason}DueTo{event.underlying_cause}"
        return [(NORMAL, reason, event.message)]
    if event.type == engine_events.PODS_READY:
        return [(NORMAL, "PodsReady", event.message)]
    if event.type == execution_time.EXCEEDED:
        return [(WARNING, execution_time.EXCEEDED, event.message)]
    return []


def record_decisions(recorder: EventRecorder, state: State, stored: Callable[[str], Manifest | None]) -> None:
    """One event per decision of the pass (``stored`` finds the Workload object by engine key)."""
    for event in state.events:
        described = workload_events(event)
        obj = stored(event.workload) if described else None
        if obj is None:
            continue
        for kind, reason, message in described:
            recorder.record(obj, kind, reason, message)
