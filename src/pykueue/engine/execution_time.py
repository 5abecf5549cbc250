"""A workload's maximum execution time: ``spec.maximumExecutionTimeSeconds``, as upstream enforces it.

A job labelled ``kueue.x-k8s.io/max-exec-time-seconds`` (or a Workload with the
field set) may stay Admitted that long in all. The time counts across admissions:

    accumulate   when Admitted turns False (an eviction, a preemption, a gate), the
                 whole seconds it was Admitted are added to
                 ``status.accumulatedPastExecutionTimeSeconds``
    deadline     while Admitted is True: the Admitted transition, plus the limit,
                 minus what earlier admissions used
    exceeded     at the deadline the workload is deactivated (``spec.active`` false),
                 so it is evicted with ``DeactivatedDueToMaximumExecutionTimeExceeded``
                 and never requeued until someone reactivates it

As upstream's workload controller, the accumulated time is cleared when the limit is
exceeded, and the eviction that follows adds the last admission's time again. A
workload that is already being evicted is left to that eviction.

Everything is in microseconds, except the accumulated time: upstream keeps whole
seconds (each admission's share truncated), and so does this.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from pykueue.engine.workloads import Workload

SECOND = 1_000_000
EXCEEDED = "MaximumExecutionTimeExceeded"
EXCEEDED_MESSAGE = "exceeding the maximum execution time"


def accumulate(wl: Workload, now: int) -> None:
    """Admitted is about to turn False: add the seconds of this admission to the past ones."""
    admitted = wl.conditions.get("Admitted")
    if admitted is None or admitted.status != "True":
        return
    ran = max(0, now - admitted.last_transition) // SECOND
    wl.past_execution_seconds = (wl.past_execution_seconds or 0) + ran


def deadline(wl: Workload) -> int | None:
    """When ``wl`` runs out of execution time; None without a limit or an admission."""
    if wl.max_execution_seconds is None or wl.admission is None or wl.eviction is not None or not wl.active:
        return None
    admitted = wl.conditions.get("Admitted")
    if admitted is None or admitted.status != "True":
        return None
    left = wl.max_execution_seconds - (wl.past_execution_seconds or 0)
    return admitted.last_transition + left * SECOND


def exceeded_message(wl: Workload) -> str:
    """The Warning event's message, as upstream words it."""
    return f"The maximum execution time ({wl.max_execution_seconds}s) exceeded"


def due(workloads: Mapping[str, Workload], keys: Iterable[str]) -> Iterator[tuple[int, int, str]]:
    """(deadline, arrival, key) of each of ``keys`` that has one (``State.time_limited``)."""
    for key in keys:
        wl = workloads.get(key)
        at = deadline(wl) if wl is not None else None
        if wl is not None and at is not None:
            yield at, wl.seq, key
