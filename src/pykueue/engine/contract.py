"""The preemption contract of a ClusterQueue: what its admitted workloads are promised.

A ClusterQueue opts in with the annotation ``pykueue.io/preemption-contract``
(`pykueue.api.governance.PreemptionContract`, docs/governance.md); the contract of the
queue a workload is admitted in protects it, whoever the preemptor is (its own queue, a
reclaiming or fair-sharing one):

    minRunTime      not a preemption candidate until it has held its reservation that long
                    (e.g. to reach its first checkpoint)
    maxPreemptions  not a candidate while it was already preempted that many times within
    + window        the last ``window`` (0: never preempted at all)

Protected workloads are simply not candidates: preemption looks for targets among the
others, and a preemptor that finds none waits as it would for any lack of candidates.
When a protection ends, `State.advance_clock` puts the parked workloads of the queue's
cohort tree back in their queues, as a release of quota does. Without the annotation
nothing here applies: upstream's behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pykueue.engine import specs
from pykueue.engine.workloads import Workload

FOREVER = 2**62  # a protection that never ends (maxPreemptions 0)
KEPT_PREEMPTIONS = 64  # the preemption times a workload remembers


def protected_until(cq: specs.ClusterQueue | None, wl: Workload, now: int) -> int | None:
    """When ``wl``'s contract lets it be preempted again; None when it may be now."""
    contract = cq.contract if cq is not None else None
    if contract is None or wl.admission is None:
        return None
    until: int | None = None
    if contract.min_run_time is not None:
        end = wl.admitted_at + contract.min_run_time
        if end > now:
            until = end
    limit, window = contract.max_preemptions, contract.window
    if limit is not None and window is not None:
        recent = [t for t in wl.preempted_at if t > now - window]
        if len(recent) >= limit:
            # Free again once enough of those preemptions have left the window.
            end = FOREVER if limit == 0 else recent[len(recent) - limit] + window
            until = end if until is None else max(until, end)
    return until


def ends(cq: specs.ClusterQueue, admitted: Iterable[Workload], now: int) -> Iterator[int]:
    """When the protections of ``admitted`` (workloads admitted in ``cq``) end, in their order;
    `FOREVER` for one that never ends. The unprotected ones are left out."""
    for wl in admitted:
        until = protected_until(cq, wl, now)
        if until is not None:
            yield until


def protected(cq: specs.ClusterQueue | None, wl: Workload, now: int) -> bool:
    return protected_until(cq, wl, now) is not None


def record_preemption(wl: Workload, now: int) -> None:
    wl.preempted_at = (*wl.preempted_at[-(KEPT_PREEMPTIONS - 1) :], now)
