"""Preemption targets and the rules that pick them, shared by classical and fair preemption.

`Target` is one workload to evict and why; the reasons are upstream's (the
``Preempted`` condition's reason and the ``kueue_preempted_workloads_total``
label). `Trial` removes candidates from the live cohort tree and puts them back,
asking whether the preemptor fits meanwhile: classical preemption
(`pykueue.engine.preemption`) and fair preemption (`pykueue.engine.fair_sharing`)
both search that way, so neither needs the other's module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pykueue.api.governance import PreemptionCost
from pykueue.engine import cohort_shape, cohort_tree, execution_time, put_offs, specs
from pykueue.engine.evictions import IN_COHORT_RECLAIM_WHILE_BORROWING
from pykueue.engine.resources import FlavorResource, Quantities
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

HUMAN_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


@dataclass(frozen=True, slots=True)
class Target:
    """One workload to evict, the queue it is admitted in, and why."""

    workload: Workload
    cluster_queue: str
    reason: str
    # Preemptible only because of how much the preemptor asks for (upstream's hierarchical
    # reclaim, or ReclaimWithoutBorrowing): its admission keeps to that size (partial_admission.py).
    size_bound: bool = False


def can_always_reclaim(cq: specs.ClusterQueue) -> bool:
    """A queue that may reclaim from anyone never needs to hold capacity while it waits."""
    return cq.preemption.reclaim_within_cohort == specs.ANY


def is_evicting(wl: Workload) -> bool:
    """Admitted but already being evicted (an input state; our own evictions complete at once)."""
    if not wl.conditions:
        return False
    cond = wl.conditions.get("Evicted")
    return cond is not None and cond.status == "True"


def satisfies_policy(preemptor: Workload, candidate: Workload, policy: str) -> bool:
    lower = preemptor.priority > candidate.priority
    if policy == specs.LOWER_PRIORITY:
        return lower
    if policy == specs.LOWER_OR_NEWER_EQUAL:
        newer_equal = (
            preemptor.priority == candidate.priority
            and preemptor.queue_order_time() < candidate.queue_order_time()
        )
        return lower or newer_equal
    return policy == specs.ANY


def candidate_order_key(
    wl: Workload, cq_name: str, preemptor_cq: str, now: int, lq_usage: float = 0.0
) -> tuple[object, ...]:
    """Upstream's candidate ordering; smaller sorts first.

    ``lq_usage`` is the admission-fair-sharing usage of the candidate's LocalQueue
    (0 when not used): the LocalQueue that used the most loses first.
    """
    reserved = wl.admitted_at if wl.admission is not None else now
    return (
        0 if is_evicting(wl) else 1,
        1 if cq_name == preemptor_cq else 0,
        -lq_usage,
        wl.priority,
        -reserved,
        wl.uid,
        wl.seq,
    )


def uses_resources(wl: Workload, frs: set[FlavorResource]) -> bool:
    if wl.admission is None:
        return False
    return not frs.isdisjoint(wl.admission.flavor_resources())


@dataclass(slots=True)
class Trial:
    """Removals tried on the live cohort tree of one state.

    Every search runs inside `undone`, which puts back on its way out whatever the search
    removed and did not restore, an exception included: the tree is the live one, so a
    removal left behind would be quota lost for every later decision.
    """

    state: State
    # Set while targets are sought for a workload placed by topology: can it be placed
    # with the removals made so far (engine/topology_placement.py)? Quota alone is not
    # enough when the free quota sits on the wrong nodes.
    tas_fits: Callable[[], bool] | None = None
    # What is removed now, oldest first: the undo log of `undone`.
    _removed: list[tuple[Workload, str]] = field(default_factory=list)

    def lq_usage(self, wl: Workload, cq_name: str) -> float:
        return self.state.afs_usage(wl) if self.state.uses_afs(cq_name) else 0.0

    # ---------------------------------------------------------------- simulation

    @contextmanager
    def undone(self) -> Iterator[None]:
        """Removals made inside are restored on the way out, however the block is left."""
        mark = len(self._removed)
        try:
            yield
        finally:
            while len(self._removed) > mark:
                wl, cq_name = self._removed[-1]
                self.restore(wl, cq_name)

    def remove(self, wl: Workload, cq_name: str) -> None:
        self._count(wl, cq_name, -1)
        self._removed.append((wl, cq_name))

    def restore(self, wl: Workload, cq_name: str) -> None:
        for i in range(len(self._removed) - 1, -1, -1):
            removed, name = self._removed[i]
            if removed is wl and name == cq_name:
                del self._removed[i]
                break
        else:
            raise AssertionError(f"{wl.key} in {cq_name} is restored but was not removed")
        self._count(wl, cq_name, +1)

    def _count(self, wl: Workload, cq_name: str, sign: int) -> None:
        node = self.state.nodes.get(cq_name)
        if node is not None:
            cohort_tree.add_usages(node, wl.usage(), sign)
        self.state.cluster.account(wl, sign)

    def fits(self, cq_name: str, requests: Quantities, allow_borrowing: bool) -> bool:
        node = self.state.nodes[cq_name]
        for fr, value in requests.items():
            if not allow_borrowing and node.borrowing_with(fr, value):
                return False
            if value > max(0, cohort_tree.available(node, fr)):
                return False
        return self.tas_fits is None or self.tas_fits()

    def fill_back(
        self, targets: list[Target], cq_name: str, requests: Quantities, allow_borrowing: bool
    ) -> list[Target]:
        """Put back every target the preemptor does not need, last-but-one first."""
        for i in range(len(targets) - 2, -1, -1):
            self.restore(targets[i].workload, targets[i].cluster_queue)
            if self.fits(cq_name, requests, allow_borrowing):
                targets[i] = targets[-1]
                targets.pop()
            else:
                self.remove(targets[i].workload, targets[i].cluster_queue)
        return targets


@contextmanager
def usage_added(node: cohort_tree.Node, requests: Quantities, sign: int = +1) -> Iterator[None]:
    """``requests`` counted on ``node`` (``sign`` -1: taken off) while the block runs, and no longer after."""
    cohort_tree.add_usages(node, requests, sign)
    try:
        yield
    finally:
        cohort_tree.add_usages(node, requests, -sign)


def cost_policy(state: State, cq_name: str) -> PreemptionCost | None:
    """The preemption-cost policy of ``cq_name``'s preemptors: its own annotation, else the
    nearest Cohort up its tree that has one, else the site default (each replaces the next
    entirely, docs/governance.md)."""
    return _cost_policy_source(state, cq_name)[0]


def cost_policy_owner(state: State, cq_name: str) -> str:
    """Where `cost_policy` found ``cq_name``'s policy, in words for its messages."""
    _, kind, name = _cost_policy_source(state, cq_name)
    return f"{kind} {name}" if kind else "the site (pykueue.preemptionCost)"


def _cost_policy_source(state: State, cq_name: str) -> tuple[PreemptionCost | None, str, str]:
    """``cq_name``'s preemption-cost policy and the kind and name of the object that sets it
    ("", "" for the site default)."""
    cq = state.cluster_queues.get(cq_name)
    if cq is None:
        return state.config.default_preemption_cost, "", ""
    if cq.preemption_cost is not None:
        return cq.preemption_cost, "ClusterQueue", cq_name
    for cohort in cohort_shape.ancestors(state.cohorts, cq.cohort):
        if cohort.preemption_cost is not None:
            return cohort.preemption_cost, "Cohort", cohort.name
    return state.config.default_preemption_cost, "", ""


def explain_wait_for_end(
    state: State, cq_name: str, wl: Workload, victims: list[Workload], wait_for_end: int
) -> None:
    """``wl`` stops nothing and waits for ``victims`` to end by their declared limit
    (`PreemptionCost.wait_for_end`); its pending message will say so (`engine.put_offs`)."""
    last = max(execution_time.deadline(v) or state.now for v in victims)
    words = put_offs.waits_for_end_words(cost_policy_owner(state, cq_name), len(victims), last, wait_for_end)
    state.put_off.explain(wl.key, state.cycle, words)
