"""Can this workload ever run? Never (the quota design) against not now (the usage).

Upstream says a workload waits for quota, or that its request exceeds a flavor's maximum
capacity; it does not say whether waiting can ever help. `analyse` answers from the quota
design (nominal quotas, borrowing and lending limits, the cohort tree) and the usage now:

* **never**: no flavor of its ClusterQueue can ever hold all it asks for at once: the most
  the queue may use of one flavor-resource, with every other queue idle, is short (or no one
  flavor has enough of every resource of a group). No amount of waiting helps; the cause is
  ``capacity``.
* **not now, beyond its nominal**: it fits only by borrowing the other queues' quota, which
  they lend only while they leave it idle and may take back whenever they use it. It
  runs when that much of their quota is idle at once; under a steady stream of their own
  work it may wait for ever, and no priority or aging of its own changes that.
* **not now, within its nominal**: it fits in its own queue's quota when enough of it frees.

Each verdict carries the numbers (what it needs, what the queue owns, what the cohort can
lend, what is free now) in one sentence, shown by `describe`, the dashboard's Why, the
planner and the simulator's notes. Pure: reads the tree, changes nothing. Node selectors
and taints are not weighed (a flavor the workload cannot use counts as one it could).
"""

from __future__ import annotations

from dataclasses import dataclass

from pykueue.api.quantity import format_resource
from pykueue.engine import cohort_tree, specs
from pykueue.engine.cohort_tree import Node
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload

NEVER = "never"
BEYOND_NOMINAL = "beyond-nominal"
WITHIN_NOMINAL = "within-nominal"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a workload waits, by the design: ``kind`` one of NEVER, BEYOND_NOMINAL,
    WITHIN_NOMINAL, and the numbers of the flavor-resource that decides it."""

    kind: str
    cluster_queue: str
    flavor: str
    resource: str
    needed: int  # milli-units, as the engine counts
    nominal: int  # the ClusterQueue's own
    most: int  # the most it may ever use (every other queue idle)
    free: int  # what it may use now
    sentence: str

    @property
    def never(self) -> bool:
        return self.kind == NEVER


@dataclass(frozen=True, slots=True)
class _Numbers:
    flavor: str
    resource: str
    needed: int
    nominal: int
    most: int
    free: int


def of(state: State, wl: Workload) -> Verdict | None:
    """`analyse` for a pending workload of ``state`` (None when it is not queued in a ClusterQueue)."""
    if wl.admission is not None or wl.finished:
        return None
    cq_name = state.route_of(wl)
    if cq_name is None or cq_name not in state.cluster_queues or cq_name not in state.nodes:
        return None
    return analyse(state.cluster_queues[cq_name], state.nodes[cq_name], wl)


def analyse(cq: specs.ClusterQueue, node: Node, wl: Workload, design: bool = False) -> Verdict | None:
    """The verdict for ``wl`` waiting in ``cq`` (``node`` its place in the cohort tree); None
    when it would fit now, asks for nothing the queue covers, or may be admitted in part
    (its smaller forms are the scheduler's to search).

    ``design``: judge by the quota design alone, as if every queue used exactly its nominal
    quota: None when it fits in its queue's own quota, BEYOND_NOMINAL when it needs others'
    idle quota, NEVER as always (the planner's and the simulator's notes).
    """
    if wl.can_be_partially_admitted():
        return None
    requests = wl.total_requests()
    decisive: list[_Numbers] = []
    for group in cq.resource_groups:
        wanted = [r for r in group.covered if requests.get(r, 0) > 0]
        if not wanted:
            continue
        per_flavor = [[_numbers(cq, node, f, r, requests[r], design) for r in wanted] for f in group.flavors]
        if not per_flavor:
            continue
        ever = [rows for rows in per_flavor if all(n.needed <= n.most for n in rows)]
        if not ever:
            # The flavor that comes closest, by its shortest resource, says why.
            best = max(per_flavor, key=lambda rows: min(n.most * 1000 // max(1, n.needed) for n in rows))
            short = min(best, key=lambda n: n.most * 1000 // max(1, n.needed))
            return _verdict(NEVER, cq.name, node, short)
        if any(all(n.needed <= n.free for n in rows) for rows in ever):
            continue  # this group fits now
        rows = ever[0]
        decisive.append(max(rows, key=lambda n: n.needed - n.free))
    if not decisive:
        return None
    first = decisive[0]
    kind = BEYOND_NOMINAL if first.needed > first.nominal else WITHIN_NOMINAL
    return _verdict(kind, cq.name, node, first, design)


def never_fits(state: State, wl: Workload) -> bool:
    """`of` said NEVER, answered cheaply: the views ask it of every pending workload a metrics
    scrape counts, so only the most each flavor could ever hold is looked at."""
    if wl.admission is not None or wl.finished or wl.can_be_partially_admitted():
        return False
    cq_name = state.route_of(wl)
    node = state.nodes.get(cq_name) if cq_name is not None else None
    cq = state.cluster_queues.get(cq_name) if cq_name is not None else None
    if node is None or cq is None:
        return False
    requests = wl.total_requests()
    for group in cq.resource_groups:
        wanted = [r for r in group.covered if requests.get(r, 0) > 0]
        if wanted and not any(
            all(requests[r] <= cohort_tree.potential_available(node, (f, r)) for r in wanted)
            for f in group.flavors
        ):
            return True
    return False


def _numbers(
    cq: specs.ClusterQueue, node: Node, flavor: str, resource: str, needed: int, design: bool
) -> _Numbers:
    fr = (flavor, resource)
    quota = cq.quotas.get(fr)
    nominal = quota.nominal if quota is not None else 0
    return _Numbers(
        flavor=flavor,
        resource=resource,
        needed=needed,
        nominal=nominal,
        most=cohort_tree.potential_available(node, fr),
        free=nominal if design else max(0, cohort_tree.available(node, fr)),
    )


def _others(node: Node, fr: tuple[str, str]) -> tuple[int, int]:
    """The nominal quota of ``fr`` of the other ClusterQueues of ``node``'s tree, and how much
    of it they use themselves (what they use beyond it is borrowed, not theirs)."""
    others_nominal = others_used = 0
    for leaf in node.root().cluster_queues():
        if leaf is node:
            continue
        own = leaf.quotas.get(fr)
        mine = own.nominal if own is not None else 0
        others_nominal += mine
        others_used += min(mine, leaf.usage.get(fr, 0))
    return others_nominal, others_used


def _verdict(kind: str, cq_name: str, node: Node, n: _Numbers, design: bool = False) -> Verdict:
    def q(value: int) -> str:
        return format_resource(n.resource, value)

    others_nominal, others_used = _others(node, (n.flavor, n.resource)) if kind == BEYOND_NOMINAL else (0, 0)

    asks = f"needs {q(n.needed)} {n.resource} in flavor {n.flavor}"
    if kind == NEVER:
        lend = max(0, n.most - n.nominal)
        sentence = (
            f"never fits: {asks}, and ClusterQueue {cq_name} can never use more than {q(n.most)} of it "
            f"(its nominal {q(n.nominal)} + at most {q(lend)} borrowed, by the cohort's quotas, "
            "lendingLimits and its borrowingLimit); change the quota design or the request"
        )
    elif design:
        sentence = (
            f"by design: {asks}, {q(n.needed - n.nominal)} more than ClusterQueue {cq_name}'s nominal "
            f"{q(n.nominal)}; it runs only while the other queues of its cohort leave that much of their "
            f"{q(others_nominal)} idle at once (they may use it, and take it back, at any time)"
        )
    elif kind == BEYOND_NOMINAL:
        sentence = (
            f"not now: {asks}, {q(n.needed - n.nominal)} more than ClusterQueue {cq_name}'s nominal "
            f"{q(n.nominal)}; that part must be borrowed, and the other queues of its cohort lend only "
            f"what they leave idle (they use {q(others_used)} of their {q(others_nominal)} now); "
            f"{q(n.free)} is free for it now: it runs when {q(n.needed - n.free)} more is idle at once"
        )
    else:
        sentence = (
            f"not now: {asks}, within ClusterQueue {cq_name}'s nominal {q(n.nominal)}; {q(n.free)} is "
            f"free for it now: it could fit when {q(n.needed - n.free)} more frees"
        )
    return Verdict(kind, cq_name, n.flavor, n.resource, n.needed, n.nominal, n.most, n.free, sentence)
