"""Topology-aware scheduling as a step of a workload's flavor assignment.

Quota comes first: flavors are assigned as for any workload, a topology-aware
flavor being acceptable only to pod sets that ask for TAS (`flavor_mismatch`).
Then, as upstream's scheduler does:

    fit       quota fits: place every TAS pod set on its flavor's nodes as they
              are; a pod set that cannot be placed makes the workload need
              preemption (the nodes may be full of preemptible pods)
    preempt   quota or placement needs preemption: place again as if no TAS
              workload ran; if even that fails the workload cannot fit (NoFit,
              TopologyPlacementFailed), else every TAS pod set needs preemption
              and the targets are chosen so that it can then be placed (`fits`)

Pod sets of one group (``podset-group-name``) are placed together, and the
pods placed for one group are assumed on their nodes while the next is placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pykueue.engine import specs
from pykueue.engine.flavor_assigner import Assignment, Mode, PodSetResult
from pykueue.engine.topology_assigner import Placer
from pykueue.engine.topology_assignments import TopologyAssignment
from pykueue.engine.topology_snapshot import Cluster, FlavorSnapshot, Placement, Requests, pod_requests
from pykueue.engine.topology_types import PodSetPlacement
from pykueue.engine.workloads import PodSet, Workload

TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"


@dataclass(frozen=True, slots=True)
class Settings:
    """The engine configuration TAS reads (feature gates)."""

    enabled: bool = True
    least_free_mixed: bool = True  # TASProfileMixed


def is_tas_only(cq: specs.ClusterQueue, flavors: Mapping[str, specs.ResourceFlavor]) -> bool:
    names = cq.flavors()
    return bool(names) and all(name in flavors and bool(flavors[name].topology_name) for name in names)


def is_implied(pod_set: PodSet, tas_only: bool) -> bool:
    return tas_only and (pod_set.topology is None or not pod_set.topology.explicit())


def is_requested(pod_set: PodSet, tas_only: bool) -> bool:
    return (pod_set.topology is not None and pod_set.topology.explicit()) or is_implied(pod_set, tas_only)


def flavor_mismatch(
    cluster: Cluster,
    flavor: specs.ResourceFlavor,
    pod_set: PodSet,
    covered: tuple[str, ...],
    tas_only: bool,
) -> str:
    """Why a pod set cannot take a flavor because of TAS, or "" (upstream's wording)."""
    if is_requested(pod_set, tas_only):
        if is_implied(pod_set, tas_only):
            return ""
        if not flavor.topology_name:
            if not any(resource in covered for resource in pod_set.pod_requests):
                return ""  # this flavor gives only resources the TAS flavor does not
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        snap = cluster.snapshot(flavor)
        if snap is None:
            return f'Flavor "{flavor.name}" information missing in TAS cache'
        request = pod_set.topology
        if request is None or any(snap.level_index(level) < 0 for level in request.levels()):
            return f'Flavor "{flavor.name}" does not contain the requested level'
        return ""
    if flavor.topology_name:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    return ""


# ----------------------------------------------------------------- requests


@dataclass(slots=True)
class _Request:
    placement: PodSetPlacement
    result: PodSetResult
    group: str


def _requests(
    cluster: Cluster,
    wl: Workload,
    cq: specs.ClusterQueue,
    flavors: Mapping[str, specs.ResourceFlavor],
    assignment: Assignment,
    delayed: frozenset[str] = frozenset(),
) -> dict[str, list[_Request]]:
    """The TAS pod sets of an assignment, per TAS flavor, in pod set order. A pod set on a
    flavor of ``delayed`` is marked delayed and left out: its topology is assigned in a
    second pass, after the ProvisioningRequest (upstream's delayedTopologyRequest)."""
    tas_only = is_tas_only(cq, flavors)
    result: dict[str, list[_Request]] = {}
    by_name = {ps.name: (index, ps) for index, ps in enumerate(wl.pod_sets)}
    for ps_result in assignment.pod_sets:
        index, pod_set = by_name[ps_result.name]
        if not is_requested(pod_set, tas_only) or ps_result.failed or ps_result.count == 0:
            continue
        if ps_result.topology is not None or ps_result.delayed:
            continue
        flavor = cluster.tas_flavor_of({r: c.flavor for r, c in ps_result.flavors.items()})
        if flavor is None:
            continue
        if flavor in delayed:
            ps_result.delayed = True
            continue
        placement = PodSetPlacement(
            name=pod_set.name,
            count=ps_result.count,
            requests=pod_requests(pod_set.pod_requests),
            request=pod_set.topology,
            implied=is_implied(pod_set, tas_only),
            tolerations=tuple(pod_set.tolerations),
            node_selector=pod_set.node_selector,
            affinity_terms=pod_set.affinity_terms,
        )
        group = pod_set.topology.group if pod_set.topology and pod_set.topology.group else f"#{index}"
        result.setdefault(flavor, []).append(_Request(placement, ps_result, group))
    return result


# ------------------------------------------------------------------ placing


def _place_flavor(
    snap: FlavorSnapshot,
    requests: list[_Request],
    settings: Settings,
    simulate_empty: bool,
    assumed: dict[str, Requests],
) -> tuple[dict[str, TopologyAssignment], tuple[str, str] | None]:
    """Place every group of one flavor, counting the pods ``assumed`` already placed (and
    adding its own); on failure, (pod set name, reason)."""
    groups: dict[str, list[_Request]] = {}
    for request in requests:
        groups.setdefault(request.group, []).append(request)
    placed: dict[str, TopologyAssignment] = {}
    for members in groups.values():
        workers, leader = _leader_and_workers(members)
        placer = Placer(snap, least_free_mixed=settings.least_free_mixed, simulate_empty=simulate_empty)
        found, reason = placer.place(workers.placement, leader.placement if leader else None, assumed)
        if reason:
            return placed, (workers.placement.name, reason)
        for member in members:
            assignment = found[member.placement.name]
            placed[member.placement.name] = assignment
            _assume(assumed, assignment, member.placement.requests)
    return placed, None


def _leader_and_workers(members: list[_Request]) -> tuple[_Request, _Request | None]:
    workers = members[0]
    if len(members) < 2:
        return workers, None
    leader = members[1]
    if leader.placement.count > workers.placement.count:
        workers, leader = leader, workers
    return workers, leader


def _assume(assumed: dict[str, Requests], assignment: TopologyAssignment, requests: Requests) -> None:
    for key, count in assignment.leaf_counts().items():
        leaf = assumed.setdefault(key, {})
        for resource, value in requests.items():
            leaf[resource] = leaf.get(resource, 0) + value * count


def place(
    cluster: Cluster,
    flavors: Mapping[str, specs.ResourceFlavor],
    requests: dict[str, list[_Request]],
    settings: Settings,
    simulate_empty: bool,
) -> tuple[dict[str, TopologyAssignment], tuple[str, str] | None]:
    placed: dict[str, TopologyAssignment] = {}
    # Pods placed on hosts so far, whichever flavor placed them: flavors whose topology
    # ends at the host may share nodes, and the pod sets of one workload must not count
    # the same free capacity twice (upstream's TASHandleOverlappingFlavors).
    on_hosts: dict[str, Requests] = {}
    for flavor in sorted(requests):
        snap = cluster.snapshot(flavors[flavor])
        if snap is None:
            return placed, (
                requests[flavor][0].placement.name,
                f'Flavor "{flavor}" information missing in TAS cache',
            )
        assumed = on_hosts if snap.lowest_is_host else {}
        found, failure = _place_flavor(snap, requests[flavor], settings, simulate_empty, assumed)
        placed.update(found)
        if failure is not None:
            return placed, failure
    return placed, None


def assign(
    cluster: Cluster,
    wl: Workload,
    cq: specs.ClusterQueue,
    flavors: Mapping[str, specs.ResourceFlavor],
    assignment: Assignment,
    settings: Settings,
    delayed: frozenset[str] = frozenset(),
) -> None:
    """Add topology assignments to a flavor assignment, changing its mode as upstream does;
    pod sets on a flavor of ``delayed`` get none yet."""
    if not settings.enabled or assignment.mode() == Mode.NO_FIT:
        return
    requests = _requests(cluster, wl, cq, flavors, assignment, delayed)
    if not requests:
        return
    results = {r.placement.name: r.result for reqs in requests.values() for r in reqs}
    if assignment.mode() == Mode.FIT:
        placed, failure = place(cluster, flavors, requests, settings, simulate_empty=False)
        if failure is None:
            for name, topology in placed.items():
                results[name].topology = topology
            return
        failed = results[failure[0]]
        failed.reasons.append(failure[1])
        _set_mode(failed, Mode.PREEMPT)
    if assignment.mode() == Mode.PREEMPT and not wl.unhealthy_nodes:
        _, failure = place(cluster, flavors, requests, settings, simulate_empty=True)
        if failure is not None:
            _set_mode(results[failure[0]], Mode.NO_FIT)
            if not assignment.no_fit_reason:
                assignment.no_fit_reason = TOPOLOGY_PLACEMENT_FAILED
            return
        for result in results.values():
            _set_mode(result, Mode.PREEMPT)


def _set_mode(result: PodSetResult, mode: Mode) -> None:
    for choice in result.flavors.values():
        choice.mode = mode
    result.tas_mode = mode


def fits(
    cluster: Cluster,
    wl: Workload,
    cq: specs.ClusterQueue,
    flavors: Mapping[str, specs.ResourceFlavor],
    assignment: Assignment,
    settings: Settings,
) -> bool:
    """Could the assignment's TAS pod sets be placed on the nodes as they are now?"""
    requests = _requests(cluster, wl, cq, flavors, assignment)
    if not requests:
        return True
    _, failure = place(cluster, flavors, requests, settings, simulate_empty=False)
    return failure is None


def place_preempting(
    cluster: Cluster,
    wl: Workload,
    cq: specs.ClusterQueue,
    flavors: Mapping[str, specs.ResourceFlavor],
    assignment: Assignment,
    settings: Settings,
    targets: list[Workload],
) -> None:
    """Where a workload that needs preemption would go once its ``targets`` are gone or,
    with none, on nodes free of every TAS workload. The scheduler holds that placement
    while the preemptions complete, so that a workload after it in the cycle cannot take
    the nodes it frees (upstream's scheduler does the same). Pod sets that cannot be
    placed keep no topology assignment."""
    if not settings.enabled or assignment.mode() != Mode.PREEMPT or wl.unhealthy_nodes:
        return
    requests = _requests(cluster, wl, cq, flavors, assignment)
    if not requests:
        return
    results = {r.placement.name: r.result for reqs in requests.values() for r in reqs}
    for target in targets:
        cluster.account(target, -1)
    try:
        placed, _ = place(cluster, flavors, requests, settings, simulate_empty=not targets)
    finally:
        for target in targets:
            cluster.account(target, +1)
    for name, topology in placed.items():
        results[name].topology = topology


def placements(cluster: Cluster, wl: Workload, assignment: Assignment) -> list[Placement]:
    """The pods an assignment places by topology, as usage the cluster can hold."""
    per_pod = {ps.name: ps for ps in wl.pod_sets}
    found: list[Placement] = []
    for result in assignment.pod_sets:
        if result.topology is None:
            continue
        flavor = cluster.tas_flavor_of({r: c.flavor for r, c in result.flavors.items()})
        if flavor is not None:
            found.append((flavor, result.topology, pod_requests(per_pod[result.name].pod_requests)))
    return found


def still_fits(
    cluster: Cluster,
    flavors: Mapping[str, specs.ResourceFlavor],
    wl: Workload,
    assignment: Assignment,
    freed: list[Placement] | None = None,
) -> bool:
    """Do the topology assignments found earlier in the cycle still fit (others were admitted
    or held nodes since), with the pods of ``freed`` gone? Pod sets on one leaf count together.
    The cluster is only read: nothing moves its usage version, so no placement cache is lost."""
    needed = _per_leaf(cluster, flavors, placements(cluster, wl, assignment))
    if needed is None:
        return False
    gone = _per_leaf(cluster, flavors, freed or []) or {}
    for slot, (snap, key, total) in needed.items():
        leaf = snap.leaves.get(key)
        if leaf is None:
            return False
        free = snap.remaining(leaf)
        back = gone[slot][2] if slot in gone else {}
        if any(free.get(resource, 0) + back.get(resource, 0) < value for resource, value in total.items()):
            return False
    return True


def _per_leaf(
    cluster: Cluster, flavors: Mapping[str, specs.ResourceFlavor], found: list[Placement]
) -> dict[tuple[int, str], tuple[FlavorSnapshot, str, Requests]] | None:
    """Requests per leaf (None: a flavor has no tree). Flavors ending at the host share their
    usage map, so a slot is (usage map, leaf): one per node."""
    per_leaf: dict[tuple[int, str], tuple[FlavorSnapshot, str, Requests]] = {}
    for flavor, topology, requests in found:
        spec = flavors.get(flavor)
        snap = cluster.snapshot(spec) if spec is not None else None
        if snap is None:
            return None
        for key, count in topology.leaf_counts().items():
            slot = (id(snap.usage), key)
            total = per_leaf[slot][2] if slot in per_leaf else {}
            for resource, value in requests.items():
                total[resource] = total.get(resource, 0) + value * count
            per_leaf[slot] = (snap, key, total)
    return per_leaf
