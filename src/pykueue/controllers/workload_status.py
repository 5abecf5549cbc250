"""Turning the engine's view of a workload into the `status` Kueue writes, and back.

Only the fields the scheduler owns are produced (admission, the scheduling
conditions, requeue state); everything else already in the stored status
(admission checks, reclaimable pods, conditions of other writers) is kept.

An admission the engine took back before its write went out was never seen by
anyone: no job started, nothing holds quota in the API. Its eviction is not
written either (``Evicted``, ``Preempted`` and ``Requeued`` stay as stored); the
workload's status just says it waits, and why.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.api import quantity
from pykueue.engine import intake
from pykueue.engine.workloads import Workload

OWNED_CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued")
EVICTION_CONDITIONS = ("Evicted", "Preempted", "Requeued")


def _time(micros: int) -> str:
    return intake.from_micros(micros).strftime("%Y-%m-%dT%H:%M:%SZ")


def desired_status(wl: Workload, stored: dict[str, Any] | None) -> dict[str, Any]:
    """The status to store for ``wl``, starting from what is stored now."""
    status = copy.deepcopy(stored or {})
    # No admission stored, none wanted: an eviction now would be of an admission never written.
    never_held = wl.admission is None and "admission" not in status
    if wl.admission is None:
        status.pop("admission", None)
    else:
        status["admission"] = {
            "clusterQueue": wl.admission.cluster_queue,
            "podSetAssignments": [
                {
                    "name": ps.name,
                    "flavors": dict(sorted(ps.flavors.items())),
                    "resourceUsage": {
                        res: quantity.format_milli(v) for res, v in sorted(ps.resource_usage.items())
                    },
                    "count": ps.count,
                }
                for ps in wl.admission.pod_sets
            ],
        }
    others = [c for c in status.get("conditions", []) if c.get("type") not in OWNED_CONDITIONS]
    stored_owned = {
        c.get("type"): c for c in status.get("conditions", []) if c.get("type") in OWNED_CONDITIONS
    }
    owned = []
    for kind in OWNED_CONDITIONS:
        if never_held and kind in EVICTION_CONDITIONS:
            if kind in stored_owned:
                owned.append(stored_owned[kind])
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
    return status


def holds_reservation(stored: dict[str, Any] | None) -> bool:
    """Does this stored Workload hold a quota reservation?"""
    return bool(((stored or {}).get("status") or {}).get("admission"))


def is_finished(obj: dict[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions", []):
        if cond.get("type") == "Finished" and cond.get("status") == "True":
            return True
    return False
