"""Status writes waiting for a slot: one per object, the most pressing first, built late.

The admission controller decides faster than the API server takes writes. What it
queues is a *name*, not a document: the status is built from the engine's view when
a slot frees up, so a workload queued for a pending explanation that is admitted in
the meantime goes out as an admission, and one admitted and preempted before its
turn costs one write instead of two.

    offer(name, lane, rank) ──▶ queued (one entry per name, the best lane/rank wins)
                                   │ a free slot of the lane, lowest rank first
                                   ▼
                             send(name) ──▶ done: slot back; offered again while
                                                  sending? queued once more

Lanes have their own slots, so a backlog in one (pending workloads' explanations)
never holds back another (admissions and evictions). Lanes are also ranked: a lane
starts no write while a lane before it has names queued for a slot. Under a
client-side rate limit the slots of all lanes wait for the same tokens, and an
explanation must not take one while admissions back up; a lane named spare takes a
token only while half the burst stays saved for the others, so explanations never use
up the burst the next admissions need. A name offered again while it
waits moves to the place of its latest offer: a pending workload admitted meanwhile
moves up to the admissions' lane, one admitted and preempted before its turn moves
back down. A spare lane's write already under way when its name is offered to a lane
that is not spare is cancelled and the name queued there: while admissions back up,
that write could wait minutes for a token, and the admission of the same workload
would wait behind it.

`ahead` counts, per lane, the names queued or whose write still waits for the client's
rate limit: the store says when a request has passed it (`base.request_on_its_way`),
and from then on the write only travels.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pykueue.errors import PykueueError
from pykueue.reconcilers.background import BackgroundWrites
from pykueue.store import base

log = logging.getLogger(__name__)

Rank = tuple[Any, ...]


class WriteQueue:
    """Names waiting to be written, per lane, each lane with its own number of slots."""

    def __init__(
        self,
        slots: Mapping[int, int],
        send: Callable[[str], Awaitable[int]],
        spare_lanes: frozenset[int] = frozenset(),
    ) -> None:
        self._send = send
        # Lanes whose writes use only spare capacity of a rate limit (`base.request_spare_only`).
        self._spare_lanes = spare_lanes
        self._free = dict(slots)
        self._heaps: dict[int, list[tuple[Rank, int, str]]] = {lane: [] for lane in slots}
        self._queued: dict[str, tuple[int, Rank, int]] = {}
        self._sending: dict[str, tuple[int, Rank]] = {}
        self._again: dict[str, tuple[int, Rank]] = {}
        # The tasks of the writes under way that have started (only those can be cancelled).
        self._started: dict[str, asyncio.Task[Any]] = {}
        # Started writes whose request still waits for the rate limit (name: lane), and per
        # lane how many have passed it and are travelling.
        self._unsent: dict[str, int] = {}
        self._travelling = dict.fromkeys(slots, 0)
        # Per lane, the names queued or being written: kept as they move, since the metrics
        # and every pass ask for it and a busy cluster queues thousands of explanations.
        self._count = dict.fromkeys(slots, 0)
        self._writing = BackgroundWrites("workload status")
        self._seq = itertools.count()
        self.written = 0
        self.errors: list[BaseException] = []

    def __len__(self) -> int:
        return len(self._queued) + len(self._sending)

    def waiting(self) -> dict[int, int]:
        """Per lane, the names queued or being written now."""
        return dict(self._count)

    def ahead(self, lane: int) -> int:
        """Names of ``lane`` queued or whose write still waits for the rate limit.

        A write that has passed it travels and is answered in the API server's time: what
        was decided ahead of it is already on its way, however slow the answer.
        """
        return self._count[lane] - self._travelling[lane]

    def offer(self, name: str, lane: int, rank: Rank) -> None:
        """Ask for ``name`` to be written, in the place its latest change calls for."""
        if name in self._sending:
            # The write under way was built before this change: one more after it.
            self._again[name] = (lane, rank)
            if self._outranks_spare_write(name, lane):
                task = self._started.get(name)
                if task is not None:
                    task.cancel()  # its end offers the name again, in the new lane
            return
        current = self._queued.get(name)
        if current is not None and (current[0], current[1]) == (lane, rank):
            return  # keeps its turn
        if current is not None:
            self._count[current[0]] -= 1
        self._count[lane] += 1
        seq = next(self._seq)
        self._queued[name] = (lane, rank, seq)  # an older heap entry is now stale, skipped
        heapq.heappush(self._heaps[lane], (rank, seq, name))
        self._pump()

    def _outranks_spare_write(self, name: str, lane: int) -> bool:
        """Is ``name`` being written in a spare lane while it is now wanted in one that is not?"""
        return self._sending[name][0] in self._spare_lanes and lane not in self._spare_lanes

    def _pump(self) -> None:
        for lane, heap in sorted(self._heaps.items()):
            while self._free[lane] > 0 and heap:
                rank, seq, name = heapq.heappop(heap)
                if self._queued.get(name) != (lane, rank, seq):
                    continue
                del self._queued[name]
                self._free[lane] -= 1
                self._sending[name] = (lane, rank)
                self._writing.start(self._run(name, lane))
            if self._has_queued(lane):
                return  # a backlog here: the lanes after it wait

    def _has_queued(self, lane: int) -> bool:
        heap = self._heaps[lane]
        while heap and self._queued.get(heap[0][2]) != (lane, heap[0][0], heap[0][1]):
            heapq.heappop(heap)  # stale: that name moved or was sent
        return bool(heap)

    async def _run(self, name: str, lane: int) -> None:
        rank = self._sending[name][1]
        task = asyncio.current_task()
        if task is not None:
            self._started[name] = task
        self._unsent[name] = lane
        try:
            again = self._again.get(name)
            if again is not None and self._outranks_spare_write(name, again[0]):
                return  # offered to a lane that is not spare before this write began
            # Under a rate limit the writes of all slots wait for tokens: the best rank first.
            base.request_rank.set((1 + lane, *rank))  # after unranked requests (a job's Finished)
            base.request_spare_only.set(lane in self._spare_lanes)
            base.request_on_its_way.set(lambda: self._on_its_way(name))
            count = await self._send(name)  # not `+=` over an await: other writes add meanwhile
            self.written += count
        except PykueueError as exc:
            self.errors.append(exc)
            log.warning("status of %s not written: %s", name, exc)
        except Exception as exc:  # a bug: kept for the caller, the other writes go on
            self.errors.append(exc)
            log.exception("status of %s not written", name)
        finally:
            self._started.pop(name, None)
            if self._unsent.pop(name, None) is None:
                self._travelling[lane] -= 1
            del self._sending[name]
            self._count[lane] -= 1
            self._free[lane] += 1
            again = self._again.pop(name, None)
            if again is not None:
                self.offer(name, *again)
            self._pump()

    def _on_its_way(self, name: str) -> None:
        lane = self._unsent.pop(name, None)
        if lane is not None:  # its first request; a retry or a second request counts once
            self._travelling[lane] += 1

    async def drain(self) -> None:
        """Wait until nothing is queued or being written."""
        await self._writing.drain()  # a write that ends starts the next queued one

    def take_errors(self) -> list[BaseException]:
        """The failures since the last call."""
        errors, self.errors = self.errors, []
        return errors

    async def stop(self) -> None:
        """Forget what is queued and cancel what is being written (a restart redoes both)."""
        for lane, _, _ in self._queued.values():
            self._count[lane] -= 1
        self._queued.clear()
        self._again.clear()
        for heap in self._heaps.values():
            heap.clear()
        await self._writing.stop()
