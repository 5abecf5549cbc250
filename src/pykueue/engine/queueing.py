"""The pending workloads of one ClusterQueue: an active heap and an inadmissible set.

Ordering follows upstream Kueue: a sticky preemptor first (BestEffortFIFO
keeps a workload that is waiting for its preemptions at the head), then
higher priority, then the older queue time (creation, or eviction for an
evicted workload), then uid, then arrival order. With admission fair sharing
the LocalQueue's decayed usage comes before all of these.

A workload that cannot be admitted is *parked* as inadmissible under
BestEffortFIFO, so the next one gets its chance; StrictFIFO keeps it at the
head. Parked workloads return to the active heap only when something that
could help happens (quota released, a queue or flavor changed). Parking is
also applied to every active workload of the same *shape* (priority and pod
sets), as upstream's scheduling-equivalence hashing does: if one cannot fit,
neither can its twins.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pykueue.engine import specs
from pykueue.engine.workloads import Workload

SortKey = tuple[object, ...]


@dataclass(eq=False, slots=True)
class ClusterQueueQueue:
    """Pending workloads of one ClusterQueue.

    The active heap holds ``(sort key, seq, entry, workload)``; ``entry`` numbers each
    push, and only the newest entry of an active workload counts (older ones are stale
    and skipped when popped). Re-keying one workload (a sticky change) is then one
    push, not a rebuild. The part of a sort key that only changes with the workload
    itself is cached per key while the workload is in this queue, so moving thousands
    of parked workloads back costs a tuple each, not a recomputation.
    """

    name: str
    strategy: str = specs.BEST_EFFORT_FIFO
    usage_of: Callable[[Workload], float] | None = None  # admission fair sharing
    _heap: list[tuple[SortKey, int, int, Workload]] = field(default_factory=list)
    _active: dict[str, Workload] = field(default_factory=dict)
    _entry_of: dict[str, int] = field(default_factory=dict)
    _entries: int = 0
    # The active workloads by shape, so parking the twins of a shape does not scan the heap.
    _by_shape: dict[object, dict[str, Workload]] = field(default_factory=dict)
    _base: dict[str, SortKey] = field(default_factory=dict)
    _stale: int = 0
    inadmissible: dict[str, Workload] = field(default_factory=dict)
    parked_shapes: set[object] = field(default_factory=set)
    sticky: str | None = None  # key of a preemptor waiting for its targets to go

    def sort_key(self, wl: Workload) -> SortKey:
        afs = self.usage_of(wl) if self.usage_of is not None else 0.0
        key = wl.key
        sticky = 0 if key == self.sticky and self.strategy == specs.BEST_EFFORT_FIFO else 1
        base = self._base.get(key)
        if base is None or base[-1] != wl.seq:
            base = (-wl.priority, wl.queue_order_time(), wl.uid, wl.seq)
            self._base[key] = base
        return (afs, sticky) + base

    def __len__(self) -> int:
        return len(self._active) + len(self.inadmissible)

    def active(self) -> Iterator[Workload]:
        return iter(self._active.values())

    def contains(self, key: str) -> bool:
        return key in self._active or key in self.inadmissible

    def push(self, wl: Workload) -> None:
        """Add a new or changed workload; a twin of a parked shape is parked at once."""
        if wl.key in self._active or wl.key in self.inadmissible:
            self.remove(wl.key)
        if self.strategy == specs.BEST_EFFORT_FIFO and wl.shape in self.parked_shapes:
            self.inadmissible[wl.key] = wl
            return
        self._push_active(wl)

    def _entry(self, wl: Workload) -> tuple[SortKey, int, int, Workload]:
        self._entries += 1
        self._entry_of[wl.key] = self._entries
        return (self.sort_key(wl), wl.seq, self._entries, wl)

    def _push_active(self, wl: Workload) -> None:
        self._active[wl.key] = wl
        self._by_shape.setdefault(wl.shape, {})[wl.key] = wl
        heapq.heappush(self._heap, self._entry(wl))

    def _forget_shape(self, wl: Workload) -> None:
        twins = self._by_shape.get(wl.shape)
        if twins is not None:
            twins.pop(wl.key, None)
            if not twins:
                del self._by_shape[wl.shape]

    def _deactivate(self, key: str) -> Workload | None:
        """Out of the active heap (its entry goes stale), keeping its cached key."""
        wl = self._active.pop(key, None)
        if wl is not None:
            self._forget_shape(wl)
            del self._entry_of[key]
            self._stale += 1
            self._maybe_compact()
        return wl

    def remove(self, key: str) -> Workload | None:
        """Out of this queue altogether."""
        self._base.pop(key, None)
        wl = self._deactivate(key)
        return wl if wl is not None else self.inadmissible.pop(key, None)

    def _maybe_compact(self) -> None:
        if self._stale > 64 and self._stale > len(self._active):
            self.rebuild()

    def rebuild(self) -> None:
        """Recompute every sort key (after a fair-sharing usage change) and drop stale entries."""
        self._heap = [self._entry(wl) for wl in self._active.values()]
        heapq.heapify(self._heap)
        self._stale = 0

    def pop(self) -> Workload | None:
        """Take the head out of the active heap."""
        if self.usage_of is not None:
            self.rebuild()
        while self._heap:
            _, _, entry, wl = heapq.heappop(self._heap)
            if self._entry_of.get(wl.key) == entry:
                del self._active[wl.key]
                del self._entry_of[wl.key]
                self._forget_shape(wl)
                self._base.pop(wl.key, None)
                return wl
            self._stale = max(0, self._stale - 1)
        return None

    def requeue(self, wl: Workload, immediate: bool, park_twins: bool) -> None:
        """Put back a head that was not admitted: active when ``immediate``, else parked."""
        if immediate:
            self._push_active(wl)
            return
        self.inadmissible[wl.key] = wl
        if park_twins and self.strategy == specs.BEST_EFFORT_FIFO:
            self.parked_shapes.add(wl.shape)
            self._park_shape(wl.shape)

    def _park_shape(self, shape: object) -> None:
        twins = self._by_shape.pop(shape, None)
        if not twins:
            return
        for key, wl in twins.items():
            del self._active[key]
            del self._entry_of[key]
            self.inadmissible[key] = wl
        self._stale += len(twins)
        self._maybe_compact()

    def unpark_all(self, still_waiting: Callable[[Workload], bool] | None = None) -> bool:
        """Move parked workloads back to the active heap, but those ``still_waiting`` (backoff)."""
        self.parked_shapes.clear()
        moving = [wl for wl in self.inadmissible.values() if still_waiting is None or not still_waiting(wl)]
        if len(moving) > len(self._heap):
            # Many at once (a release in a crowded cohort): one heapify beats a push each.
            inadmissible, active, by_shape, entry = self.inadmissible, self._active, self._by_shape, self._entry
            heap = self._heap
            for wl in moving:
                key = wl.key
                del inadmissible[key]
                active[key] = wl
                twins = by_shape.get(wl.shape)
                if twins is None:
                    by_shape[wl.shape] = {key: wl}
                else:
                    twins[key] = wl
                heap.append(entry(wl))
            heapq.heapify(heap)
            return True
        for wl in moving:
            del self.inadmissible[wl.key]
            self._push_active(wl)
        return bool(moving)

    def park(self, wl: Workload) -> None:
        """Hold a workload out of the heap (a requeue backoff that has not expired)."""
        self._deactivate(wl.key)
        self.inadmissible[wl.key] = wl

    def set_sticky(self, key: str | None) -> None:
        """Make ``key`` the sticky head: only it and the previous one change their keys."""
        if self.sticky == key:
            return
        previous, self.sticky = self.sticky, key
        for changed in (previous, key):
            wl = self._active.get(changed) if changed is not None else None
            if wl is not None:
                self._stale += 1  # its older entry
                heapq.heappush(self._heap, self._entry(wl))
