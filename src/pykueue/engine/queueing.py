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
    """Pending workloads of one ClusterQueue."""

    name: str
    strategy: str = specs.BEST_EFFORT_FIFO
    usage_of: Callable[[Workload], float] | None = None  # admission fair sharing
    _heap: list[tuple[SortKey, int, Workload]] = field(default_factory=list)
    _active: dict[str, Workload] = field(default_factory=dict)
    _stale: int = 0
    inadmissible: dict[str, Workload] = field(default_factory=dict)
    parked_shapes: set[object] = field(default_factory=set)
    sticky: str | None = None  # key of a preemptor waiting for its targets to go

    def sort_key(self, wl: Workload) -> SortKey:
        afs = self.usage_of(wl) if self.usage_of is not None else 0.0
        sticky = 0 if wl.key == self.sticky and self.strategy == specs.BEST_EFFORT_FIFO else 1
        return (afs, sticky, -wl.priority, wl.queue_order_time(), wl.uid, wl.seq)

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

    def _push_active(self, wl: Workload) -> None:
        self._active[wl.key] = wl
        heapq.heappush(self._heap, (self.sort_key(wl), wl.seq, wl))

    def remove(self, key: str) -> Workload | None:
        wl = self._active.pop(key, None)
        if wl is not None:
            self._stale += 1
            self._maybe_compact()
            return wl
        return self.inadmissible.pop(key, None)

    def _maybe_compact(self) -> None:
        if self._stale > 64 and self._stale > len(self._active):
            self.rebuild()

    def rebuild(self) -> None:
        """Recompute every sort key (after a fair-sharing usage or a sticky change)."""
        self._heap = [(self.sort_key(wl), wl.seq, wl) for wl in self._active.values()]
        heapq.heapify(self._heap)
        self._stale = 0

    def pop(self) -> Workload | None:
        """Take the head out of the active heap."""
        if self.usage_of is not None:
            self.rebuild()
        while self._heap:
            _, _, wl = heapq.heappop(self._heap)
            if self._active.get(wl.key) is wl:
                del self._active[wl.key]
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
        twins = [wl for wl in self._active.values() if wl.shape == shape]
        for wl in twins:
            self.remove(wl.key)
            self.inadmissible[wl.key] = wl

    def unpark_all(self, still_waiting: Callable[[Workload], bool] | None = None) -> bool:
        """Move parked workloads back to the active heap, but those ``still_waiting`` (backoff)."""
        self.parked_shapes.clear()
        moving = [wl for wl in self.inadmissible.values() if still_waiting is None or not still_waiting(wl)]
        for wl in moving:
            del self.inadmissible[wl.key]
            self._push_active(wl)
        return bool(moving)

    def park(self, wl: Workload) -> None:
        """Hold a workload out of the heap (a requeue backoff that has not expired)."""
        self.remove(wl.key)
        self.inadmissible[wl.key] = wl

    def set_sticky(self, key: str | None) -> None:
        if self.sticky != key:
            self.sticky = key
            self.rebuild()
