"""Turning the engine's view of a workload into the `status` Kueue writes, and back.

Only the fields the engine owns are produced (admission, the scheduling
conditions, PodsReady when waitForPodsReady is on, the admission check states
as the engine last took them, requeue state, eviction counts, the accumulated
execution time, the resource requests of a workload left pending); everything else
already in the stored status (reclaimable pods, conditions of other writers)
is kept.

An admission the engine took back before its write went out was never seen by
anyone: no job started, nothing holds quota in the API. Its eviction is not
written either (``Evicted``, ``Preempted`` and ``Requeued`` stay as stored); the
workload's status just says it waits, and why.
"""

from __future__ import annotations

import functools
from typing import Any

from pykueue.api import quantity
from pykueue.engine import evictions, intake
from pykueue.engine.workloads import PodSetAssignment, Workload

OWNED_CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued", "PodsReady")
# Written only when the engine keeps it (waitForPodsReady); otherwise kept as stored.
OPTIONAL_CONDITIONS = frozenset({"PodsReady"})
EVICTION_CONDITIONS = ("Evicted", "Preempted", "Requeued")


@functools.lru_cache(maxsize=65536)
def _time(micros: int) -> str:
    # Memoized: a status is rebuilt on every pass that looks at its workload, and its
    # conditions' times rarely change; formatting them was a tenth of the controller's time.
    return intake.from_micros(micros).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_set_assignment(ps: PodSetAssignment, by_hostname_prefix: bool) -> dict[str, Any]:
    written: dict[str, Any] = {
        "name": ps.name,
        "flavors": dict(sorted(ps.flavors.items())),
        "resourceUsage": {res: quantity.format_milli(v) for res, v in sorted(ps.resource_usage.items())},
        "count": ps.count,
    }
    if ps.topology is not None:
        # Upstream's v1beta2 form (levels and slices); see docs/topology.md.
        written["topologyAssignment"] = ps.topology.to_v1beta2(by_hostname_prefix)
    if ps.delayed_topology is not None:
        written["delayedTopologyRequest"] = ps.delayed_topology
    return written


def desired_status(
    wl: Workload, stored: dict[str, Any] | None, by_hostname_prefix: bool = True
) -> dict[str, Any]:
    """The status to store for ``wl``, starting from what is stored now; ``by_hostname_prefix``
    is feature gate TASAssignmentsEncodingByHostnamePrefix (`conversion.topology_domains_to_slices`)."""
    # A shallow copy: the fields replaced below are built anew, the others are only read.
    status = dict(stored or {})
    # No admission stored, none wanted: an eviction now would be of an admission never written.
    never_held = wl.admission is None and "admission" not in status
    if wl.admission is None:
        status.pop("admission", None)
    else:
        status["admission"] = {
            "clusterQueue": wl.admission.cluster_queue,
            "podSetAssignments": [
                _pod_set_assignment(ps, by_hostname_prefix) for ps in wl.admission.pod_sets
            ],
        }
    if wl.unhealthy_nodes:
        status["unhealthyNodes"] = [{"name": name} for name in wl.unhealthy_nodes]
    else:
        # The engine clears the list once it placed the failed nodes' pods again.
        status.pop("unhealthyNodes", None)
    owned_kinds = [k for k in OWNED_CONDITIONS if k not in OPTIONAL_CONDITIONS or k in wl.conditions]
    others = [c for c in status.get("conditions", []) if c.get("type") not in owned_kinds]
    stored_owned = {c.get("type"): c for c in status.get("conditions", []) if c.get("type") in owned_kinds}
    owned = []
    for kind in owned_kinds:
        if never_held and kind in EVICTION_CONDITIONS:
            written = _pending_deactivation(wl, kind, stored_owned.get(kind))
            if written is not None:
                owned.append(written)
            continue
        cond = wl.conditions.get(kind)
        if cond is None:
            continue
        owned.append(
            {
                "type": cond.type,
                "status": cond.status,
                "reason": cond.reason or cond.type,
                "message": cond.message[:32768],
                "lastTransitionTime": _time(cond.last_transition),
            }
        )
    if owned or others or "conditions" in status:
        # A workload nothing has happened to yet keeps a status without the key: writing an
        # empty list would be a write per created workload that tells nobody anything.
        status["conditions"] = others + owned
    if wl.requeue_count or wl.requeue_at is not None:
        state: dict[str, Any] = {"count": wl.requeue_count}
        if wl.requeue_at is not None:
            state["requeueAt"] = _time(wl.requeue_at)
        status["requeueState"] = state
    else:
        status.pop("requeueState", None)  # a deactivation, or a reactivation, clears it
    _checks(wl, status)
    _eviction_counts(wl, status)
    _resource_requests(wl, status)
    if wl.past_execution_seconds is not None:
        status["accumulatedPastExecutionTimeSeconds"] = wl.past_execution_seconds
    else:
        status.pop("accumulatedPastExecutionTimeSeconds", None)  # cleared when the limit was exceeded
    return status


def _resource_requests(wl: Workload, status: dict[str, Any]) -> None:
    """``status.resourceRequests``: what a workload a cycle could not admit asks of quota, per
    pod set (its count times one pod's requests, as quota counts them). Upstream's scheduler
    writes it with the pending QuotaReserved condition and never clears it; so here it is
    written while the workload waits with that condition, and otherwise kept as stored."""
    reserved = wl.conditions.get("QuotaReserved")
    if wl.admission is not None or reserved is None or reserved.status != "False" or not wl.pod_sets:
        return
    status["resourceRequests"] = [
        {
            "name": ps.name,
            "resources": {res: quantity.format_milli(v) for res, v in sorted(ps.total().items())},
        }
        for ps in wl.pod_sets
    ]


def _pending_deactivation(wl: Workload, kind: str, stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """Evicted/Requeued of a workload deactivated before any admission was written.

    As upstream: deactivating a pending workload evicts it too (``Evicted=True``, reason
    ``Deactivated``) and says it is not requeued (``Requeued=False``, same reason), so
    `kubectl get workloads` tells a switched-off workload from a waiting one; reactivated,
    ``Requeued`` turns True (reason ``Reactivated``). Otherwise the stored conditions stay.
    """
    blocked = wl.conditions.get("QuotaReserved")
    if blocked is None:
        return stored  # not explained yet: nothing to date these by
    since = _time(blocked.last_transition)
    if not wl.active and kind in ("Evicted", "Requeued"):
        status = "True" if kind == "Evicted" else "False"
        if stored is not None and (stored.get("status"), stored.get("reason")) == (
            status,
            evictions.DEACTIVATED,
        ):
            return stored
        return {
            "type": kind,
            "status": status,
            "reason": evictions.DEACTIVATED,
            "message": evictions.DEACTIVATED_MESSAGE,
            "lastTransitionTime": since,
        }
    switched_off = stored is not None and (stored.get("status"), stored.get("reason")) == (
        "False",
        evictions.DEACTIVATED,
    )
    if wl.active and kind == "Requeued" and switched_off:
        return {
            "type": kind,
            "status": "True",
            "reason": evictions.REACTIVATED,
            "message": evictions.REACTIVATED_MESSAGE,
            "lastTransitionTime": since,
        }
    return stored


def _checks(wl: Workload, status: dict[str, Any]) -> None:
    """``status.admissionChecks`` as the engine holds them, sorted by name as upstream writes them."""
    if not wl.checks:
        status.pop("admissionChecks", None)
        return
    written = []
    for check in sorted(wl.checks.values(), key=lambda c: c.name):
        entry: dict[str, Any] = {
            "name": check.name,
            "state": check.state,
            "message": check.message,
            "lastTransitionTime": _time(check.last_transition),
        }
        if check.requeue_after_seconds is not None:
            entry["requeueAfterSeconds"] = check.requeue_after_seconds
        if check.retry_count is not None:
            entry["retryCount"] = check.retry_count
        if check.pod_set_updates:
            entry["podSetUpdates"] = [dict(u) for u in check.pod_set_updates]
        written.append(entry)
    status["admissionChecks"] = written


def _eviction_counts(wl: Workload, status: dict[str, Any]) -> None:
    """``status.schedulingStats.evictions``: how often, and why, the workload was evicted."""
    if not wl.eviction_counts:
        return
    stats = status.setdefault("schedulingStats", {})
    stats["evictions"] = [
        {"reason": reason, "underlyingCause": cause, "count": count}
        for (reason, cause), count in sorted(wl.eviction_counts.items())
    ]


def holds_reservation(stored: dict[str, Any] | None) -> bool:
    """Does this stored Workload hold a quota reservation?"""
    return bool(((stored or {}).get("status") or {}).get("admission"))


def is_finished(obj: dict[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions", []):
        if cond.get("type") == "Finished" and cond.get("status") == "True":
            return True
    return False
