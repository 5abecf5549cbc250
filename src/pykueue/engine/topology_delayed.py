"""Topology assigned after a ProvisioningRequest: upstream's delayed topology request.

A ClusterQueue may send a workload's pods to nodes that do not exist yet: a
ProvisioningRequest admission check (controller ``kueue.x-k8s.io/provisioning-request``)
asks a cluster autoscaler for them. Placing the pods before those nodes exist would
place them on the wrong ones, so, as upstream does, a TAS pod set on a flavor such a
check applies to gets quota only when its workload is first admitted:

    first pass    QuotaReserved; the pod set's assignment has no topology and says
                  ``delayedTopologyRequest: Pending``; Admitted stays False
    check Ready   the second pass (at the start of the next cycle, before any head,
                  as upstream's scheduler takes such workloads first) places the pod
                  sets on the nodes as they are then: ``delayedTopologyRequest: Ready``,
                  the topology assignment written, Admitted True

The second pass takes no quota (the workload holds it already). When the pods do not
fit it leaves the workload as it is and tries again every cycle. Pod sets on flavors no
such check applies to are placed in the first pass, as usual.
"""

from __future__ import annotations

from dataclasses import replace

from pykueue.engine import admission_checks, specs, topology_placement
from pykueue.engine.flavor_assigner import Assignment, FlavorChoice, Mode, PodSetResult
from pykueue.engine.state import State
from pykueue.engine.workloads import DELAYED_READY, Admission, Workload

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def provisioning_flavors(state: State, cq: specs.ClusterQueue) -> frozenset[str]:
    """The flavors of ``cq`` a ProvisioningRequest check applies to."""
    if not cq.admission_checks:
        return frozenset()
    found: set[str] = set()
    for name, on_flavors in cq.check_flavors().items():
        check = state.admission_checks.get(name)
        if check is None or check.controller != PROVISIONING_CONTROLLER:
            continue
        found.update(cq.flavors() if on_flavors is None else on_flavors)
    return frozenset(found)


def second_pass(state: State, settings: topology_placement.Settings) -> list[str]:
    """Place the delayed pod sets of every workload whose checks are all Ready, in key
    order; the keys of the workloads placed."""
    placed = []
    for key in sorted(state.topology_pending):
        wl = state.workloads.get(key)
        if wl is None or wl.admission is None or wl.eviction is not None:
            state.topology_settled(key)
            continue
        if not any(ps.topology_pending for ps in wl.admission.pod_sets):
            state.topology_settled(key)
            continue
        if not admission_checks.all_ready(wl) or not _place(state, wl, settings):
            continue
        state.topology_settled(key)
        placed.append(key)
    return placed


def _place(state: State, wl: Workload, settings: topology_placement.Settings) -> bool:
    assert wl.admission is not None
    cq = state.cluster_queues.get(wl.admission.cluster_queue)
    if cq is None:
        return False
    pending = {ps.name: ps for ps in wl.admission.pod_sets if ps.topology_pending}
    per_pod = {ps.name: ps for ps in wl.pod_sets}
    # The assignment the workload holds, as the flavor assigner would have found it: only
    # the pod sets still to place, each fitting its flavors (no quota is taken again).
    assignment = Assignment(
        pod_sets=[
            PodSetResult(
                name,
                ps.count,
                dict(per_pod[name].requests) if name in per_pod else {},
                flavors={res: FlavorChoice(flavor, Mode.FIT, 0) for res, flavor in ps.flavors.items()},
            )
            for name, ps in pending.items()
        ]
    )
    topology_placement.assign(state.cluster, wl, cq, state.flavors, assignment, settings)
    results = {result.name: result for result in assignment.pod_sets}
    if any(results[name].topology is None for name in pending):
        return False
    # A new admission, not the old one changed: copies of the workload (the forecasts')
    # share the old one.
    wl.admission = Admission(
        wl.admission.cluster_queue,
        [
            replace(ps, topology=results[ps.name].topology, delayed_topology=DELAYED_READY)
            if ps.name in pending
            else ps
            for ps in wl.admission.pod_sets
        ],
    )
    placements = topology_placement.placements(state.cluster, wl, assignment)
    state.cluster.account_placements(placements, +1)
    state.touch(wl.key)
    state.sync_admitted(wl)
    return True
