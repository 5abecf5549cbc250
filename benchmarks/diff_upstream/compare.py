"""What users see, in one shape for both sides, and the differences between them.

Compared at the end of every `settle`: the admitted Workloads (ClusterQueue, and per pod set the count and
each resource's flavor), the Workloads still waiting (pykueue's active and inadmissible queues together:
upstream's API does not tell the two apart), which of them wait in each ClusterQueue's active queue and
which are parked as inadmissible (upstream: its queue manager, served by the oracle), and the reason of their `QuotaReserved=False`, finished and deactivated ones, every Workload preempted so
far and the reason of its `Preempted` condition, and each ClusterQueue's reserved quota per flavor; then
each Workload's admission check states, the Workloads holding quota that are not `Admitted` (checks not
all Ready), `status.requeueState.count` where set, and the admitted Workloads whose pods are ready.
"""

from __future__ import annotations

from typing import Any

from pykueue.api import quantity

KEYS = (
    "admitted",
    "pending",
    "queues",
    "pendingReason",
    "finished",
    "deactivated",
    "preempted",
    "preemptedWhy",
    "clusterQueueUsage",
    "admissionChecks",
    "quotaOnly",
    "requeueCount",
    "podsReady",
)


def _usage(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cq, flavors in sorted(raw.items()):
        per = {
            flavor: {
                res: quantity.format_milli(quantity.parse(v))
                for res, v in sorted(resources.items())
                if quantity.parse(v)
            }
            for flavor, resources in sorted(flavors.items())
        }
        per = {f: r for f, r in per.items() if r}
        if per:
            out[cq] = per
    return out


def normalized_usage(raw: dict[str, Any]) -> dict[str, Any]:
    """Queue usage as compared: quantities in one form, zeros left out."""
    return _usage(raw)


def from_upstream(view: dict[str, Any]) -> dict[str, Any]:
    out = {k: view[k] for k in KEYS}
    out["clusterQueueUsage"] = _usage(view["clusterQueueUsage"])
    return out


def _true(conds: dict[str, Any], kind: str) -> bool:
    return bool(conds.get(kind, {}).get("status") == "True")


def from_pykueue(result: dict[str, Any]) -> dict[str, Any]:
    pending = sorted(
        {k for keys in [*result["pending"].values(), *result["inadmissible"].values()] for k in keys}
    )
    why = {
        key: conds["Preempted"]["reason"]
        for key, conds in result["conditions"].items()
        if conds.get("Preempted", {}).get("status") == "True"
    }
    return {
        "admitted": {
            key: {
                "clusterQueue": adm["clusterQueue"],
                "podSets": {
                    name: {"count": ps["count"], "flavors": dict(sorted(ps["flavors"].items()))}
                    for name, ps in adm["podSets"].items()
                },
            }
            for key, adm in result["admitted"].items()
        },
        "pending": [k for k in pending if k not in result["deactivated"]],
        "queues": {
            "active": {cq: sorted(keys) for cq, keys in sorted(result["pending"].items()) if keys},
            "inadmissible": {cq: sorted(keys) for cq, keys in sorted(result["inadmissible"].items()) if keys},
        },
        "pendingReason": {
            key: result["conditions"][key]["QuotaReserved"]["reason"]
            for key in pending
            if key not in result["deactivated"] and "QuotaReserved" in result["conditions"].get(key, {})
        },
        "finished": sorted(result["finished"]),
        "deactivated": sorted(result["deactivated"]),
        "preempted": sorted(result["preempted"]),
        "preemptedWhy": why,
        "clusterQueueUsage": _usage(result["clusterQueueUsage"]),
        "admissionChecks": {
            k: dict(sorted(v.items())) for k, v in sorted(result["admissionChecks"].items()) if v
        },
        "quotaOnly": sorted(
            key for key in result["admitted"] if not _true(result["conditions"].get(key, {}), "Admitted")
        ),
        "requeueCount": {
            key: rs["count"] for key, rs in sorted(result["requeueState"].items()) if rs.get("count")
        },
        "podsReady": sorted(
            key
            for key, conds in result["conditions"].items()
            if key in result["admitted"] and _true(conds, "PodsReady")
        ),
    }


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """Each difference in words: 'admitted team-a/w1: pykueue {...}, upstream {...}'."""
    out: list[str] = []
    for key in KEYS:
        a, b = ours.get(key), theirs.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for sub in sorted(set(a) | set(b)):
                if a.get(sub) != b.get(sub):
                    out.append(f"{key} {sub}: pykueue {a.get(sub)}, upstream {b.get(sub)}")
        else:
            out.append(f"{key}: pykueue {a}, upstream {b}")
    return out
