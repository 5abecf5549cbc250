"""Admitted TAS workloads whose nodes failed: move their pods, or evict them.

A node that fails under an admitted workload is listed in the workload's
``status.unhealthyNodes`` (upstream's node controller writes it; the engine
reads it). At the start of every cycle, as upstream's scheduler does in its
second pass, each such workload gets a replacement for the pods of the first
unhealthy node:

    drop       the failed node's domain leaves the assignment (its pods are
               the ones to place again)
    confine    with a ``required`` level the new pods must stay in the same
               domain of that level as the remaining ones
    place      the pods are placed on the flavor's healthy nodes, around the
               workload's own pods that keep running
    merge      the new domains join the remaining ones, and ``unhealthyNodes``
               is cleared

When no replacement exists the workload is evicted with reason
``NodeFailures`` (upstream's TASFailedNodeReplacementFailFast, on by
default) and goes back to its queue; with that gate off it keeps its
assignment and is tried again next cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from pykueue.engine import evictions
from pykueue.engine.state import State
from pykueue.engine.topology_assigner import Placer
from pykueue.engine.topology_assignments import Domain, TopologyAssignment
from pykueue.engine.topology_requests import SliceLayer, TopologyRequest
from pykueue.engine.topology_snapshot import Domain as TreeDomain
from pykueue.engine.topology_snapshot import FlavorSnapshot, Placement, pod_requests
from pykueue.engine.topology_types import PodSetPlacement
from pykueue.engine.workloads import PodSetAssignment, Workload

RECOVERED = "Recovered"


@dataclass(frozen=True, slots=True)
class Outcome:
    workload: str
    replaced: bool
    message: str
    evicted: bool = False
    # The pods that ran on the failed node: their node counts them for the rest of the
    # cycle (they may still be stopping), so no head of the cycle is placed there.
    left: tuple[Placement, ...] = ()


def recover(state: State, least_free_mixed: bool, fail_fast: bool) -> list[Outcome]:
    """Try every admitted workload with unhealthy nodes, in key order."""
    outcomes = []
    # Only a workload holding quota has nodes to replace: look at those, not every workload
    # (this runs every cycle; 15,000 workloads made it a tenth of the controller's CPU).
    failed = [wl for held in state.admitted.values() for wl in held.values() if wl.unhealthy_nodes]
    for wl in sorted(failed, key=lambda w: w.key):
        if wl.admission is None or wl.eviction is not None:
            continue
        outcome = _recover_one(state, wl, least_free_mixed)
        if not outcome.replaced and fail_fast:
            message = "Workload was evicted as there was no replacement for unhealthy node(s): " + ",".join(
                wl.unhealthy_nodes
            )
            wl.unhealthy_nodes = ()
            state.evict(wl.key, evictions.NODE_FAILURES, message)
            outcome = Outcome(wl.key, False, message, evicted=True)
        outcomes.append(outcome)
    return outcomes


def _recover_one(state: State, wl: Workload, least_free_mixed: bool) -> Outcome:
    assert wl.admission is not None
    failed = wl.unhealthy_nodes[0]
    updates: dict[str, TopologyAssignment] = {}
    for assignment in wl.admission.pod_sets:
        if assignment.topology is None or not any(
            d.values[-1] == failed for d in assignment.topology.domains
        ):
            continue
        found, why = _replace(state, wl, assignment, failed, least_free_mixed)
        if found is None:
            return Outcome(wl.key, False, why)
        updates[assignment.name] = found
    left = []
    per_pod = {ps.name: ps for ps in wl.pod_sets}
    for assignment in wl.admission.pod_sets:
        flavor = state.cluster.tas_flavor_of(assignment.flavors)
        if assignment.name in updates and assignment.topology is not None and flavor is not None:
            lost = tuple(d for d in assignment.topology.domains if d.values[-1] == failed)
            requests = pod_requests(per_pod[assignment.name].pod_requests)
            left.append((flavor, TopologyAssignment(assignment.topology.levels, lost), requests))
    state.cluster.account(wl, -1)
    for assignment in wl.admission.pod_sets:
        if assignment.name in updates:
            assignment.topology = updates[assignment.name]
    state.cluster.account(wl, +1)
    wl.unhealthy_nodes = wl.unhealthy_nodes[1:]
    state.touch(wl.key)
    return Outcome(wl.key, True, f"Pods of unhealthy node {failed} placed again", left=tuple(left))


def _replace(
    state: State, wl: Workload, assignment: PodSetAssignment, failed: str, least_free_mixed: bool
) -> tuple[TopologyAssignment | None, str]:
    topology = assignment.topology
    assert topology is not None
    flavor = state.cluster.tas_flavor_of(assignment.flavors)
    spec = state.flavors.get(flavor) if flavor is not None else None
    snap = state.cluster.snapshot(spec) if spec is not None else None
    pod_set = next((ps for ps in wl.pod_sets if ps.name == assignment.name), None)
    if snap is None or pod_set is None:
        return None, f"cannot find replacement assignment for unhealthy node: {failed}"
    lost = sum(d.count for d in topology.domains if d.values[-1] == failed)
    kept = tuple(d for d in topology.domains if d.values[-1] != failed)
    for domain in kept:
        if _leaf(snap, domain) is None:
            return None, (
                "Cannot replace the node, because the existing topologyAssignment is invalid, "
                f"as it contains the stale domain {domain.values[0]}"
            )
    request = pod_set.topology
    within = _replacement_domain(snap, kept, lost, request)
    placer = Placer(snap, least_free_mixed=least_free_mixed, within=within)
    placement = PodSetPlacement(
        name=pod_set.name,
        count=lost,
        requests=pod_requests(pod_set.pod_requests),
        request=_replacement_request(request, lost, within),
        implied=request is None or not request.explicit(),
        tolerations=tuple(pod_set.tolerations),
        node_selector=pod_set.node_selector,
        affinity_terms=pod_set.affinity_terms,
    )
    found, why = placer.place(placement, None, {})
    if why:
        return None, why
    new = found[pod_set.name]
    if not new.domains:
        return None, f"cannot find replacement assignment for unhealthy node: {failed}"
    return _merge(snap, topology.levels, kept, new.domains), ""


def _leaf(snap: FlavorSnapshot, domain: Domain) -> TreeDomain | None:
    return snap.leaves.get(domain.values[-1] if snap.lowest_is_host else ",".join(domain.values))


def _replacement_domain(
    snap: FlavorSnapshot, kept: tuple[Domain, ...], lost: int, request: TopologyRequest | None
) -> str:
    """The domain the lost pods must go to ("" when anywhere), as upstream chooses it.

    Lost pods that are not whole slices belong to a slice that is now broken: they go to
    the slice-level domain whose pod count they make whole again (for several slice
    layers, the innermost layer they break). Otherwise, with a ``required`` level, they
    stay in the domain of that level where the remaining pods run. When no pod remains,
    nothing confines them.
    """
    if not kept or request is None:
        return ""  # an implied request confines nothing either: it has no slices, no level
    slices = request.slices
    if slices and lost % slices[0].size:
        layer = slices[0]
        for inner in reversed(slices):
            if lost % inner.size:
                layer = inner
                break
        return _incomplete_slice_domain(snap, kept, lost, layer.size, layer.topology)
    if request.required is None:
        return ""
    return _ancestor(snap, kept[0], snap.level_index(request.required))


def _incomplete_slice_domain(
    snap: FlavorSnapshot, kept: tuple[Domain, ...], lost: int, size: int, level_name: str
) -> str:
    """The domain of the slice level whose remaining pods plus the lost ones make whole slices
    (the first such by its values, where upstream takes any: its map order is random)."""
    level = snap.level_index(level_name)
    if level < 0:
        return ""
    counts: dict[str, int] = {}
    for domain in kept:
        key = _ancestor(snap, domain, level)
        if key:
            counts[key] = counts.get(key, 0) + domain.count
    for key in sorted(counts):
        if (counts[key] + lost) % size == 0:
            return key
    return ""


def _ancestor(snap: FlavorSnapshot, domain: Domain, level: int) -> str:
    """The key of the domain of ``level`` that holds the leaf ``domain`` ("" if none)."""
    leaf = _leaf(snap, domain)
    if level < 0 or leaf is None:
        return ""
    node = leaf
    for _ in range(len(snap.levels) - 1 - level):
        assert node.parent is not None
        node = node.parent
    return node.key


def _replacement_request(request: TopologyRequest | None, lost: int, within: str) -> TopologyRequest | None:
    """The request the lost pods are placed with. Whole slices keep their slices; pods that
    complete a broken slice are grouped by the innermost layer whose size divides their
    count, or placed one by one when none does (upstream's effective slice size)."""
    if request is None or not request.slices or not within or lost % request.slices[0].size == 0:
        return request
    layers: tuple[SliceLayer, ...] = ()
    for layer in reversed(request.slices):
        if lost % layer.size == 0:
            layers = (layer,)
            break
    return TopologyRequest(request.required, request.preferred, request.unconstrained, layers, request.group)


def _merge(
    snap: FlavorSnapshot, levels: tuple[str, ...], kept: tuple[Domain, ...], new: tuple[Domain, ...]
) -> TopologyAssignment:
    counts: dict[tuple[str, ...], int] = {}
    for domain in (*kept, *new):
        counts[domain.values] = counts.get(domain.values, 0) + domain.count

    def path(values: tuple[str, ...]) -> tuple[str, ...]:
        leaf = snap.leaves.get(values[-1] if snap.lowest_is_host else ",".join(values))
        return leaf.values if leaf is not None else values

    ordered = sorted(counts.items(), key=lambda item: path(item[0]))
    return TopologyAssignment(levels, tuple(Domain(values, count) for values, count in ordered))
