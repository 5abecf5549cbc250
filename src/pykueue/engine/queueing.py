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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from pykueue.engine import specs
from pykueue.engine.workloads import Workload

SortKey = tuple[object, ...]


class Parked(Mapping[str, Workload]):
    """The inadmissible workloads of a queue: held one by one, or parked as whole shapes."""

    __slots__ = ("_queue",)

    def __init__(self, queue: ClusterQueueQueue) -> None:
        self._queue = queue

    def __getitem__(self, key: str) -> Workload:
        queue = self._queue
        wl = queue._held.get(key)
        if wl is not None:
            return wl
        shape = queue._shape_of.get(key, _NO_SHAPE)
        if shape in queue._parked:
            return queue._groups[shape][key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        queue = self._queue
        yield from queue._held
        for shape in queue._parked:
            yield from queue._groups.get(shape, {})

    def __len__(self) -> int:
        queue = self._queue
        return len(queue._held) + sum(len(queue._groups.get(shape, {})) for shape in queue._parked)

    def __bool__(self) -> bool:
        # Asked on every release for each queue of a cohort: stop at the first parked workload.
        queue = self._queue
        return bool(queue._held) or any(queue._groups.get(shape) for shape in queue._parked)


_NO_SHAPE = object()


@dataclass(eq=False, slots=True)
class ClusterQueueQueue:
    """Pending workloads of one ClusterQueue.

    Workloads in the heaps are kept in groups by shape, each group with a heap of its
    own; a group is either active or parked as a whole. Parking the twins of a shape, and
    moving every parked shape back, is then a flag per shape, not a move per workload: a
    busy cohort parks and unparks thousands of twins on every release. A second heap,
    ``_tops``, holds the head of every active shape's heap; the head of the queue is the
    best of those. Both heaps hold ``(sort key, seq, entry, ...)``; ``entry`` numbers
    each push and only the newest entry of a workload counts, so a removed or re-keyed
    workload leaves a stale item behind that is skipped when it surfaces (a stale top
    brings its shape's real head into ``_tops``: that head sorts after it). Workloads held
    one by one (a head that was not admitted, a requeue backoff) are outside the heaps.
    The part of a sort key that only changes with the workload itself is cached.
    """

    name: str
    strategy: str = specs.BEST_EFFORT_FIFO
    usage_of: Callable[[Workload], float] | None = None  # admission fair sharing
    _heaps: dict[object, list[tuple[SortKey, int, int, Workload]]] = field(default_factory=dict)
    _tops: list[tuple[SortKey, int, int, object]] = field(default_factory=list)
    _groups: dict[object, dict[str, Workload]] = field(default_factory=dict)
    _shape_of: dict[str, object] = field(default_factory=dict)
    _entry_of: dict[str, int] = field(default_factory=dict)
    _entries: int = 0
    # Parked shapes (a dict for a deterministic order).
    _parked: dict[object, None] = field(default_factory=dict)
    _held: dict[str, Workload] = field(default_factory=dict)
    # The reason each shape's group was last told as parked twins (`unstamped_twins`), and
    # the members that joined the group since (they may say something else).
    _stamped: dict[object, str] = field(default_factory=dict)
    _unstamped: dict[object, dict[str, None]] = field(default_factory=dict)
    _base: dict[str, SortKey] = field(default_factory=dict)
    _stale: int = 0
    inadmissible: Parked = field(init=False)
    sticky: str | None = None  # key of a preemptor waiting for its targets to go

    def __post_init__(self) -> None:
        self.inadmissible = Parked(self)

    def sort_key(self, wl: Workload) -> SortKey:
        afs = self.usage_of(wl) if self.usage_of is not None else 0.0
        key = wl.key
        sticky = 0 if key == self.sticky and self.strategy == specs.BEST_EFFORT_FIFO else 1
        base = self._base.get(key)
        if base is None or base[-1] != wl.seq:
            base = (-wl.priority, wl.queue_order_time(), wl.uid, wl.seq)
            self._base[key] = base
        return (afs, sticky) + base  # noqa: RUF005 (concatenation is the cheaper of the two here)

    def __len__(self) -> int:
        return len(self._shape_of) + len(self._held)

    def active(self) -> Iterator[Workload]:
        for shape, group in self._groups.items():
            if shape not in self._parked:
                yield from group.values()

    def held(self) -> Iterator[Workload]:
        """The workloads held one by one (the only ones a requeue backoff can hold)."""
        return iter(self._held.values())

    def contains(self, key: str) -> bool:
        return key in self._shape_of or key in self._held

    def push(self, wl: Workload) -> None:
        """Add a new or changed workload; a twin of a parked shape is parked with it."""
        if self.contains(wl.key):
            self.remove(wl.key)
        self._join(wl)

    def _join(self, wl: Workload) -> None:
        key, shape = wl.key, wl.shape
        group = self._groups.get(shape)
        if group is None:
            self._groups[shape] = {key: wl}
        else:
            group[key] = wl
        self._shape_of[key] = shape
        if shape in self._stamped:
            self._unstamped.setdefault(shape, {})[key] = None
        self._push(shape, self._entry(wl))

    def _push(self, shape: object, item: tuple[SortKey, int, int, Workload]) -> None:
        heap = self._heaps.get(shape)
        if heap is None:
            heap = self._heaps[shape] = []
        heapq.heappush(heap, item)
        if heap[0] is item and shape not in self._parked:
            heapq.heappush(self._tops, (item[0], item[1], item[2], shape))

    def _offer_top(self, shape: object) -> None:
        """Bring the current head of ``shape``'s heap into ``_tops`` (stale items dropped)."""
        heap = self._heaps.get(shape)
        if not heap:
            return
        entry_of = self._entry_of
        while heap and entry_of.get(heap[0][3].key) != heap[0][2]:
            heapq.heappop(heap)
            self._stale = max(0, self._stale - 1)
        if heap:
            item = heap[0]
            heapq.heappush(self._tops, (item[0], item[1], item[2], shape))
            if len(self._tops) > 4 * len(self._heaps) + 64:
                self._rebuild_tops()  # a shape parked and unparked often leaves copies of its head
        else:
            del self._heaps[shape]

    def _rebuild_tops(self) -> None:
        self._tops = []
        for shape, heap in list(self._heaps.items()):
            while heap and self._entry_of.get(heap[0][3].key) != heap[0][2]:
                heapq.heappop(heap)
            if not heap:
                del self._heaps[shape]
            elif shape not in self._parked:
                item = heap[0]
                self._tops.append((item[0], item[1], item[2], shape))
        heapq.heapify(self._tops)

    def _unstamp(self, shape: object, key: str, group: dict[str, Workload]) -> None:
        """``key`` left ``shape``'s group: what it was told stops mattering here."""
        if not group:
            self._stamped.pop(shape, None)
            self._unstamped.pop(shape, None)
        elif (joined := self._unstamped.get(shape)) is not None:
            joined.pop(key, None)

    def _entry(self, wl: Workload) -> tuple[SortKey, int, int, Workload]:
        self._entries += 1
        self._entry_of[wl.key] = self._entries
        return (self.sort_key(wl), wl.seq, self._entries, wl)

    def _leave(self, key: str) -> Workload | None:
        """Out of its group (its heap entry goes stale), keeping its cached key."""
        shape = self._shape_of.pop(key, _NO_SHAPE)
        if shape is _NO_SHAPE:
            return None
        group = self._groups[shape]
        wl = group.pop(key)
        self._unstamp(shape, key, group)
        if not group:
            del self._groups[shape]
        del self._entry_of[key]
        self._stale += 1
        self._maybe_compact()
        return wl

    def remove(self, key: str) -> Workload | None:
        """Out of this queue altogether (a preemptor that leaves stops being one)."""
        if self.sticky == key:
            self.sticky = None
        self._base.pop(key, None)
        wl = self._leave(key)
        return wl if wl is not None else self._held.pop(key, None)

    def _maybe_compact(self) -> None:
        if self._stale > 64 and self._stale > len(self._shape_of):
            self.rebuild()

    def rebuild(self) -> None:
        """Recompute every sort key (after a fair-sharing usage change) and drop stale entries."""
        self._heaps = {}
        self._tops = []
        for shape, group in self._groups.items():
            heap = [self._entry(wl) for wl in group.values()]
            heapq.heapify(heap)
            self._heaps[shape] = heap
            if shape not in self._parked and heap:
                item = heap[0]
                self._tops.append((item[0], item[1], item[2], shape))
        heapq.heapify(self._tops)
        self._stale = 0

    def pop(self) -> Workload | None:
        """Take the head out of the active heaps."""
        if self.usage_of is not None:
            self.rebuild()
        tops, heaps, parked = self._tops, self._heaps, self._parked
        while tops:
            _, _, entry, shape = heapq.heappop(tops)
            if shape in parked:
                continue  # its head comes back into _tops when the shape is unparked
            heap = heaps.get(shape)
            if not heap or heap[0][2] != entry:
                self._offer_top(shape)  # a stale top: its shape's real head sorts after it
                continue
            if self._entry_of.get(heap[0][3].key) != entry:
                self._offer_top(shape)
                continue
            wl = heapq.heappop(heap)[3]
            key = wl.key
            group = self._groups[shape]
            del group[key]
            self._unstamp(shape, key, group)
            if not group:
                del self._groups[shape]
            del self._shape_of[key]
            del self._entry_of[key]
            self._base.pop(key, None)
            self._offer_top(shape)
            return wl
        return None

    def requeue(self, wl: Workload, immediate: bool, park_twins: bool) -> None:
        """Put back a head that was not admitted: active when ``immediate``, else held."""
        if immediate:
            self._join(wl)
            return
        self._held[wl.key] = wl
        if park_twins and self.strategy == specs.BEST_EFFORT_FIFO:
            self._parked[wl.shape] = None

    def parked_twins(self, wl: Workload) -> list[Workload]:
        """The other workloads of ``wl``'s shape, when that shape is parked."""
        shape = self._shape_of.get(wl.key, wl.shape)
        if shape not in self._parked:
            return []
        return [twin for key, twin in self._groups.get(shape, {}).items() if key != wl.key]

    def unstamped_twins(self, wl: Workload, reason: str) -> list[Workload]:
        """`parked_twins`, unless the group was already told ``reason`` since it was parked.

        A twin that joins a parked group is told on joining, so a group told once stays
        told: asking its thousands of twins again at every failed try of a head would
        find nothing to change, at a cost that grows with the queue.
        """
        shape = self._shape_of.get(wl.key, wl.shape)
        if shape not in self._parked:
            return []
        joined = self._unstamped.pop(shape, {})
        if self._stamped.get(shape) != reason:
            self._stamped[shape] = reason
            return self.parked_twins(wl)
        group = self._groups.get(shape, {})
        return [group[key] for key in joined if key in group and key != wl.key]

    def forget_stamps(self) -> None:
        """The pending workloads' conditions may have changed: tell every group again."""
        self._stamped.clear()
        self._unstamped.clear()

    def twins(self, wl: Workload) -> Iterator[Workload]:
        """The other inadmissible workloads of ``wl``'s shape, lazily: the held ones first (the
        one whose failed try parked the shape is among them), then the parked group."""
        for key, held in self._held.items():
            if key != wl.key and held.shape == wl.shape:
                yield held
        yield from self.parked_twins(wl)

    def has_parked(self) -> bool:
        """Whether `unpark_all` has anything to do (a parked shape, even an empty one, or a
        held workload)."""
        return bool(self._parked or self._held)

    def unpark_all(self, still_waiting: Callable[[Workload], bool] | None = None) -> bool:
        """Parked shapes and held workloads back to the heaps, but those ``still_waiting`` (backoff)."""
        moved = False
        parked = list(self._parked)
        self._parked.clear()
        for shape in parked:
            moved = moved or bool(self._groups.get(shape))
            self._offer_top(shape)
        moving = [wl for wl in self._held.values() if still_waiting is None or not still_waiting(wl)]
        for wl in moving:
            del self._held[wl.key]
            self._join(wl)
        return moved or bool(moving)

    def reprioritize(self, wl: Workload, still_waiting: Callable[[Workload], bool]) -> None:
        """Its priority (and so its shape) changed: a new place, active unless its new shape
        is parked or it is ``still_waiting`` (a backoff), as upstream requeues an updated workload."""
        key = wl.key
        self._base.pop(key, None)
        if key in self._held:
            if still_waiting(wl):
                return
            del self._held[key]
        else:
            self._leave(key)
        self._join(wl)

    def park(self, wl: Workload) -> None:
        """Hold a workload out of the heap (a requeue backoff that has not expired)."""
        self._leave(wl.key)
        self._held[wl.key] = wl

    def set_sticky(self, key: str | None) -> None:
        """Make ``key`` the sticky head: only it and the previous one change their keys."""
        if self.sticky == key:
            return
        previous, self.sticky = self.sticky, key
        for changed in (previous, key):
            if changed is not None and changed in self._shape_of:
                shape = self._shape_of[changed]
                wl = self._groups[shape][changed]
                self._stale += 1  # its older entry
                self._push(shape, self._entry(wl))
