"""Writes ClusterQueue, LocalQueue and Cohort status from the engine, only when it changes.

The documents come from `pykueue.engine.status` (upstream's shape: pending,
reserving and admitted counts, flavorsReservation, flavorsUsage, the ``Active``
condition, fairSharing). This module only turns them into writes:

* a condition keeps its ``lastTransitionTime`` while its status and reason stay the
  same, so an unchanged queue compares equal and costs no write;
* fields of the stored status the engine does not produce are kept (other writers
  own them);
* the object written goes back into the caller's cache at once, so the next pass
  compares against it and the watch event it causes is recognised as seen;
* a write that waited for a free slot is built again from the engine's view when it
  goes: a thousand new queues queue a thousand first statuses, and a queue that turned
  busy meanwhile must not be reported idle (upstream's scheduler-performance runner
  ends its run when every ClusterQueue's status says idle).

Reading a status from the engine is cheap; the API server is not, which is why a
pass writes nothing when nothing changed, and why one object's status is written at
most once per ``min_interval_seconds`` (a busy queue changes its counts on every
pass; the latest counts go out on the first pass after the interval, so nothing is
lost, only coalesced). The writes of one pass go out together, a few at a time.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pykueue.engine import status as engine_status
from pykueue.engine.state import State
from pykueue.errors import Conflict, NotFound
from pykueue.reconcilers.background import BackgroundWrites, count_writes
from pykueue.store.base import Key, Manifest, Store, version_number

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def merge_status(stored: Manifest | None, desired: Manifest, generation: Any, now: str) -> Manifest:
    """``desired`` laid over ``stored``, with condition times kept while nothing changed.

    A new document that shares what it keeps with ``stored`` and ``desired`` (neither is
    changed here, nor is the result changed after): a busy cluster merges a thousand
    queue statuses per pass, and copying them deeply was most of that cost.
    """
    result = dict(stored or {})
    old_conditions = {c.get("type"): c for c in result.get("conditions") or []}
    for name, value in desired.items():
        if name != "conditions":
            result[name] = value
    if "conditions" in desired:
        conditions = []
        for cond in desired["conditions"]:
            old = old_conditions.pop(cond["type"], None)
            same = (
                old is not None
                and old.get("status") == cond["status"]
                and old.get("reason") == cond["reason"]
            )
            merged = dict(cond)
            merged["lastTransitionTime"] = old["lastTransitionTime"] if same and old else now
            if generation is not None:
                merged["observedGeneration"] = generation
            conditions.append(merged)
        conditions.extend(old_conditions.values())
        result["conditions"] = conditions
    return result


# Queue kinds whose stored object the engine refused get a condition saying so.
INVALID_REPORTED = frozenset({"ClusterQueue", "LocalQueue"})
INVALID_REASON = "Invalid"


def invalid_status(desired: Manifest | None, problem: str) -> Manifest:
    """``Active=False`` (reason ``Invalid``) for a queue whose stored spec the controller refused.

    Without the validating webhook (a controller run outside the cluster) the API server
    accepts specs only upstream's webhook refuses (a lendingLimit above the nominal quota,
    a resource in two groups...). The controller leaves such a spec out; an earlier valid
    spec of the same queue, if it had one, stays in effect, and the message says so.
    """
    status = copy.deepcopy(desired) if desired is not None else {}
    message = f"the spec is invalid: {problem}"
    if desired is not None:
        message += "; the last valid spec stays in effect"
    others = [c for c in status.get("conditions") or [] if c.get("type") != "Active"]
    active = {"type": "Active", "status": "False", "reason": INVALID_REASON, "message": message[:32768]}
    status["conditions"] = [active, *others]
    return status


_KIND_ORDER = {"ClusterQueue": 0, "Cohort": 1, "LocalQueue": 2}


def _busy(status: Manifest) -> bool:
    return bool(status.get("pendingWorkloads") or status.get("reservingWorkloads"))


def _active(status: Manifest) -> str:
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Active":
            return str(cond.get("status"))
    return ""


def _is_news(stored: Manifest, desired: Manifest) -> bool:
    """A first status, an Active change, or idle <-> busy: what a reader acts on."""
    return not stored or _active(stored) != _active(desired) or _busy(stored) != _busy(desired)


def _news_rank(stored: Manifest, desired: Manifest) -> int:
    """Which news goes first: a changed ``Active``, a queue turning busy, one turning idle,
    then a new idle queue's first status (a thousand new queues must not hold back the
    news of the few that got work)."""
    if stored and _active(stored) != _active(desired):
        return 0
    if _busy(desired):
        return 1
    return 2 if stored else 3


def _queue_keys(state: State, made: dict[tuple[str, str], Key]) -> list[Key]:
    """The queue objects the engine knows (the cache also holds thousands of workloads).

    ``made`` keeps the keys of earlier passes: a thousand queues are listed every pass,
    and making a key costs more than finding it.
    """
    keys = []
    for kind, names in (
        ("ClusterQueue", state.cluster_queues),
        ("LocalQueue", state.local_queues),
        ("Cohort", state.cohorts),
    ):
        for name in names:
            key = made.get((kind, name))
            if key is None:
                namespace, _, local = name.rpartition("/")
                key = made[(kind, name)] = Key(kind, namespace, local)
            keys.append(key)
    return keys


@dataclass
class QueueStatusWriter:
    """Brings the stored status of every queue object in line with the engine's view."""

    store: Store
    clock: Callable[[], datetime] = _utc_now
    min_interval_seconds: float = 2.0
    concurrency: int = 8
    monotonic: Callable[[], float] = time.monotonic
    # Write in the background (the Kubernetes manager): a pass does not wait for them.
    background: bool = False
    # Writes of changed counts a second, all queues together (news always goes; see
    # `_within_budget`); 0: no limit. Upstream writes queue status with one worker per kind,
    # one request at a time: about 15 a second for both kinds in its baseline shape here.
    max_writes_per_second: float = 10.0
    _written_at: dict[Key, float] = field(default_factory=dict)
    # When a queue was last written or found unchanged (the later of the two).
    _looked_at: dict[Key, float] = field(default_factory=dict)
    _keys: dict[tuple[str, str], Key] = field(default_factory=dict)
    # The queue objects in the order they were last looked at (oldest first), so a pass finds
    # the due ones at the front instead of checking thousands of queues; `_listed` is the
    # engine's set of queues when it was last listed (`_list`), `_ordered` what `_order` holds.
    _order: deque[Key] = field(default_factory=deque)
    _ordered: set[Key] = field(default_factory=set)
    _listed: set[Key] = field(default_factory=set)
    _listed_shape: tuple[int, int, int] = (-1, -1, -1)
    _listed_at: float = float("-inf")
    _allowance: float = 50.0
    _allowance_at: float | None = None
    _in_flight: set[Key] = field(default_factory=set)
    _writing: BackgroundWrites = field(default_factory=lambda: BackgroundWrites("queue status"))
    _semaphore: asyncio.Semaphore | None = None
    _semaphore_loop: asyncio.AbstractEventLoop | None = None

    def desired(self, state: State, key: Key) -> Manifest | None:
        return self._desired(state, key, {})

    @staticmethod
    def _desired(state: State, key: Key, local: dict[str, Manifest]) -> Manifest | None:
        if key.kind == "ClusterQueue" and key.name in state.cluster_queues:
            return engine_status.cluster_queue_status(state, key.name)
        name = f"{key.namespace}/{key.name}"
        if key.kind == "LocalQueue" and name in state.local_queues:
            return local.get(name) or engine_status.local_queue_status(state, name)
        if key.kind == "Cohort" and key.name in state.cohorts:
            return engine_status.cohort_status(state, key.name) or None
        return None

    async def write(
        self, state: State, cache: MutableMapping[Key, Manifest], rejected: Mapping[Key, str] | None = None
    ) -> int:
        """Write every changed status that is due; the written objects replace the cached ones.

        A queue whose status was written, or found unchanged, less than ``min_interval_seconds``
        ago is not looked at: its counts change on every pass of a busy cluster, and computing
        them is not free either (the LocalQueues' come from one look at every pending workload).
        """
        now = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        at = self.monotonic()
        due = at - self.min_interval_seconds
        rejected = {k: v for k, v in (rejected or {}).items() if k.kind in INVALID_REPORTED}
        self._list(state, at)
        keys = self._due(due, cache)
        looked_at, in_flight, never = self._looked_at, self._in_flight, float("-inf")
        keys.extend(
            key
            for key in rejected
            if key not in self._listed
            and looked_at.get(key, never) <= due
            and key not in in_flight
            and key in cache
        )
        local = engine_status.local_queue_statuses(
            state, [f"{key.namespace}/{key.name}" for key in keys if key.kind == "LocalQueue"]
        )
        changed = []
        for key in keys:
            self._looked_at[key] = at
            update = self._update(state, key, cache, rejected, local, now)
            if update is not None:
                changed.append((key, update))
        updates = self._within_budget(changed, cache, at)
        self._in_flight.update(key for key, _ in updates)

        def again(key: Key) -> Manifest | None:
            """The update of ``key`` from the engine's view now (None: nothing to write)."""
            stamp = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
            return self._update(state, key, cache, rejected, {}, stamp)

        if self.background:
            for key, update in updates:
                self._writing.start(self._write(key, update, cache, again))
            return len(updates)
        results = await asyncio.gather(
            *(self._write(key, update, cache, again) for key, update in updates), return_exceptions=True
        )
        return count_writes(results)

    def _list(self, state: State, at: float) -> None:
        """Learn the engine's queues: when their numbers change, and every `min_interval_seconds`
        (a deletion and a creation in one pass leave the numbers as they were)."""
        shape = (len(state.cluster_queues), len(state.local_queues), len(state.cohorts))
        if shape == self._listed_shape and at - self._listed_at < self.min_interval_seconds:
            return
        keys = _queue_keys(state, self._keys)
        self._listed, self._listed_shape, self._listed_at = set(keys), shape, at
        new = [key for key in keys if key not in self._ordered]
        self._ordered.update(new)
        self._order.extendleft(reversed(new))  # never looked at: due now

    def _due(self, due: float, cache: Mapping[Key, Manifest]) -> list[Key]:
        """The listed queues last looked at by ``due``, in that order; those being written or
        not yet in the cache are kept at the front for the next pass."""
        order, looked_at, never = self._order, self._looked_at, float("-inf")
        keys: list[Key] = []
        waiting: list[Key] = []
        while order and looked_at.get(order[0], never) <= due:
            key = order.popleft()
            if key not in self._listed:
                self._ordered.discard(key)  # gone from the engine
            elif key in self._in_flight or key not in cache:
                waiting.append(key)
            else:
                keys.append(key)
        order.extend(keys)  # looked at in this pass: due again last
        order.extendleft(reversed(waiting))
        return keys

    def _update(
        self,
        state: State,
        key: Key,
        cache: Mapping[Key, Manifest],
        rejected: Mapping[Key, str],
        local: dict[str, Manifest],
        now: str,
    ) -> Manifest | None:
        """The stored object with the engine's status laid over it; None when that changes nothing."""
        stored = cache.get(key)
        if stored is None:
            return None
        desired = self._desired(state, key, local)
        if key in rejected:
            desired = invalid_status(desired, rejected[key])
        if desired is None:
            return None
        generation = (stored.get("metadata") or {}).get("generation")
        status = merge_status(stored.get("status"), desired, generation, now)
        if status == (stored.get("status") or {}):
            return None
        return {**stored, "status": status}

    def _within_budget(
        self, changed: list[tuple[Key, Manifest]], cache: MutableMapping[Key, Manifest], at: float
    ) -> list[tuple[Key, Manifest]]:
        """The writes to send now: those that tell news first, then the rest within the budget.

        News is a queue's first status, its ``Active`` condition changing, or it going from
        idle (nothing pending, nothing reserving) to busy or back; those always go, in the
        order of `_news_rank` (with at most ``concurrency`` writes in flight, the order in
        which they wait is the order in which they go). Other
        changes (counts, usage) share ``max_writes_per_second``, ClusterQueues first, the
        longest unwritten first; the rest wait for the queue's next turn. A thousand queues
        of a busy cluster would otherwise keep the API server busy with their counts.
        """
        if self.max_writes_per_second <= 0:
            return changed
        if self._allowance_at is not None:
            self._allowance += (at - self._allowance_at) * self.max_writes_per_second
        self._allowance = min(self._allowance, self.max_writes_per_second * self.min_interval_seconds)
        self._allowance_at = at
        news = [
            (key, update)
            for key, update in changed
            if _is_news(cache[key].get("status") or {}, update["status"])
        ]
        news.sort(key=lambda item: _news_rank(cache[item[0]].get("status") or {}, item[1]["status"]))
        rest = [
            (key, update)
            for key, update in changed
            if not _is_news(cache[key].get("status") or {}, update["status"])
        ]
        rest.sort(
            key=lambda item: (_KIND_ORDER.get(item[0].kind, 9), self._written_at.get(item[0], float("-inf")))
        )
        room = max(0, int(self._allowance))
        self._allowance -= min(room, len(rest))
        return news + rest[:room]

    def _gate(self) -> asyncio.Semaphore:
        """``concurrency`` writes at a time, all passes together (one gate per event loop)."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore_loop is not loop:
            self._semaphore, self._semaphore_loop = asyncio.Semaphore(self.concurrency), loop
        return self._semaphore

    async def drain(self) -> None:
        """Wait for the background writes started so far."""
        await self._writing.drain()

    async def stop_writing(self) -> None:
        """Cancel the background writes (shutdown, lost leadership); a restart redoes them."""
        await self._writing.stop()

    async def _write(
        self,
        key: Key,
        update: Manifest,
        cache: MutableMapping[Key, Manifest],
        again: Callable[[Key], Manifest | None],
    ) -> int:
        gate = self._gate()
        waited = gate.locked()
        try:
            async with gate:
                if waited:
                    # It waited behind others: what it says may be out of date by now.
                    fresh = again(key)
                    if fresh is None:
                        return 0
                    update = fresh
                try:
                    written = await self.store.update_status(update)
                except (Conflict, NotFound) as exc:
                    # The watch brings the newer object; the next pass compares against it.
                    log.debug("status of %s not written: %s", key, exc)
                    return 0
        finally:
            self._in_flight.discard(key)
        current = cache.get(key)
        if current is not None and version_number(current) <= version_number(written):
            cache[key] = written  # unless the watch already brought a newer one, or a deletion
        self._written_at[key] = self._looked_at[key] = self.monotonic()
        return 1
