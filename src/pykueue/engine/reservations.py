"""Reservations for an aged head, with backfill (docs/governance.md; pykueue issue 45, item 1).

Opt-in: a ClusterQueue's ``pykueue.io/reservation`` annotation, else that of the nearest
Cohort above it that has one, else the site default (``pykueue.reservation`` of the
Configuration). Without any of them nothing here runs and the cycle is upstream's.

Why: a workload that needs capacity other teams lend only while they leave it idle (a
large gang that must borrow) may wait for ever while they stream small jobs into their
idle quota, each start taking back a piece of what was about to be free; aging raises its
priority but cannot make room that is never free at once. A reservation makes the room:

    reserver  per cohort tree, the pending workload of a queue with the policy that has
              waited longest, past the policy's ``after`` (its queue time: creation, or its
              last eviction), among those that holding borrowers back can help (it fits once
              its own queue's running work and the others' workloads admitted by borrowing are
              gone; `_reachable`);
              one per tree, so reservations never compete
    need      per resource, the first flavor of its ClusterQueue that could ever hold it;
              none (it never fits, `engine.feasibility`): no reservation
    start     the earliest time it fits, playing forward the ends of the tree's admitted
              workloads that declare one (their ``maximumExecutionTimeSeconds``, an upper
              bound: the start is a promise, never optimistic); None when the declared ends
              alone never make room (the workloads without a limit must end first)
    holds     an admission (or preemption) in the tree is held back when it would leave the
              reserver less of its need at the start than without it, unless
                - it is of another ClusterQueue and does not borrow: a team's nominal quota
                  is its own, the reservation only stops borrowing into it;
                - its declared limit ends it by the start (backfill, by declared limit);
                - it has a higher priority than the reserver;
                - it uses no flavor-resource the reserver needs.

A held workload goes back to its queue as a head that did not fit (parked under
BestEffortFIFO, retried when quota is released in its cohort tree). Everything is
recomputed from the state at every cycle: no state is kept between cycles.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pykueue.api.governance import Reservation
from pykueue.api.quantity import format_resource
from pykueue.engine import cohort_shape, cohort_tree, lost_work
from pykueue.engine.cohort_tree import Node
from pykueue.engine.flavor_assigner import Assignment
from pykueue.engine.resources import Quantities
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload

SECOND = 1_000_000
# The requeue reason of a head held by a reservation (parked as a head that did not fit).
HELD = "ReservedCapacity"


@dataclass(frozen=True, slots=True)
class Held:
    """The reservation of one cohort tree (or of a ClusterQueue without a cohort)."""

    workload: str
    cluster_queue: str
    priority: int
    need: Quantities
    start: int | None  # the earliest start by declared ends; None: not known from them

    def words(self) -> str:
        need = ", ".join(f"{format_resource(r, v)} {r} of {f}" for (f, r), v in sorted(self.need.items()))
        return (
            f"capacity ({need}) is reserved for workload {self.workload} of ClusterQueue {self.cluster_queue}"
        )


def policy_of(state: State, cq_name: str) -> Reservation | None:
    """The reservation policy in force for a ClusterQueue: its own, its nearest cohort's, the site's."""
    cq = state.cluster_queues.get(cq_name)
    if cq is None:
        return None
    if cq.reservation is not None:
        return cq.reservation
    for cohort in cohort_shape.ancestors(state.cohorts, cq.cohort):
        if cohort.reservation is not None:
            return cohort.reservation
    return state.config.default_reservation


def _any_policy(state: State) -> bool:
    if state.config.default_reservation is not None:
        return True
    return any(cq.reservation is not None for cq in state.cluster_queues.values()) or any(
        c.reservation is not None for c in state.cohorts.values()
    )


def compute(state: State, heads: list[tuple[Workload, str]]) -> dict[Node, Held]:
    """The reservation of every cohort tree at ``state.now`` (by its root), at a cycle's start;
    ``heads`` are the cycle's heads (taken out of their queues already), with their ClusterQueues."""
    if not _any_policy(state):
        return {}
    policies = {name: policy_of(state, name) for name in sorted(state.queues) if state.is_active(name)}
    candidates = [(wl, name) for wl, name in heads if policies.get(name) is not None]
    for name, policy in policies.items():
        if policy is not None:
            queue = state.queues[name]
            candidates += [(wl, name) for wl in [*queue.active(), *queue.inadmissible.values()]]
    aged: dict[Node, list[tuple[tuple[int, int, int], Workload, str]]] = {}
    for wl, name in candidates:
        policy, node = policies[name], state.nodes.get(name)
        since = wl.queue_order_time()
        if (
            policy is None
            or node is None
            or wl.invalid_reason
            or not wl.active
            or state.now - since < policy.after
        ):
            continue
        aged.setdefault(node.root(), []).append(((since, -wl.priority, wl.seq), wl, name))
    out: dict[Node, Held] = {}
    for root, rows in aged.items():
        for _, wl, cq_name in sorted(rows, key=lambda row: row[0]):
            node = state.nodes[cq_name]
            need = _need(state, wl, cq_name)
            if need and _reachable(state, node, need):
                out[root] = Held(wl.key, cq_name, wl.priority, need, _start(state, node, need))
                break
    return out


def _reachable(state: State, node: Node, need: Quantities) -> bool:
    """Could holding borrowers back ever make room for ``need``? It fits once its own queue's
    running work and what the other queues borrow are gone: per queue, the workloads it admitted
    by borrowing, or at least what it uses beyond its nominal quota (a workload loaded already
    admitted does not say how it was admitted). What they use within their nominal quota is
    theirs and may be renewed at any time, so a workload that needs it too does not reserve (it
    would hold every borrower back for as long as they keep using their own quota)."""
    gone = []
    for leaf in node.root().cluster_queues():
        admitted = state.admitted.get(leaf.name, {}).values()
        if leaf is node:
            gone.append((0, 0, leaf, dict(leaf.usage)))
            continue
        borrowed: Quantities = {}
        for wl in admitted:
            if wl.borrowing:
                for fr, value in wl.usage().items():
                    borrowed[fr] = borrowed.get(fr, 0) + value
        for fr, used in leaf.usage.items():
            quota = leaf.quotas.get(fr)
            beyond = used - (quota.nominal if quota is not None else 0)
            borrowed[fr] = max(borrowed.get(fr, 0), beyond, 0)
        gone.append((0, 0, leaf, borrowed))
    with _without(gone):
        return _fits(node, need)


def _need(state: State, wl: Workload, cq_name: str) -> Quantities:
    """Per resource, the first flavor that could ever hold it; {} when one never fits."""
    cq = state.cluster_queues[cq_name]
    node = state.nodes[cq_name]
    requests = wl.total_requests()
    need: Quantities = {}
    for group in cq.resource_groups:
        wanted = [r for r in group.covered if requests.get(r, 0) > 0]
        if not wanted:
            continue
        for flavor in group.flavors:
            if all(requests[r] <= cohort_tree.potential_available(node, (flavor, r)) for r in wanted):
                need.update({(flavor, r): requests[r] for r in wanted})
                break
        else:
            return {}
    return need


def _fits(node: Node, need: Quantities) -> bool:
    return all(cohort_tree.available(node, fr) >= value for fr, value in need.items())


def _ends(state: State, root: Node) -> list[tuple[int, int, Node, Quantities]]:
    """(end, arrival, ClusterQueue node, usage) of the tree's admitted workloads with a declared end."""
    out = []
    for leaf in root.cluster_queues():
        for wl in state.admitted.get(leaf.name, {}).values():
            # One being evicted is on its way out; one with a declared limit ends by it.
            end = state.now if wl.eviction is not None else lost_work.declared_end(wl)
            if end is not None:
                out.append((max(end, state.now), wl.seq, leaf, wl.usage()))
    out.sort(key=lambda row: (row[0], row[1]))
    return out


@contextmanager
def _without(rows: list[tuple[int, int, Node, Quantities]]) -> Iterator[None]:
    """The tree's usage with ``rows`` taken off, put back afterwards."""
    done: list[tuple[Node, Quantities]] = []
    try:
        for _, _, leaf, usage in rows:
            cohort_tree.add_usages(leaf, usage, -1)
            done.append((leaf, usage))
        yield
    finally:
        for leaf, usage in reversed(done):
            cohort_tree.add_usages(leaf, usage, +1)


def _start(state: State, node: Node, need: Quantities) -> int | None:
    """The earliest time ``need`` fits in ``node``, by the declared ends; None: not by them."""
    if _fits(node, need):
        return state.now
    rows = _ends(state, node.root())
    for i, row in enumerate(rows):
        if i + 1 < len(rows) and rows[i + 1][0] == row[0]:
            continue  # the workloads ending at the same time go together
        with _without(rows[: i + 1]):
            if _fits(node, need):
                return row[0]
    return None


def holds(
    state: State, held: dict[Node, Held], cq_name: str, wl: Workload, assignment: Assignment, borrows: bool
) -> str:
    """Why a reservation holds back admitting ``wl`` (in ``cq_name``, by ``assignment``), "" if none does."""
    if not held:
        return ""
    node = state.nodes.get(cq_name)
    h = held.get(node.root()) if node is not None else None
    if h is None or h.workload == wl.key or wl.priority > h.priority:
        return ""
    reserver = state.workloads.get(h.workload)
    if reserver is None or reserver.admission is not None:
        return ""  # admitted earlier in this cycle (or gone): the reservation has done its work
    usage = assignment.usage
    if not any(fr in h.need for fr in usage):
        return ""
    if cq_name != h.cluster_queue and not borrows:
        return ""  # another team's nominal quota: never taken by a reservation
    if wl.max_execution_seconds is not None and h.start is not None:
        left = wl.max_execution_seconds - (wl.past_execution_seconds or 0)
        if state.now + left * SECOND <= h.start:
            return ""  # backfill: its declared limit ends it before the reservation starts
    if not _takes(state, h, node, usage):
        return ""
    when = (
        f" starting in {(h.start - state.now + SECOND - 1) // SECOND}s (by the declared ends of running work)"
        if h.start is not None
        else " (its start waits for running work without a declared limit)"
    )
    limit = (
        "its declared limit ends it after that"
        if wl.max_execution_seconds is not None and h.start is not None
        else "it declares no limit that ends it before"
    )
    return f"Workload waits: {h.words()}{when}; {limit}"


def _takes(state: State, h: Held, node: Node | None, usage: Quantities) -> bool:
    """Would ``usage`` in ``node`` leave the reserver less of its need at its start?"""
    if node is None:
        return False
    reserver = state.nodes[h.cluster_queue]
    rows = _ends(state, reserver.root())
    if h.start is not None:
        rows = [row for row in rows if row[0] <= h.start]
    with _without(rows):
        before = {fr: cohort_tree.available(reserver, fr) for fr in h.need}
        cohort_tree.add_usages(node, usage, +1)
        try:
            after = {fr: cohort_tree.available(reserver, fr) for fr in h.need}
        finally:
            cohort_tree.add_usages(node, usage, -1)
    return any(after[fr] < min(value, before[fr]) for fr, value in h.need.items())
