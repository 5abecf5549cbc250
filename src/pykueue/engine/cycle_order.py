"""The order in which a classical cycle looks at its heads (fair sharing orders them by
share instead, in `pykueue.engine.fair_sharing`)."""

from __future__ import annotations

from collections.abc import Iterator

from pykueue.engine import fair_sharing
from pykueue.engine.entries import Entry
from pykueue.engine.state import State


def order(state: State, entries: list[Entry]) -> Iterator[Entry]:
    if state.config.fair_sharing.enable:
        return fair_sharing.iter_entries(state, entries)
    return iter(yield_to_preemptor(sorted(entries, key=classical_order_key)))


def yield_to_preemptor(ordered: list[Entry]) -> list[Entry]:
    """Move every preemptor ahead of the workloads it preempted.

    In a real cluster the victims of a preemption are still terminating when the
    freed quota becomes visible, so their preemptor is admitted before they are
    back in a queue. Here evictions complete at once; without this rule a victim
    ordered first (an older queue time, a lower share, not borrowing) would take
    the quota back, its preemptor would preempt it again next cycle, for ever.
    """
    result = list(ordered)
    position = {entry.workload.key: i for i, entry in enumerate(result)}
    for entry in ordered:
        preemptor = entry.workload.preempted_by
        if preemptor is None or preemptor not in position:
            continue
        mine, theirs = position[entry.workload.key], position[preemptor]
        if theirs > mine:
            moved = result.pop(theirs)
            result.insert(mine, moved)
            position = {e.workload.key: i for i, e in enumerate(result)}
    return result


def classical_order_key(entry: Entry) -> tuple[int, int, int, int, str, int]:
    wl = entry.workload
    return (
        0 if entry.is_preemptor else 1,
        entry.borrows,
        -wl.priority,
        wl.queue_order_time(),
        wl.uid,
        wl.seq,
    )
