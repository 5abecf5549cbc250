"""Fair sharing: dominant resource shares, the fair order of a cycle, fair preemption.

The *dominant resource share* (DRS) of a ClusterQueue or Cohort is how much it
borrows beyond its own subtree quota, relative to what its parent could lend
it, taking the resource where that ratio is highest (per mille), divided by
the node's ``fairSharing.weight``. A node that borrows nothing has share 0; a
node of weight 0 that borrows has an infinite share and always loses.

Under fair sharing a cycle admits, inside each cohort tree, the entry whose
queue would have the lowest share after admission, decided by a tournament
from the leaves to the root; and preemption takes from the queues with the
highest share, as long as the configured strategies say the preemptor's share
after admission stays at most the target's:

* ``LessThanOrEqualToFinalShare`` — preemptor's new share <= target's share
  after losing the workload;
* ``LessThanInitialShare`` — preemptor's new share < target's current share.

Shares are compared at the two children of the lowest common ancestor of the
preemptor's and the target's queues, so hierarchical cohorts compete as units.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from pykueue.engine import cohort_tree, contract, lost_work, specs
from pykueue.engine.cohort_tree import Node
from pykueue.engine.config import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
from pykueue.engine.entries import Entry
from pykueue.engine.resources import FlavorResource, Quantities
from pykueue.engine.state import State
from pykueue.engine.targets import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Target,
    Trial,
    candidate_order_key,
    cost_policy,
    explain_wait_for_end,
    is_evicting,
    satisfies_policy,
    usage_added,
    uses_resources,
)
from pykueue.engine.workloads import Workload


@dataclass(frozen=True, slots=True)
class Share:
    """A dominant resource share (upstream's DRS)."""

    weight: float = 1.0
    ratio: float = 0.0  # per mille of what the parent could lend
    resource: str = ""
    borrowing: bool = False
    borrowed: tuple[FlavorResource, ...] = ()

    def value(self) -> float:
        if self.ratio == 0:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    def borrowing_on(self, requested: Quantities) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    def rounded(self) -> int:
        """The integer `status.fairSharing.weightedShare` upstream reports."""
        if self.zero_weight_borrows():
            return 2**63 - 1
        return math.ceil(self.value())


NEGATIVE = Share(ratio=-1.0)


def compare(a: Share, b: Share) -> int:
    if a.zero_weight_borrows() and b.zero_weight_borrows():
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.zero_weight_borrows():
        return 1
    if b.zero_weight_borrows():
        return -1
    x, y = a.value(), b.value()
    return (x > y) - (x < y)


def share_of(node: Node, extra: Quantities | None = None) -> Share:
    """The dominant resource share of ``node``, with ``extra`` usage added."""
    if node.parent is None:
        return Share(weight=node.weight)
    borrowed_by_resource: dict[str, int] = {}
    borrowed: list[FlavorResource] = []
    for fr, quota in node.subtree_quota.items():
        amount = (extra or {}).get(fr, 0) + node.usage.get(fr, 0) - quota
        if amount > 0:
            borrowed_by_resource[fr[1]] = borrowed_by_resource.get(fr[1], 0) + amount
            borrowed.append(fr)
    if not borrowed_by_resource:
        return Share(weight=node.weight)
    lendable = _lendable(node.parent)
    ratio, dominant = 0.0, ""
    for resource in sorted(borrowed_by_resource):
        capacity = lendable.get(resource, 0)
        if capacity > 0:
            value = borrowed_by_resource[resource] * 1000.0 / capacity
            if value > ratio:
                ratio, dominant = value, resource
    return Share(node.weight, ratio, dominant, True, tuple(borrowed))


def _lendable(node: Node) -> dict[str, int]:
    result: dict[str, int] = {}
    for fr in node.root().subtree_quota:
        result[fr[1]] = result.get(fr[1], 0) + cohort_tree.potential_available(node, fr)
    return result


# ----------------------------------------------------------------- entry order


def iter_entries(state: State, entries: list[Entry]) -> Iterator[Entry]:
    """Admission order under fair sharing, decided one entry at a time.

    Each pick runs the tournament of the entry's cohort tree against the usage of
    that moment, so the entries admitted before it count, as in upstream's iterator.
    A workload preempted in the previous cycle never goes before its own preemptor
    (see `pykueue.engine.cycle_order.yield_to_preemptor`).
    """
    remaining = {entry.cluster_queue: entry for entry in entries}
    prioritize_non_borrowing = state.config.gate("FairSharingPrioritizeNonBorrowing")
    while remaining:
        name = min(remaining)
        node = state.nodes[name]
        if node.parent is None:
            winner: Entry | None = remaining[name]
        else:
            root = node.root()
            shares = _entry_shares(state, root, remaining)
            winner = _tournament(root, remaining, shares, prioritize_non_borrowing)
        assert winner is not None
        preemptor = _waiting_preemptor(winner, remaining)
        chosen = preemptor if preemptor is not None else winner
        del remaining[chosen.cluster_queue]
        yield chosen


def _waiting_preemptor(entry: Entry, remaining: dict[str, Entry]) -> Entry | None:
    by_key = {e.workload.key: e for e in remaining.values()}
    return by_key.get(entry.workload.preempted_by or "")


def _entry_shares(state: State, root: Node, remaining: dict[str, Entry]) -> dict[tuple[str, str], Share]:
    shares: dict[tuple[str, str], Share] = {}
    for cq_node in root.cluster_queues():
        entry = remaining.get(cq_node.name)
        if entry is None:
            continue
        with usage_added(cq_node, entry.assignment.usage):
            share = share_of(cq_node)
            for ancestor in cq_node.path_to_root():
                shares[(ancestor.name, entry.workload.key)] = share
                share = share_of(ancestor)
    return shares


def _tournament(
    cohort: Node, remaining: dict[str, Entry], shares: dict[tuple[str, str], Share], non_borrowing_first: bool
) -> Entry | None:
    candidates: list[Entry] = []
    for child in cohort.children:
        if child.is_cohort:
            winner = _tournament(child, remaining, shares, non_borrowing_first)
            if winner is not None:
                candidates.append(winner)
    for child in cohort.children:
        if not child.is_cohort and child.name in remaining:
            candidates.append(remaining[child.name])
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _less(current, best, cohort.name, shares, non_borrowing_first):
            best = current
    return best


def _less(
    a: Entry, b: Entry, parent: str, shares: dict[tuple[str, str], Share], non_borrowing_first: bool
) -> bool:
    if a.is_preemptor != b.is_preemptor:
        return a.is_preemptor  # waiting for its evictions: it goes first (PrioritizePreemptorWorkloads)
    a_share = shares[(parent, a.workload.key)]
    b_share = shares[(parent, b.workload.key)]
    if non_borrowing_first:
        a_borrows = a_share.borrowing_on(a.assignment.usage)
        b_borrows = b_share.borrowing_on(b.assignment.usage)
        if a_borrows != b_borrows:
            return not a_borrows
    order = compare(a_share, b_share)
    if order != 0:
        return order < 0
    if a.workload.priority != b.workload.priority:
        return a.workload.priority > b.workload.priority
    a_time, b_time = a.workload.queue_order_time(), b.workload.queue_order_time()
    if a_time != b_time:
        return a_time < b_time
    return a.workload.seq < b.workload.seq


# ------------------------------------------------------------------ preemption


@dataclass(slots=True)
class _Ordering:
    """Which ClusterQueue to take a workload from next: the one with the highest share."""

    preemptor: Trial
    cq_node: Node
    candidates: dict[str, list[Workload]]
    ancestors: set[int] = field(default_factory=set)
    pruned_queues: set[str] = field(default_factory=set)
    pruned_cohorts: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.ancestors = {id(a) for a in self.cq_node.path_to_root()}

    def has_workload(self, name: str) -> bool:
        return bool(self.candidates.get(name))

    def pop(self, name: str) -> Workload:
        return self.candidates[name].pop(0)

    def __iter__(self) -> Iterator[Node]:
        if self.cq_node.parent is None:
            while self.cq_node.name not in self.pruned_queues and self.has_workload(self.cq_node.name):
                yield self.cq_node
            return
        root = self.cq_node.root()
        while id(root) not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: Node) -> Node | None:
        best_cq: Node | None = None
        best_cq_share = NEGATIVE
        for child in cohort.children:
            if child.is_cohort or child.name in self.pruned_queues:
                continue
            share = share_of(child)
            if (not share.borrowing and child is not self.cq_node) or not self.has_workload(child.name):
                self.pruned_queues.add(child.name)
                continue
            order = compare(share, best_cq_share)
            if order == 0 and best_cq is not None:
                if self._first_key(child.name) < self._first_key(best_cq.name):
                    best_cq = child
            elif order > 0:
                best_cq, best_cq_share = child, share
        best_cohort: Node | None = None
        best_cohort_share = NEGATIVE
        for child in cohort.children:
            if not child.is_cohort or id(child) in self.pruned_cohorts:
                continue
            share = share_of(child)
            if not share.borrowing and id(child) not in self.ancestors:
                self.pruned_cohorts.add(id(child))
            elif compare(share, best_cohort_share) >= 0:
                best_cohort, best_cohort_share = child, share
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(id(cohort))
            return None
        if best_cohort is not None and compare(best_cohort_share, best_cq_share) >= 0:
            return self._next(best_cohort)
        return best_cq

    def _first_key(self, name: str) -> tuple[object, ...]:
        return candidate_order_key(
            self.candidates[name][0], name, self.cq_node.name, self.preemptor.state.now
        )

    def almost_lcas(self, target: Node) -> tuple[Node, Node]:
        lca = next(a for a in target.path_to_root() if id(a) in self.ancestors)
        return _below(self.cq_node, lca), _below(target, lca)


def _below(node: Node, lca: Node) -> Node:
    current = node
    for ancestor in node.path_to_root():
        if ancestor is lca:
            return current
        current = ancestor
    raise AssertionError("no common ancestor")


def fair_preemptions(
    preemptor: Trial, cq_name: str, wl: Workload, frs: set[FlavorResource], requests: Quantities
) -> list[Target]:
    """Targets chosen by the fair-sharing strategies, or [] when they cannot make room, or when
    a ``waitForEnd`` policy has the preemptor wait for victims that end soon."""
    state = preemptor.state
    candidates = _find_candidates(preemptor, cq_name, wl, frs, requests)
    if not candidates:
        return []
    cost = cost_policy(state, cq_name)
    if cost is not None and cost.wait_for_end is not None:
        # pykueue's waitForEnd (docs/governance.md), as without fair sharing: when the
        # candidates whose declared limit ends them within it would make room, chosen by the
        # same strategies from those alone, the preemptor stops nothing and waits for them.
        soon = [c for c in candidates if lost_work.ends_by(c[0], state.now + cost.wait_for_end)]
        waited = _chosen(preemptor, cq_name, soon, frs, requests) if soon else []
        if waited:
            explain_wait_for_end(state, cq_name, wl, [t.workload for t in waited], cost.wait_for_end)
            return []
    return _chosen(preemptor, cq_name, candidates, frs, requests)


def _chosen(
    preemptor: Trial,
    cq_name: str,
    candidates: list[tuple[Workload, str]],
    frs: set[FlavorResource],
    requests: Quantities,
) -> list[Target]:
    """The strategies' targets among ``candidates`` (in order), the fewest needed, or []."""
    state = preemptor.state
    node = state.nodes[cq_name]
    strategies = state.config.fair_sharing.preemption_strategies or (
        LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        LESS_THAN_INITIAL_SHARE,
    )
    with preemptor.undone():
        # The shares are compared as if the preemptor were admitted.
        with usage_added(node, requests):
            fits, targets, retry = _first_strategy(preemptor, node, candidates, frs, requests, strategies[0])
            if not fits and len(strategies) > 1:
                fits, targets = _second_strategy(preemptor, node, retry, requests, targets)
        if not fits:
            return []
        return preemptor.fill_back(targets, cq_name, requests, True)


def _find_candidates(
    preemptor: Trial, cq_name: str, wl: Workload, frs: set[FlavorResource], requests: Quantities
) -> list[tuple[Workload, str]]:
    state = preemptor.state
    cq = state.cluster_queues[cq_name]
    node = state.nodes[cq_name]
    found: list[tuple[Workload, str]] = []
    if cq.preemption.within_cluster_queue != specs.NEVER:
        for other in state.admitted.get(cq_name, {}).values():
            if (
                satisfies_policy(wl, other, cq.preemption.within_cluster_queue)
                and uses_resources(other, frs)
                and not _protected(state, cq_name, other)
            ):
                found.append((other, cq_name))
    if node.parent is not None and cq.preemption.reclaim_within_cohort != specs.NEVER:
        for other_node in node.root().cluster_queues():
            if other_node is node or not _borrowing_in(state, other_node, frs):
                continue
            for other in state.admitted.get(other_node.name, {}).values():
                if (
                    satisfies_policy(wl, other, cq.preemption.reclaim_within_cohort)
                    and uses_resources(other, frs)
                    and not _protected(state, other_node.name, other)
                ):
                    found.append((other, other_node.name))
    cost = cost_policy(state, cq_name)
    least_lost = cost is not None and cost.least_lost
    contended = {fr: requests.get(fr, 0) for fr in frs}

    def key(item: tuple[Workload, str]) -> tuple[object, ...]:
        base = candidate_order_key(item[0], item[1], cq_name, state.now, preemptor.lq_usage(item[0], item[1]))
        if not least_lost:
            return base
        # pykueue's leastLostWork (docs/governance.md): within a queue the strategies take
        # its candidates in this order, so among equals the least lost work goes first
        # instead of the most recently admitted; which queue gives one stays the shares' choice.
        return (*base[:4], lost_work.weight(item[0], state.now, contended), *base[5:])

    found.sort(key=key)
    return found


def _protected(state: State, cq_name: str, wl: Workload) -> bool:
    """Kept out of the candidates by its ClusterQueue's preemption contract (engine/contract.py)."""
    if cq_name not in state.contract_queues:
        return False
    cq = state.cluster_queues.get(cq_name)
    if cq is None or cq.contract is None or is_evicting(wl):
        return False
    return contract.protected(cq, wl, state.now)


def _borrowing_in(state: State, node: Node, frs: set[FlavorResource]) -> bool:
    cq = state.cluster_queues[node.name]
    for fr in frs:
        quota = cq.quotas.get(fr)
        if (quota.nominal if quota else 0) < node.usage.get(fr, 0):
            return True
    return False


def _fits_with_own_usage_removed(preemptor: Trial, node: Node, requests: Quantities) -> bool:
    with usage_added(node, requests, -1):
        return preemptor.fits(node.name, requests, True)


def _passes(strategy: str, preemptor_new: Share, target_old: Share, target_new: Share) -> bool:
    if strategy == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return compare(preemptor_new, target_new) <= 0
    return compare(preemptor_new, target_old) < 0


def _first_strategy(
    preemptor: Trial,
    node: Node,
    candidates: list[tuple[Workload, str]],
    frs: set[FlavorResource],
    requests: Quantities,
    strategy: str,
) -> tuple[bool, list[Target], list[tuple[Workload, str]]]:
    state = preemptor.state
    ordering = _Ordering(preemptor, node, _group(candidates))
    targets: list[Target] = []
    retry: list[tuple[Workload, str]] = []
    within_nominal = state.config.gate("FairSharingPreemptWithinNominal") and not _borrowing_in(
        state, node, frs
    )
    for target_node in ordering:
        name = target_node.name
        if target_node is node or within_nominal:
            victim = ordering.pop(name)
            preemptor.remove(victim, name)
            reason = IN_CLUSTER_QUEUE if target_node is node else IN_COHORT_RECLAMATION
            targets.append(Target(victim, name, reason))
            if _fits_with_own_usage_removed(preemptor, node, requests):
                return True, targets, []
            continue
        mine, theirs = ordering.almost_lcas(target_node)
        preemptor_new, target_old = share_of(mine), share_of(theirs)
        if math.isinf(preemptor_new.value()) and not math.isinf(target_old.value()):
            while ordering.has_workload(name):
                retry.append((ordering.pop(name), name))
            continue
        while ordering.has_workload(name):
            victim = ordering.pop(name)
            preemptor.remove(victim, name)
            target_new = share_of(theirs)
            preemptor.restore(victim, name)
            if _passes(strategy, preemptor_new, target_old, target_new):
                preemptor.remove(victim, name)
                targets.append(Target(victim, name, IN_COHORT_FAIR_SHARING))
                if _fits_with_own_usage_removed(preemptor, node, requests):
                    return True, targets, []
                break
            retry.append((victim, name))
    return False, targets, retry


def _second_strategy(
    preemptor: Trial,
    node: Node,
    retry: list[tuple[Workload, str]],
    requests: Quantities,
    targets: list[Target],
) -> tuple[bool, list[Target]]:
    ordering = _Ordering(preemptor, node, _group(retry))
    for target_node in ordering:
        name = target_node.name
        mine, theirs = ordering.almost_lcas(target_node) if target_node is not node else (node, node)
        passed = compare(share_of(mine), share_of(theirs)) < 0
        victim = ordering.pop(name)
        if passed:
            preemptor.remove(victim, name)
            targets.append(Target(victim, name, IN_COHORT_FAIR_SHARING))
            if _fits_with_own_usage_removed(preemptor, node, requests):
                return True, targets
        ordering.pruned_queues.add(name)
    return False, targets


def _group(items: list[tuple[Workload, str]]) -> dict[str, list[Workload]]:
    grouped: dict[str, list[Workload]] = {}
    for wl, name in items:
        grouped.setdefault(name, []).append(wl)
    return grouped
