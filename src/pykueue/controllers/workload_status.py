"""Turning the engine's view of a workload into the `status` Kueue writes, and back.

Only the fields the scheduler owns are produced (admission, the scheduling
conditions, requeue state); everything else already in the stored status
(admission checks, reclaimable pods, conditions of other writers) is kept.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.api import quantity
from pykueue.engine import intake
from pykueue.engine.workloads import Workload

OWNED_CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued")


def _time(micros: int) -> str:
    return intake.from_micros(micros).strftime("%Y-%m-%dT%H:%M:%SZ")


def desired_status(wl: Workload, stored: dict[str, Any] | None) -> dict[str, Any]:
    """The status to store for ``wl``, starting from what is stored now."""
    status = copy.deepcopy(stored or {})
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
    owned = []
    for kind in OWNED_CONDITIONS:
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


def is_finished(obj: dict[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions", []):
        if cond.get("type") == "Finished" and cond.get("status") == "True":
            return True
    return False
