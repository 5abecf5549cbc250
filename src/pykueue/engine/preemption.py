"""Preemption: which admitted workloads must go so that a pending one fits.

Two questions are answered here, both against the live cohort tree with every
simulated change undone before returning:

* `Preemptor.simulate` — the flavor assigner's *oracle*: could preemption
  make ``value`` of one flavor-resource fit, by reclaiming quota lent to other
  queues or by preempting in the preemptor's own queue?
* `Preemptor.targets` — the minimal set of workloads to evict so that the
  whole assignment fits.

Classical preemption follows upstream Kueue's rules:

1. Candidates are the admitted workloads that use a flavor-resource needing
   preemption and that the ClusterQueue's policies allow: ``withinClusterQueue``
   for its own workloads, ``reclaimWithinCohort`` for workloads of queues in the
   cohort tree that use more than their nominal quota, and
   ``borrowWithinCohort`` (with ``maxPriorityThreshold``) for preempting while
   the preemptor itself borrows.
2. Candidates are grouped — reclaimable in the hierarchy, from other queues,
   from the own queue — and within a group ordered: workloads already being
   evicted first, other queues' before the own, lower priority first, the most
   recently admitted first, then by uid.
3. Candidates are removed one by one until the preemptor fits (first allowing
   borrowing, then not, or the other way round as the policies demand); then
   every target that is not needed is put back, newest decision first, so the
   set is minimal.

Fair sharing replaces step 2 and 3 with share-based strategies
(`pykueue.engine.fair_sharing`).

pykueue's opt-in cost-aware preemption (a `PreemptionCost` on the preemptor's
ClusterQueue, a Cohort above it or the site, `targets.cost_policy`, docs/governance.md)
keeps step 1 and 3 and one tie-breaker of step 2: among candidates of equal standing,
the one that loses the least work goes first rather than the most recently admitted
(`pykueue.engine.lost_work`; under fair sharing too, within the queue the shares pick);
with ``waitForEnd`` the preemptor stops nothing while victims its rules (or the fair-sharing
strategies) allow and that their declared limit ends soon would make room on their own; with ``maxLostWork``
it stops nothing while the victims chosen would lose more than that and it has waited
less than ``putOffFor`` (`engine.put_offs` keeps when that ends).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from pykueue.api.governance import PreemptionCost
from pykueue.engine import cohort_tree, contract, fair_sharing, lost_work, put_offs, specs
from pykueue.engine.cohort_tree import Node
from pykueue.engine.evictions import IN_COHORT_RECLAIM_WHILE_BORROWING
from pykueue.engine.flavor_assigner import Assignment, Mode, Possibility
from pykueue.engine.resources import FlavorResource, Quantities
from pykueue.engine.targets import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAMATION,
    Target,
    Trial,
    candidate_order_key,
    cost_policy,
    cost_policy_owner,
    explain_wait_for_end,
    is_evicting,
    satisfies_policy,
)
from pykueue.engine.workloads import Workload


class Variant(Enum):
    """How a candidate may be preempted (upstream's preemptionVariant)."""

    NEVER = 0
    WITHIN_CQ = 1
    HIERARCHICAL_RECLAIM = 2
    RECLAIM_WITHOUT_BORROWING = 3
    RECLAIM_WHILE_BORROWING = 4

    def reason(self) -> str:
        if self == Variant.WITHIN_CQ:
            return IN_CLUSTER_QUEUE
        if self == Variant.RECLAIM_WHILE_BORROWING:
            return IN_COHORT_RECLAIM_WHILE_BORROWING
        return IN_COHORT_RECLAMATION


# A candidate of another ClusterQueue that is preemptible only because of how much the
# preemptor asks for: within its own (or its subtree's) quota, or without borrowing.
SIZE_BOUND = frozenset({Variant.HIERARCHICAL_RECLAIM, Variant.RECLAIM_WITHOUT_BORROWING})


@dataclass(slots=True)
class _Candidate:
    workload: Workload
    cluster_queue: str
    lca: Node | None
    variant: Variant


def within_nominal(node: Node, frs: Iterable[FlavorResource]) -> bool:
    return all(node.subtree_quota.get(fr, 0) >= node.usage.get(fr, 0) for fr in frs)


def frs_needing_preemption(assignment: Assignment) -> set[FlavorResource]:
    return {
        (choice.flavor, resource)
        for ps in assignment.pod_sets
        for resource, choice in ps.flavors.items()
        if choice.mode == Mode.PREEMPT
    }


@dataclass(slots=True)
class Preemptor(Trial):
    """Preemption decisions over one state, for one scheduling cycle."""

    # -------------------------------------------------------------- entry points

    def simulate(self, cq_name: str, wl: Workload, fr: FlavorResource, value: int) -> tuple[Possibility, int]:
        node = self.state.nodes[cq_name]
        targets = self._targets(cq_name, wl, {fr}, {fr: value})
        if not targets:
            borrow, _ = cohort_tree.lowest_fitting_height(node, fr, value)
            return Possibility.NO_CANDIDATES, borrow
        with self.undone():
            for target in targets:
                self.remove(target.workload, target.cluster_queue)
            borrow, _ = cohort_tree.lowest_fitting_height(node, fr, value)
        if any(t.cluster_queue == cq_name for t in targets):
            return Possibility.PREEMPT, borrow
        return Possibility.RECLAIM, borrow

    def targets(self, cq_name: str, wl: Workload, assignment: Assignment) -> list[Target]:
        frs = frs_needing_preemption(assignment)
        return self._targets(cq_name, wl, frs, dict(assignment.usage))

    def _targets(
        self, cq_name: str, wl: Workload, frs: set[FlavorResource], requests: Quantities
    ) -> list[Target]:
        if self.state.config.fair_sharing.enable:
            found = fair_sharing.fair_preemptions(self, cq_name, wl, frs, requests)
        else:
            found = self._classical(cq_name, wl, frs, requests)
        cost = cost_policy(self.state, cq_name)
        if found and cost is not None and self._put_off(cost, cq_name, wl, found, frs, requests):
            return []
        return found

    # ----------------------------------------------------------------- classical

    def _classical(
        self, cq_name: str, wl: Workload, frs: set[FlavorResource], requests: Quantities
    ) -> list[Target]:
        cq = self.state.cluster_queues[cq_name]
        node = self.state.nodes[cq_name]
        same = self._same_queue_candidates(cq, wl, frs)
        hierarchy, priority = self._hierarchy_candidates(cq, node, wl, frs, requests)
        now = self.state.now

        afs_queues = (
            {name for name in self.state.cluster_queues if self.state.uses_afs(name)}
            if self.state.afs is not None
            else set()
        )

        def upstream_key(c: _Candidate) -> tuple[object, ...]:
            usage = self.state.afs_usage(c.workload) if c.cluster_queue in afs_queues else 0.0
            return candidate_order_key(c.workload, c.cluster_queue, cq_name, now, usage)

        key: Callable[[_Candidate], tuple[object, ...]] = upstream_key
        cost = cost_policy(self.state, cq_name)
        if cost is not None and cost.least_lost:  # pykueue's opt-in policy (docs/governance.md)
            key = _least_lost_key(upstream_key, now, {fr: requests.get(fr, 0) for fr in frs})

        def ordered(items: list[_Candidate]) -> list[_Candidate]:
            return sorted(items, key=key)

        groups = [ordered(hierarchy), ordered(priority), ordered(same)]
        evicting = [c for g in groups for c in g if c.workload.conditions and is_evicting(c.workload)]
        candidates = evicting + [c for g in groups for c in g if not evicting or c not in evicting]
        forbidden = cq.preemption.borrow_within_cohort == specs.NEVER
        if (not hierarchy and not priority) or (forbidden and not self._under_nominal(cq, node, frs)):
            attempts = [True]
        elif forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        if cost is not None and cost.wait_for_end is not None:
            soon = self._ends_soon(candidates, attempts, cq_name, frs, requests, now + cost.wait_for_end)
            if soon:
                explain_wait_for_end(self.state, cq_name, wl, [t.workload for t in soon], cost.wait_for_end)
                return []
        return self._search(candidates, attempts, cq_name, frs, requests)

    def _put_off(
        self,
        cost: PreemptionCost,
        cq_name: str,
        wl: Workload,
        found: list[Target],
        frs: set[FlavorResource],
        requests: Quantities,
    ) -> bool:
        """Should ``wl`` wait rather than stop ``found``? Yes while its victims would lose more
        than ``max_lost`` of work its size and it has waited less than ``put_off_for`` since it
        was queued; the moment that ends is kept (`State.put_off`) so a cycle runs then."""
        if cost.max_lost is None or cost.put_off_for is None:
            return False
        now = self.state.now
        contended = {fr: requests.get(fr, 0) for fr in frs}
        lost = sum(lost_work.sized(t.workload, now, contended) for t in found)
        if lost <= cost.max_lost:
            return False
        until = (wl.evicted_at if wl.evicted_at is not None else wl.created) + cost.put_off_for
        if until <= now:
            return False
        self.state.put_off.note(wl.key, cq_name, until)
        owner = cost_policy_owner(self.state, cq_name)
        self.state.put_off.explain(
            wl.key, self.state.cycle, put_offs.put_off_words(owner, lost, cost.max_lost, until)
        )
        return True

    def _search(
        self,
        candidates: list[_Candidate],
        attempts: list[bool],
        cq_name: str,
        frs: set[FlavorResource],
        requests: Quantities,
    ) -> list[Target]:
        """Upstream's greedy removal in the candidates' order, then the minimal set; the tree
        is left as it was (the targets are only named)."""
        for allow_borrowing in attempts:
            with self.undone():
                targets: list[Target] = []
                for candidate in candidates:
                    if not self._valid(candidate, cq_name, frs, allow_borrowing):
                        continue
                    self.remove(candidate.workload, candidate.cluster_queue)
                    targets.append(
                        Target(
                            candidate.workload,
                            candidate.cluster_queue,
                            candidate.variant.reason(),
                            candidate.variant in SIZE_BOUND,
                        )
                    )
                    if self.fits(cq_name, requests, allow_borrowing):
                        return self.fill_back(targets, cq_name, requests, allow_borrowing)
        return []

    def _ends_soon(
        self,
        candidates: list[_Candidate],
        attempts: list[bool],
        cq_name: str,
        frs: set[FlavorResource],
        requests: Quantities,
        by: int,
    ) -> list[Target]:
        """The candidates whose declared limit ends them by ``by`` that would make room on their
        own (the fewest the search needs), or [] when they would not. Then the preemptor waits
        for them (`PreemptionCost.wait_for_end`) and stops nothing."""
        soon = [c for c in candidates if lost_work.ends_by(c.workload, by)]
        return self._search(soon, attempts, cq_name, frs, requests) if soon else []

    @staticmethod
    def _under_nominal(cq: specs.ClusterQueue, node: Node, frs: set[FlavorResource]) -> bool:
        for fr in frs:
            quota = cq.quotas.get(fr)
            if (quota.nominal if quota else 0) <= node.usage.get(fr, 0):
                return False
        return True

    def _valid(
        self, candidate: _Candidate, cq_name: str, frs: set[FlavorResource], allow_borrowing: bool
    ) -> bool:
        if candidate.cluster_queue == cq_name:
            return True
        if allow_borrowing and candidate.variant == Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.state.nodes[candidate.cluster_queue]
        if within_nominal(node, frs):
            return False
        for ancestor in node.path_to_root():
            if ancestor is candidate.lca:
                break
            if within_nominal(ancestor, frs):
                return False
        return True

    def _from_queue(
        self,
        cq: specs.ClusterQueue,
        preemptor: Workload,
        source: str,
        lca: Node | None,
        frs: set[FlavorResource],
        advantage: bool,
    ) -> list[_Candidate]:
        """The admitted workloads of ``source`` that ``preemptor`` may preempt, and how.

        Upstream's classification, hoisted out of the loop: the policy and the variant
        depend on the source queue, only the priority checks on each workload.
        """
        same = source == cq.name
        policy = cq.preemption.within_cluster_queue if same else cq.preemption.reclaim_within_cohort
        if policy == specs.NEVER or (
            policy not in (specs.ANY, specs.LOWER_PRIORITY, specs.LOWER_OR_NEWER_EQUAL)
        ):
            return []
        if same:
            fixed: Variant | None = Variant.WITHIN_CQ
        elif advantage:
            fixed = Variant.HIERARCHICAL_RECLAIM
        elif cq.preemption.borrow_within_cohort == specs.NEVER:
            fixed = Variant.RECLAIM_WITHOUT_BORROWING
        else:
            fixed = None  # depends on the candidate's priority and the threshold
        threshold = cq.preemption.max_priority_threshold
        mine = preemptor.priority
        result = []
        source_cq = self.state.cluster_queues.get(source)
        guarded = source_cq is not None and source_cq.contract is not None
        now = self.state.now
        for wl in self.state.admitted.get(source, {}).values():
            admission = wl.admission
            if admission is None or frs.isdisjoint(admission.flavor_resources()):
                continue
            if guarded and not is_evicting(wl) and contract.protected(source_cq, wl, now):
                continue
            if policy != specs.ANY and not satisfies_policy(preemptor, wl, policy):
                continue
            variant = fixed
            if variant is None:
                above = wl.priority >= mine or (threshold is not None and wl.priority > threshold)
                variant = Variant.RECLAIM_WITHOUT_BORROWING if above else Variant.RECLAIM_WHILE_BORROWING
            result.append(_Candidate(wl, source, lca, variant))
        return result

    def _same_queue_candidates(
        self, cq: specs.ClusterQueue, wl: Workload, frs: set[FlavorResource]
    ) -> list[_Candidate]:
        if cq.preemption.within_cluster_queue == specs.NEVER:
            return []
        return self._from_queue(cq, wl, cq.name, None, frs, False)

    def _hierarchy_candidates(
        self, cq: specs.ClusterQueue, node: Node, wl: Workload, frs: set[FlavorResource], requests: Quantities
    ) -> tuple[list[_Candidate], list[_Candidate]]:
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        if node.parent is None or cq.preemption.reclaim_within_cohort == specs.NEVER:
            return hierarchy, priority
        advantage, remaining = _fit_in_quota(node, requests)
        previous: Node | None = None
        for root in node.path_to_root():
            bucket = hierarchy if advantage else priority
            self._collect_subtree(cq, node, wl, root, root, previous, frs, advantage, bucket)
            fits, remaining = _fit_in_quota(root, remaining)
            advantage = advantage or fits
            previous = root
        return hierarchy, priority

    def _collect_subtree(
        self,
        cq: specs.ClusterQueue,
        cq_node: Node,
        wl: Workload,
        current: Node,
        subtree_root: Node,
        skip: Node | None,
        frs: set[FlavorResource],
        advantage: bool,
        result: list[_Candidate],
    ) -> None:
        for child in current.children:
            if child is skip or child is cq_node:
                continue
            if child.is_cohort:
                if not within_nominal(child, frs):
                    self._collect_subtree(cq, cq_node, wl, child, subtree_root, skip, frs, advantage, result)
            elif not within_nominal(child, frs):
                result.extend(self._from_queue(cq, wl, child.name, subtree_root, frs, advantage))


def _least_lost_key(
    upstream: Callable[[_Candidate], tuple[object, ...]], now: int, requests: Quantities
) -> Callable[[_Candidate], tuple[object, ...]]:
    """Upstream's candidate order with its "most recently admitted first" replaced by "the least
    lost work first" (`lost_work.weight` over the contended ``requests``).

    Everything before it stays: being evicted, other queues before the own, the lowest
    priority first. Keeping the priority matters: a victim of a higher priority than a
    candidate left running would come back and preempt that one in turn (under
    ``LowerPriority``), losing work twice."""

    def key(c: _Candidate) -> tuple[object, ...]:
        base = upstream(c)
        return (*base[:4], lost_work.weight(c.workload, now, requests), *base[5:])

    return key


def _fit_in_quota(node: Node, requests: Quantities) -> tuple[bool, Quantities]:
    fits = True
    remaining: Quantities = {}
    for fr, value in requests.items():
        if node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + value:
            fits = False
        remaining[fr] = max(0, value - node.local_available(fr))
    return fits, remaining
