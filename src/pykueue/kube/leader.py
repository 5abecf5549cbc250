"""Leader election over a coordination.k8s.io/v1 Lease, and a store that only the leader may write.

    replica A ──get/create/update Lease (resourceVersion)──▶ API server ◀── replica B
       │ leading: renew every retry_period                     standby: retry every retry_period,
       │ no successful renew within renew_deadline → lost      take over once the record has not
       ▼                                                       changed for lease_duration
    FencedStore: every write asks `LeaderElector.may_write()` first

The algorithm is client-go's. A standby never compares timestamps written by
another machine: it remembers *when it last saw the record change* on its own
monotonic clock and takes over only after ``lease_duration`` of silence, so
clock skew between replicas does not matter. Every change of the Lease is an
update at the resourceVersion read, so two standbys racing for an expired
Lease agree on one winner.

A leader that cannot renew stops writing *before* anyone can take over: it
counts its lease as valid only until ``renew_deadline`` (10 s) after its last
successful renew, while a standby waits ``lease_duration`` (15 s) after its
last observed change. `FencedStore` checks this on every write, so even a write
queued in the middle of a reconcile pass is refused (`NotLeader`), and the
elector cancels the leading task as soon as the deadline passes.

On a graceful stop the leader releases the Lease (empties ``holderIdentity``),
so a standby takes over at its next retry instead of after ``lease_duration``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pykueue.errors import AlreadyExists, Conflict, NotFound, PykueueError, StoreError
from pykueue.store.base import Manifest, Store, WatchEvent

log = logging.getLogger(__name__)

DEFAULT_LEASE_NAME = "pykueue-controller-leader"


class NotLeader(StoreError):
    """A write was refused because this replica does not hold the lease (any more)."""


def default_identity() -> str:
    """The pod name in a cluster (``POD_NAME`` or the hostname), plus the pid outside one."""
    pod = os.environ.get("POD_NAME")
    if pod:
        return pod
    return f"{socket.gethostname()}_{os.getpid()}"


def _micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(lease: Manifest) -> tuple[object, object]:
    # Any write changes the resourceVersion, even one within the same microsecond.
    return (lease.get("metadata", {}).get("resourceVersion"), lease.get("spec"))


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """client-go's defaults, and upstream Kueue's: 15 s lease, 10 s renew deadline, 2 s retry."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")


@dataclass
class LeaderElector:
    """Acquires and renews one Lease; runs a task while it leads."""

    store: Store
    namespace: str
    name: str = DEFAULT_LEASE_NAME
    identity: str = field(default_factory=default_identity)
    timing: LeaseTiming = field(default_factory=LeaseTiming)
    monotonic: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    # The last record seen and when (monotonic) it last changed.
    _observed: Manifest | None = field(default=None, init=False, repr=False)
    _observed_at: float = field(default=0.0, init=False, repr=False)
    # When this replica last renewed its own lease successfully; None while not leading.
    _renewed_at: float | None = field(default=None, init=False, repr=False)
    transitions: int = field(default=0, init=False)

    # --------------------------------------------------------------- queries

    @property
    def leading(self) -> bool:
        return self.may_write()

    @property
    def standing_by(self) -> bool:
        """Not leading, and the API server answered with someone's lease (not merely unreachable)."""
        return not self.leading and self._observed is not None

    def may_write(self) -> bool:
        """True while this replica holds the lease and its last renew is within the deadline."""
        if self._renewed_at is None:
            return False
        return self.monotonic() - self._renewed_at < self.timing.renew_deadline

    def holder(self) -> str:
        """Who holds the lease according to the last record seen ("" for nobody)."""
        spec = (self._observed or {}).get("spec") or {}
        return str(spec.get("holderIdentity") or "")

    # ------------------------------------------------------------- one step

    def _lease(self, previous: Manifest | None, acquire: bool) -> Manifest:
        now = _micro_time(self.wall_clock())
        spec: dict[str, Any] = dict((previous or {}).get("spec") or {})
        transitions = int(spec.get("leaseTransitions") or 0)
        if acquire:
            spec["acquireTime"] = now
            if previous is not None:
                transitions += 1
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.timing.lease_duration),
            renewTime=now,
            leaseTransitions=transitions,
        )
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if previous is not None:
            meta = {**previous.get("metadata", {}), **meta}
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _observe(self, lease: Manifest) -> None:
        if self._observed is None or _record(self._observed) != _record(lease):
            self._observed_at = self.monotonic()
        self._observed = lease

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, as client-go's tryAcquireOrRenew: True when we hold the lease afterwards."""
        try:
            current: Manifest | None = await self.store.get("Lease", self.namespace, self.name)
        except NotFound:
            current = None
        if current is None:
            try:
                created = await self.store.create(self._lease(None, acquire=True))
            except (AlreadyExists, Conflict):
                return False
            self._won(created)
            return True
        self._observe(current)
        holder = self.holder()
        recent = self.monotonic() - self._observed_at < self.timing.lease_duration
        if holder and holder != self.identity and recent:
            return False  # someone else's lease, renewed recently enough
        try:
            written = await self.store.update(self._lease(current, acquire=holder != self.identity))
        except (Conflict, NotFound):
            return False
        self._won(written)
        return True

    def _won(self, lease: Manifest) -> None:
        if self._renewed_at is None:
            self.transitions += 1
            log.info("%s acquired lease %s/%s", self.identity, self.namespace, self.name)
        self._observe(lease)
        self._renewed_at = self.monotonic()

    async def release(self) -> None:
        """Give the lease up (graceful stop), so a standby takes over at its next retry."""
        was_leading = self._renewed_at is not None
        self._renewed_at = None
        if not was_leading:
            return
        with contextlib.suppress(PykueueError):
            current = await self.store.get("Lease", self.namespace, self.name)
            spec = dict(current.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time(self.wall_clock()))
            await self.store.update({**current, "spec": spec})
            log.info("%s released lease %s/%s", self.identity, self.namespace, self.name)

    # ------------------------------------------------------------------ run

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except PykueueError as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    async def run(self, lead: Callable[[], Awaitable[None]], stop: asyncio.Event) -> bool:
        """Wait for the lease, run ``lead()`` while holding it; True when stopped, False when lost.

        ``lead`` is cancelled the moment the lease is lost. The lease is released when
        ``stop`` is set or ``lead`` returns.
        """
        while not stop.is_set():
            if await self._attempt():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.timing.retry_period)
        if stop.is_set():
            return True
        task = asyncio.ensure_future(lead())
        stopping = asyncio.ensure_future(stop.wait())
        lost = False
        try:
            while not task.done() and not stop.is_set():
                # Renew every retry_period; stop leading when the deadline passes without one.
                renewed_at = self._renewed_at or 0.0
                until_deadline = renewed_at + self.timing.renew_deadline - self.monotonic()
                wait = max(0.0, min(self.timing.retry_period, until_deadline))
                await asyncio.wait({task, stopping}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                if task.done() or stop.is_set():
                    break
                if not self.may_write():
                    lost = True
                    break
                if not await self._attempt() and not self.may_write():
                    lost = True
                    break
                if self.holder() != self.identity:
                    lost = True  # someone else holds it (we were too slow): stop at once
                    break
        finally:
            stopping.cancel()
            if lost:
                log.error("%s lost lease %s/%s; stopping", self.identity, self.namespace, self.name)
                self._renewed_at = None
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if not lost:
                await self.release()
        return not lost


@dataclass
class FencedStore:
    """A `Store` whose writes go through only while ``may_write()`` says so; reads always do."""

    inner: Store
    may_write: Callable[[], bool]

    def _check(self, what: str) -> None:
        if not self.may_write():
            raise NotLeader(f"not the leader: refusing {what}")

    async def get(self, kind: str, namespace: str, name: str) -> Manifest:
        return await self.inner.get(kind, namespace, name)

    async def list(self, kind: str, namespace: str | None = None) -> tuple[list[Manifest], str]:
        return await self.inner.list(kind, namespace)

    def watch(self, kind: str, since: str) -> AsyncIterator[WatchEvent]:
        return self.inner.watch(kind, since)

    async def create(self, obj: Manifest) -> Manifest:
        self._check(f"create {obj.get('kind')}")
        return await self.inner.create(obj)

    async def update(self, obj: Manifest) -> Manifest:
        self._check(f"update {obj.get('kind')}")
        return await self.inner.update(obj)

    async def update_status(self, obj: Manifest) -> Manifest:
        self._check(f"update {obj.get('kind')} status")
        return await self.inner.update_status(obj)

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        self._check(f"delete {kind}")
        await self.inner.delete(kind, namespace, name)

    def __getattr__(self, name: str) -> Any:
        # Anything else the inner store offers (list_selected, request, config, close ...).
        return getattr(self.inner, name)
