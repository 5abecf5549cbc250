"""Choosing a ResourceFlavor for every resource of every pod set.

For each pod set and each resource group it covers, the flavors of the group
are tried in order. A flavor is skipped when its node labels or taints cannot
host the pods; otherwise each resource is checked against the quota:

* **fit** — enough unused quota (maybe borrowed from the cohort);
* **preempt / reclaim** — enough only if some admitted workloads are preempted
  (asked of the preemption *oracle*);
* **no fit** — more than the queue could ever get.

The ClusterQueue's ``flavorFungibility`` decides whether the search stops at
the first workable flavor (``MayStopSearch``) or tries the next one
(``TryNextFlavor``) when the flavor needs borrowing or preemption, and its
``preference`` which of two imperfect flavors wins. The best mode of every
resource is kept with the reasons of every flavor that failed, so a pending
workload can say exactly what was short.

The scan position is remembered between cycles (`Workload.last_tried_flavor`)
so a workload that stopped at its first flavor resumes from the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from pykueue.api.quantity import format_resource
from pykueue.engine import cohort_tree, specs
from pykueue.engine.cohort_tree import Node
from pykueue.engine.resources import PODS, FlavorResource, Quantities
from pykueue.engine.selectors import flavor_affinity_mismatch, untolerated_taint
from pykueue.engine.topology_assignments import TopologyAssignment
from pykueue.engine.workloads import PodSet, Workload

_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3


def upstream_resource_order(name: str) -> tuple[int, str]:
    """Where upstream (v0.19, VectorizedResourceRequests on by default) walks a resource among a pod set's
    requests: by the 64-bit FNV-1a hash of its name, then by name (memory comes before cpu). The first
    resource that cannot be placed decides the reason a pending workload shows, so the order is visible."""
    digest = _FNV64_OFFSET
    for byte in name.encode():
        digest = ((digest ^ byte) * _FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return digest, name


class Mode(IntEnum):
    """How a workload can use an assignment, worst first (as upstream orders them)."""

    NO_FIT = 0
    PREEMPT = 1
    DEFERRED_FIT = 2
    FIT = 3


class Possibility(IntEnum):
    """What preemption could achieve for one resource (the oracle's answer), worst first."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    def mode(self) -> Mode:
        if self == Possibility.NO_FIT:
            return Mode.NO_FIT
        if self == Possibility.FIT:
            return Mode.FIT
        return Mode.PREEMPT


# Reasons for QuotaReserved=False, most severe last.
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
WAITING_FOR_QUOTA = "WaitingForQuota"
_SEVERITY = {"": 0, WAITING_FOR_QUOTA: 2, EXCEEDS_MAX_QUOTA: 3, NO_MATCHING_FLAVOR: 4}

Oracle = Callable[[Workload, FlavorResource, int], tuple[Possibility, int]]
# Why a pod set cannot take a flavor for topology-aware scheduling reasons ("" if it can):
# (flavor, pod set, resources of the flavor's group).
TASMismatch = Callable[[specs.ResourceFlavor, PodSet, tuple[str, ...]], str]
WORST = (Possibility.NO_FIT, 1 << 30)
BEST = (Possibility.FIT, 0)


@dataclass(slots=True)
class FlavorChoice:
    flavor: str
    mode: Mode
    borrow: int


@dataclass(slots=True)
class PodSetResult:
    name: str
    count: int
    requests: dict[str, int]
    flavors: dict[str, FlavorChoice] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    failed: bool = False  # no flavor at all for some requested resource
    # Topology-aware scheduling (engine/topology_placement.py): where its pods go, and
    # the mode placing them allows (None: not placed by topology, or placed as they are).
    topology: TopologyAssignment | None = None
    tas_mode: Mode | None = None
    # Its topology waits for a ProvisioningRequest: quota only now, placed in a second pass.
    delayed: bool = False

    def mode(self) -> Mode:
        if self.tas_mode is not None and self.tas_mode < Mode.FIT:
            if self.failed or not self.flavors:
                return Mode.NO_FIT
            return min(self.tas_mode, *(choice.mode for choice in self.flavors.values()))
        if not self.reasons and not self.failed:
            return Mode.FIT
        if self.failed or not self.flavors:
            return Mode.NO_FIT
        return min(choice.mode for choice in self.flavors.values())


@dataclass(slots=True)
class Assignment:
    """The outcome of one flavor assignment of a workload."""

    pod_sets: list[PodSetResult] = field(default_factory=list)
    usage: Quantities = field(default_factory=dict)
    borrowing: int = 0
    last_tried: dict[tuple[int, str], int] = field(default_factory=dict)
    no_fit_reason: str = ""
    forced_mode: Mode | None = None

    def mode(self) -> Mode:
        if self.forced_mode is not None:
            return self.forced_mode
        if not self.pod_sets:
            return Mode.NO_FIT
        return min(ps.mode() for ps in self.pod_sets)

    def message(self) -> str:
        parts = []
        for ps in self.pod_sets:
            if ps.mode() == Mode.FIT:
                continue
            parts.append(
                f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(set(ps.reasons)))}"
            )
        return "; ".join(parts)

    def flavors_of(self, name: str) -> dict[str, str]:
        for ps in self.pod_sets:
            if ps.name == name:
                return {res: choice.flavor for res, choice in ps.flavors.items()}
        return {}

    def has_pending_flavors(self) -> bool:
        return any(idx != -1 for idx in self.last_tried.values())


def _is_preferred(a: tuple[Possibility, int], b: tuple[Possibility, int], preference: str | None) -> bool:
    """Is mode ``a`` (possibility, borrowing height) better than ``b``?"""
    if a[0] == Possibility.NO_FIT:
        return False
    if b[0] == Possibility.NO_FIT:
        return True
    a_none, b_none = a[0] == Possibility.NO_CANDIDATES, b[0] == Possibility.NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if preference == specs.PREEMPTION_OVER_BORROWING:
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _should_try_next(mode: tuple[Possibility, int], fungibility: specs.FlavorFungibility) -> bool:
    if mode[0] in (Possibility.NO_FIT, Possibility.NO_CANDIDATES):
        return True
    if mode[0] in (Possibility.PREEMPT, Possibility.RECLAIM) and (
        fungibility.when_can_preempt == specs.TRY_NEXT_FLAVOR
    ):
        return True
    return mode[1] != 0 and fungibility.when_can_borrow == specs.TRY_NEXT_FLAVOR


@dataclass(slots=True)
class FlavorAssigner:
    """Assigns flavors for one workload against the current usage of one ClusterQueue."""

    workload: Workload
    cq: specs.ClusterQueue
    node: Node
    flavors: Mapping[str, specs.ResourceFlavor]
    oracle: Oracle
    can_preempt_while_borrowing: bool
    resume_from: dict[tuple[int, str], int] | None = None
    tas_mismatch: TASMismatch | None = None

    def assign(self, counts: list[int] | None = None) -> Assignment:
        result = Assignment()
        for index, pod_set in enumerate(self.workload.pod_sets):
            # Pods that already finished (reclaimable) need no quota again.
            count = (
                pod_set.count - self.workload.reclaimable.get(pod_set.name, 0)
                if counts is None
                else counts[index]
            )
            ps_result = self._assign_pod_set(index, pod_set, count, result)
            if ps_result.failed:
                # A pod set that cannot be placed keeps none of its flavors, nor a scan
                # position to resume from (upstream drops the whole group's flavors): a
                # workload whose pod set never fits has no flavor left to try, and its
                # queue parks it instead of retrying it at once.
                ps_result.flavors = {}
                for key in [k for k in result.last_tried if k[0] == index]:
                    del result.last_tried[key]
            result.pod_sets.append(ps_result)
            for resource, choice in ps_result.flavors.items():
                result.borrowing = max(result.borrowing, choice.borrow)
                fr = (choice.flavor, resource)
                result.usage[fr] = result.usage.get(fr, 0) + ps_result.requests.get(resource, 0)
            if ps_result.failed:
                break
        if result.mode() == Mode.NO_FIT:
            result.no_fit_reason = self._no_fit_reason
        return result

    _no_fit_reason: str = ""
    # Per resource group the pod set tried: the least severe reason among its flavors that did
    # not fit (upstream's resolveNoFitReason, which weighs the groups that fitted too).
    _group_reasons: list[str] = field(default_factory=list)

    def _assign_pod_set(self, index: int, pod_set: PodSet, count: int, result: Assignment) -> PodSetResult:
        self._group_reasons = []
        requests = pod_set.total(count)
        if self.cq.group_of(PODS) is not None:
            requests[PODS] = count * 1000
        ps_result = PodSetResult(pod_set.name, count, requests)
        for resource in sorted(requests, key=upstream_resource_order):
            quantity = requests[resource]
            group = self.cq.group_of(resource)
            if group is None:
                if quantity == 0:
                    continue
                ps_result.reasons.append(f"resource {resource} unavailable in ClusterQueue")
                ps_result.failed = True
                self._note_reason(NO_MATCHING_FLAVOR)
                break
            if resource in ps_result.flavors:
                continue
            chosen, reasons = self._find_flavor(index, pod_set, group, requests, result.usage, result)
            ps_result.reasons.extend(reasons)
            if not chosen:
                ps_result.failed = True
                # The most severe across the groups; a pod set with no flavor tried at all
                # has none that matched.
                tried = self._group_reasons
                self._note_reason(
                    max(tried, key=lambda r: _SEVERITY.get(r, 0)) if tried else NO_MATCHING_FLAVOR
                )
                break
            ps_result.flavors.update(chosen)
        ps_result.flavors = {res: c for res, c in ps_result.flavors.items() if res in requests}
        return ps_result

    def _note_reason(self, reason: str) -> None:
        if _SEVERITY.get(reason, 0) >= _SEVERITY.get(self._no_fit_reason, 0):
            self._no_fit_reason = reason

    def _find_flavor(
        self,
        index: int,
        pod_set: PodSet,
        group: specs.ResourceGroup,
        requests: dict[str, int],
        assigned: Quantities,
        result: Assignment,
    ) -> tuple[dict[str, FlavorChoice], list[str]]:
        wanted = {
            res: requests[res]
            for res in sorted(requests, key=upstream_resource_order)
            if res in group.covered
        }
        first_resource = next(iter(wanted))
        reasons: list[str] = []
        best: dict[str, FlavorChoice] = {}
        best_mode = WORST
        attempted = -1
        start = 0
        if self.resume_from is not None:
            start = self.resume_from.get((index, first_resource), -1) + 1
        group_reasons: list[str] = []
        for position in range(start, len(group.flavors)):
            attempted = position
            flavor_name = group.flavors[position]
            mismatch = self._flavor_mismatch(flavor_name, pod_set, group.covered)
            if mismatch:
                reasons.append(mismatch)
                group_reasons.append(NO_MATCHING_FLAVOR)
                continue
            choices: dict[str, FlavorChoice] = {}
            representative = BEST
            flavor_reason = ""
            for resource, value in wanted.items():
                fr = (flavor_name, resource)
                possibility, borrow, why, severity = self._fits_quota(fr, assigned.get(fr, 0), value)
                if why:
                    reasons.append(why)
                    if _SEVERITY.get(severity, 0) >= _SEVERITY.get(flavor_reason, 0):
                        flavor_reason = severity
                mode = (possibility, borrow)
                if _is_preferred(representative, mode, self.cq.fungibility.preference):
                    representative = mode
                if representative[0] == Possibility.NO_FIT:
                    continue
                choices[resource] = FlavorChoice(flavor_name, possibility.mode(), borrow)
            if representative[0] == Possibility.NO_FIT:
                group_reasons.append(flavor_reason or WAITING_FOR_QUOTA)
            if not _should_try_next(representative, self.cq.fungibility):
                best, best_mode = choices, representative
                break
            if _is_preferred(representative, best_mode, self.cq.fungibility.preference):
                best, best_mode = choices, representative
        tried = -1 if attempted == len(group.flavors) - 1 else attempted
        for resource in wanted:
            result.last_tried[(index, resource)] = tried
        if group_reasons:
            # Upstream reports, per resource group, the least severe reason among its
            # flavors: the one closest to fitting is what the user can act on.
            self._group_reasons.append(min(group_reasons, key=lambda r: _SEVERITY.get(r, 0)))
        if best_mode[0] == Possibility.FIT:
            return best, []
        return best, reasons

    def _flavor_mismatch(self, flavor_name: str, pod_set: PodSet, covered: tuple[str, ...] = ()) -> str:
        flavor = self.flavors.get(flavor_name)
        if flavor is None:
            return f"flavor {flavor_name} not found"
        if self.tas_mismatch is not None:
            why = self.tas_mismatch(flavor, pod_set, covered)
            if why:
                return why
        taint = untolerated_taint(flavor.node_taints, [*pod_set.tolerations, *flavor.tolerations])
        if taint is not None:
            return f"untolerated taint {taint} in flavor {flavor_name}"
        why = flavor_affinity_mismatch(flavor.node_labels, pod_set.node_selector, pod_set.affinity_terms)
        if why:
            return f"flavor {flavor_name} doesn't match node affinity ({why})"
        return ""

    def _fits_quota(
        self, fr: FlavorResource, assumed: int, request: int
    ) -> tuple[Possibility, int, str, str]:
        """(possibility, borrowing height, reason text, reason kind) for one flavor-resource."""
        flavor, resource = fr
        value = assumed + request
        max_capacity = cohort_tree.potential_available(self.node, fr)
        if value > max_capacity:
            why = (
                f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets "
                f"requests ({_q(resource, assumed)}) + current podset request ({_q(resource, request)}) > "
                f"maximum capacity ({_q(resource, max_capacity)})"
            )
            return Possibility.NO_FIT, 0, why, EXCEEDS_MAX_QUOTA
        borrow, may_reclaim = cohort_tree.lowest_fitting_height(self.node, fr, value)
        free = max(0, cohort_tree.available(self.node, fr))
        if value <= free:
            return Possibility.FIT, borrow, "", ""
        why = f"insufficient unused quota for {resource} in flavor {flavor}, {_q(resource, value - free)} more needed"
        quota = self.cq.quotas.get(fr)
        nominal = quota.nominal if quota is not None else 0
        if nominal >= value or may_reclaim or self.can_preempt_while_borrowing:
            possibility, borrow_after = self.oracle(self.workload, fr, value)
            return (
                possibility,
                borrow_after,
                why,
                "" if possibility != Possibility.NO_FIT else WAITING_FOR_QUOTA,
            )
        return Possibility.NO_FIT, borrow, why, WAITING_FOR_QUOTA


def _q(resource: str, milli: int) -> str:
    # Upstream's resource formatter: cpu and counts in decimal units (1k), memory in binary (1Gi).
    return format_resource(resource, milli)
