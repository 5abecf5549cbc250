"""Status of ClusterQueues, Cohorts and LocalQueues, in upstream's shape.

Controllers write these documents into the objects' ``status``; the CLI and the
dashboard show them. Counts follow upstream: *pending* waits in a queue,
*reserving* holds a quota reservation, *admitted* holds it and passed every
admission check. ``flavorsReservation`` is the quota reserved,
``flavorsUsage`` the part of it held by admitted workloads; ``borrowed`` is
what exceeds the nominal quota.
"""

from __future__ import annotations

from typing import Any

from pykueue.api import quantity
from pykueue.engine import fair_sharing
from pykueue.engine.resources import Quantities, add_into
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload


def _is_admitted(wl: Workload) -> bool:
    cond = wl.conditions.get("Admitted")
    return cond is not None and cond.status == "True"


def _flavor_list(
    usage: Quantities, nominal: dict[tuple[str, str], int], keys: list[tuple[str, str]]
) -> list[Any]:
    by_flavor: dict[str, list[dict[str, str]]] = {}
    for flavor, resource in keys:
        used = usage.get((flavor, resource), 0)
        borrowed = max(0, used - nominal.get((flavor, resource), 0))
        by_flavor.setdefault(flavor, []).append(
            {
                "name": resource,
                "total": quantity.format_milli(used),
                "borrowed": quantity.format_milli(borrowed),
            }
        )
    return [{"name": flavor, "resources": resources} for flavor, resources in by_flavor.items()]


def cluster_queue_status(state: State, name: str) -> dict[str, Any]:
    """`status` of one ClusterQueue."""
    state.ensure_tree()
    cq = state.cluster_queues[name]
    queue = state.queues[name]
    reserving = list(state.admitted.get(name, {}).values())
    admitted_usage: Quantities = {}
    for wl in reserving:
        if _is_admitted(wl):
            add_into(admitted_usage, wl.usage())
    nominal = {fr: quota.nominal for fr, quota in cq.quotas.items()}
    keys = list(cq.quotas)
    reason = state.inactive_reason.get(name, "")
    condition = {
        "type": "Active",
        "status": "False" if reason else "True",
        "reason": state.inactive_kind.get(name, "Ready") if reason else "Ready",
        "message": reason or "Can admit new workloads",
    }
    status: dict[str, Any] = {
        "conditions": [condition],
        "flavorsReservation": _flavor_list(state.cq_usage.get(name, {}), nominal, keys),
        "flavorsUsage": _flavor_list(admitted_usage, nominal, keys),
        "pendingWorkloads": len(queue),
        "reservingWorkloads": len(reserving),
        "admittedWorkloads": sum(1 for wl in reserving if _is_admitted(wl)),
    }
    if state.config.fair_sharing.enable:
        status["fairSharing"] = {"weightedShare": weighted_share(state, name)}
    return status


def weighted_share(state: State, name: str) -> int:
    """The rounded dominant resource share of a ClusterQueue or Cohort (0 when not borrowing)."""
    state.ensure_tree()
    node = state.nodes.get(name) or state.cohort_nodes.get(name)
    if node is None:
        return 0
    return fair_sharing.share_of(node).rounded()


def cohort_status(state: State, name: str) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if state.config.fair_sharing.enable:
        status["fairSharing"] = {"weightedShare": weighted_share(state, name)}
    return status


def local_queue_status(state: State, key: str) -> dict[str, Any]:
    """`status` of one LocalQueue (``key`` is namespace/name)."""
    return local_queue_statuses(state, [key])[key]


def local_queue_statuses(state: State, keys: list[str]) -> dict[str, dict[str, Any]]:
    """`status` of several LocalQueues (namespace/name keys), from one look at the queues.

    The pending workloads of the queues they route to and the workloads holding quota are
    each looked at once, not once per LocalQueue: a busy cluster has thousands of both.
    """
    wanted = {key for key in keys if key in state.local_queues}
    pending = dict.fromkeys(wanted, 0)
    reserving: dict[str, list[Workload]] = {key: [] for key in wanted}
    for key in wanted:
        # As upstream's queue manager, which holds only admissible workloads: a deactivated or
        # admission-gated one is kept aside, pending nowhere (the ClusterQueue does not count it).
        pending[key] += sum(1 for wl in state.unrouted.get(key, {}).values() if wl.active and not wl.gated_by)
    # A LocalQueue's ClusterQueue is immutable, so its workloads wait and hold quota there:
    # only those ClusterQueues are looked at (as upstream's cache counts them per queue).
    cq_names = sorted({state.local_queues[key].cluster_queue for key in wanted})
    for cq_name in cq_names:
        queue = state.queues.get(cq_name)
        if queue is None:
            continue
        for wl in [*queue.active(), *queue.inadmissible.values()]:
            if wl.queue_key in pending:
                pending[wl.queue_key] += 1
    for cq_name in cq_names:
        for wl in state.admitted.get(cq_name, {}).values():
            if wl.queue_key in reserving:
                reserving[wl.queue_key].append(wl)
    return {key: _local_queue_status(state, key, pending[key], reserving[key]) for key in wanted}


def _local_queue_status(state: State, key: str, pending: int, reserving: list[Workload]) -> dict[str, Any]:
    lq = state.local_queues[key]
    reserved: Quantities = {}
    used: Quantities = {}
    for wl in reserving:
        add_into(reserved, wl.usage())
        if _is_admitted(wl):
            add_into(used, wl.usage())
    active = lq.stop_policy == "None" and state.is_active(lq.cluster_queue)
    if lq.cluster_queue not in state.cluster_queues:
        reason, message = "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
    elif lq.stop_policy != "None":
        reason, message = "Stopped", "LocalQueue is stopped"
    elif not active:
        reason, message = "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
    else:
        reason, message = "Ready", "Can submit new workloads to localQueue"

    cq = state.cluster_queues.get(lq.cluster_queue)
    # As upstream: every flavor of the ClusterQueue in its order, each with every resource it
    # covers (sorted by name), zeros included, so `kubectl get -o yaml` shows the whole shape.
    keys: list[tuple[str, str]] = list(cq.quotas) if cq is not None else []
    cq_keys = set(keys)

    def flavors(usage: Quantities) -> list[Any]:
        grouped: dict[str, list[dict[str, str]]] = {}
        for flavor, resource in keys:
            grouped.setdefault(flavor, []).append(
                {"name": resource, "total": quantity.format_milli(usage.get((flavor, resource), 0))}
            )
        # Usage in a flavor the ClusterQueue no longer lists (changed under admitted workloads).
        for (flavor, resource), value in sorted(usage.items()):
            if (flavor, resource) not in cq_keys:
                grouped.setdefault(flavor, []).append(
                    {"name": resource, "total": quantity.format_milli(value)}
                )
        return [
            {"name": flavor, "resources": sorted(resources, key=lambda r: r["name"])}
            for flavor, resources in grouped.items()
        ]

    return {
        "conditions": [
            {
                "type": "Active",
                "status": "True" if reason == "Ready" else "False",
                "reason": reason,
                "message": message,
            }
        ],
        "pendingWorkloads": pending,
        "reservingWorkloads": len(reserving),
        "admittedWorkloads": sum(1 for wl in reserving if _is_admitted(wl)),
        "flavorsReservation": flavors(reserved),
        "flavorsUsage": flavors(used),
    }
