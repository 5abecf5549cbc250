"""Partial admission (upstream's `PartialAdmission`): the pod counts a head may be admitted
with when all of its pods do not fit, and the counts it keeps to after a preemption.

The reducer is upstream's: a binary search on how far every pod set shrinks toward its
``minCount`` at once. The limit after a preemption is pykueue's (docs/semantics.md,
"a preemption loop after a partial preemption").
"""

from __future__ import annotations

from collections.abc import Callable

from pykueue.engine.entries import Entry
from pykueue.engine.flavor_assigner import Assignment, Mode
from pykueue.engine.targets import Target
from pykueue.engine.workloads import Workload


def most_counts(wl: Workload) -> list[int] | None:
    """The pod counts a head may ask for: all its pods (None), or no more than it last preempted
    for when a victim of that preemption was preemptible only for that size (`Workload.preempted_for`).

    Upstream asks for all of them again, so such a head can take more than it preempted for,
    borrow, and be reclaimed by its victim, which then is reclaimed by it, for ever (seed 3141,
    case 12 of `make diff-upstream`; docs/semantics.md).
    """
    promised = wl.preempted_for
    if promised is None or len(promised) != len(wl.pod_sets):
        return None
    return [min(count, ps.count) for count, ps in zip(promised, wl.pod_sets, strict=True)]


def reduce_pod_sets(
    wl: Workload,
    assign: Callable[[list[int] | None], Assignment],
    find_targets: Callable[[Assignment], list[Target]],
    most: list[int] | None = None,
) -> tuple[Assignment, list[Target]] | None:
    """Upstream's pod-set reducer: binary search on how far to shrink toward minCount
    (from ``most`` pods per pod set when given, else from all)."""
    full_counts = most if most is not None else [ps.count for ps in wl.pod_sets]
    deltas = [
        full - (ps.min_count if ps.min_count is not None else ps.count)
        for full, ps in zip(full_counts, wl.pod_sets, strict=True)
    ]
    total_delta = sum(deltas)
    if total_delta == 0:
        return None
    best: tuple[Assignment, list[Target]] | None = None
    best_index = -1

    def attempt(index: int) -> bool:
        nonlocal best, best_index
        counts = [
            full - (delta * index) // total_delta for full, delta in zip(full_counts, deltas, strict=True)
        ]
        candidate = assign(counts)
        mode = candidate.mode()
        if mode == Mode.FIT:
            best, best_index = (candidate, []), index
            return True
        if mode == Mode.PREEMPT:
            targets = find_targets(candidate)
            if targets:
                best, best_index = (candidate, targets), index
                return True
        return False

    low, high = 0, total_delta + 1
    while low < high:
        middle = (low + high) // 2
        if attempt(middle):
            high = middle
        else:
            low = middle + 1
    return best if best_index == low else None


def promised_counts(entry: Entry) -> tuple[int, ...] | None:
    """The pod counts a preemptor asked for, kept when it asked for fewer than all its pods
    and a target was preemptible only if it did not borrow (`Workload.preempted_for`)."""
    if not any(t.size_bound for t in entry.targets):
        return None
    counts = tuple(ps.count for ps in entry.assignment.pod_sets)
    if counts == tuple(ps.count for ps in entry.workload.pod_sets):
        return None
    return counts
