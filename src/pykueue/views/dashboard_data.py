"""What the dashboard shows, as one JSON document per poll, cut to what the caller may see.

The page (`dashboard`, static files under ``views/static/``) asks
``GET /api/v1/dashboard`` every few seconds and redraws from the answer:

    identity        who is looking (name, role, namespaces)
    cohorts         the cohort tree: each cohort's parent, child cohorts, ClusterQueues,
                    and per flavor/resource the sum of its ClusterQueues' quota and usage
    clusterQueues   quota, usage and borrowing per flavor/resource; pending and admitted
                    counts; pending workloads per cause (`engine.pending_causes`)
    localQueues     pending and admitted counts
    flavors         each ResourceFlavor the caller's ClusterQueues name: its node labels, taints,
                    tolerations and topology, and per ClusterQueue and resource its quota and usage
    workloads       state, outcome (Succeeded, Failed, Preempted, Evicted), position in its
                    ClusterQueue, cause and the engine's message, estimated start (the
                    estimator's, when it runs), and its events (condition changes)
    history         usage and pending counts sampled every `HISTORY_INTERVAL` seconds

Everything is read from the engine `State` and the stored Workload manifests, so
the same builder serves standalone mode and a read-only view of a cluster.

Tenancy: an admin sees everything. A tenant sees the workloads of its namespaces,
the LocalQueues of its namespaces, the ClusterQueues those LocalQueues point at,
the cohorts above those ClusterQueues and the flavors they name; the history is
cut the same way (`visible_cluster_queues`, also used by `dashboard_objects`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pykueue.api import access, quantity
from pykueue.engine import aging, pending_causes
from pykueue.engine.state import State
from pykueue.store.base import Manifest
from pykueue.views import rows as views
from pykueue.views import visibility, why

HISTORY_INTERVAL = 5.0  # seconds between two usage samples
HISTORY_SAMPLES = 720  # one hour at the interval above
FINISHED_SHOWN = 50  # the most recently finished workloads kept in the list (by their Finished time)


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _units(milli: int) -> float:
    return milli / 1000


# ------------------------------------------------------------------ history


@dataclass
class UsageHistory:
    """Usage and pending counts per ClusterQueue, sampled every `HISTORY_INTERVAL` seconds."""

    samples: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=HISTORY_SAMPLES))
    last: float | None = None

    def sample_if_due(self, state: State, at: float) -> None:
        """A sample when the last is an interval old (a server without its own sampling task)."""
        if self.last is None or at - self.last >= HISTORY_INTERVAL:
            self.sample(state, at)

    def sample(self, state: State, at: float) -> None:
        self.last = at
        state.ensure_tree()
        queues: dict[str, Any] = {}
        for name, cq in state.cluster_queues.items():
            used = state.cq_usage.get(name, {})
            queue = state.queues.get(name)
            queues[name] = {
                "used": {f"{f}/{r}": _units(used.get((f, r), 0)) for f, r in cq.quotas},
                "nominal": {f"{f}/{r}": _units(q.nominal) for (f, r), q in cq.quotas.items()},
                "pending": len(queue) if queue is not None else 0,
            }
        self.samples.append({"at": rfc3339(at), "clusterQueues": queues})

    def visible(self, cluster_queues: set[str] | None) -> list[dict[str, Any]]:
        if cluster_queues is None:
            return list(self.samples)
        return [
            {
                "at": s["at"],
                "clusterQueues": {k: v for k, v in s["clusterQueues"].items() if k in cluster_queues},
            }
            for s in self.samples
        ]


# ------------------------------------------------------------------ rows


def cluster_queue_row(state: State, name: str) -> dict[str, Any]:
    cq = state.cluster_queues[name]
    used = state.cq_usage.get(name, {})
    queue = state.queues.get(name)
    usage = []
    for (flavor, resource), quota in cq.quotas.items():
        amount = used.get((flavor, resource), 0)
        usage.append(
            {
                "flavor": flavor,
                "resource": resource,
                "used": _units(amount),
                "nominal": _units(quota.nominal),
                "borrowed": _units(max(0, amount - quota.nominal)),
                "borrowingLimit": None if quota.borrowing_limit is None else _units(quota.borrowing_limit),
                "usedText": quantity.format_milli(amount),
                "nominalText": quantity.format_milli(quota.nominal),
            }
        )
    inactive = state.inactive_reason.get(name, "")
    return {
        "name": name,
        "cohort": cq.cohort,
        "stopPolicy": cq.stop_policy,
        "active": not inactive,
        "activeMessage": inactive,
        "pending": len(queue) if queue is not None else 0,
        "admitted": len(state.admitted.get(name, {})),
        "causes": {k: v for k, v in pending_causes.counts(state, name).items() if v},
        "usage": usage,
    }


def local_queue_row(state: State, key: str) -> dict[str, Any]:
    lq = state.local_queues[key]
    pending = [wl for wl in visibility.ordered_pending(state, lq.cluster_queue) if wl.queue_key == key]
    admitted = [wl for wl in state.admitted.get(lq.cluster_queue, {}).values() if wl.queue_key == key]
    return {
        "namespace": lq.namespace,
        "name": lq.name,
        "clusterQueue": lq.cluster_queue,
        "stopPolicy": lq.stop_policy,
        "pending": len(pending),
        "admitted": len(admitted),
    }


def cohort_rows(state: State, cluster_queues: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cohorts above the given ClusterQueue rows, each with its subtree's quota and usage."""
    parents = {name: c.parent for name, c in state.cohorts.items()}
    rows: dict[str, dict[str, Any]] = {}

    def row(name: str) -> dict[str, Any]:
        if name not in rows:
            parent = parents.get(name, "")
            rows[name] = {"name": name, "parent": parent, "cohorts": [], "clusterQueues": [], "usage": {}}
            if parent:
                row(parent)["cohorts"].append(name)
        return rows[name]

    for cq in cluster_queues:
        if not cq["cohort"]:
            continue
        row(cq["cohort"])["clusterQueues"].append(cq["name"])
        seen: set[str] = set()
        name = cq["cohort"]
        while name and name not in seen:  # a cycle in the specs must not hang the page
            seen.add(name)
            for item in cq["usage"]:
                key = f"{item['flavor']}/{item['resource']}"
                total = row(name)["usage"].setdefault(key, {"used": 0.0, "nominal": 0.0})
                total["used"] += item["used"]
                total["nominal"] += item["nominal"]
            name = parents.get(name, "")
    return sorted(rows.values(), key=lambda r: str(r["name"]))


def flavor_rows(state: State, cluster_queues: list[dict[str, Any]], everything: bool) -> list[dict[str, Any]]:
    """The flavors the given ClusterQueue rows name (all defined ones too when ``everything``):
    what nodes each stands for, and each ClusterQueue's quota and usage of it."""
    names = {u["flavor"] for cq in cluster_queues for u in cq["usage"]}
    if everything:
        names |= set(state.flavors)
    rows = []
    for name in sorted(names):
        spec = state.flavors.get(name)
        uses = [
            {
                "clusterQueue": cq["name"],
                **{k: u[k] for k in ("resource", "used", "nominal", "borrowed", "usedText", "nominalText")},
            }
            for cq in cluster_queues
            for u in cq["usage"]
            if u["flavor"] == name
        ]
        rows.append(
            {
                "name": name,
                # A ClusterQueue may name a flavor that does not exist (yet): it is then inactive.
                "defined": spec is not None,
                "nodeLabels": dict(spec.node_labels) if spec is not None else {},
                "nodeTaints": [_taint(t) for t in spec.node_taints] if spec is not None else [],
                "tolerations": [_toleration(t) for t in spec.tolerations] if spec is not None else [],
                "topologyName": spec.topology_name if spec is not None else "",
                "clusterQueues": sorted({u["clusterQueue"] for u in uses}),
                "usage": uses,
            }
        )
    return rows


def _taint(t: Any) -> str:
    """``key=value:Effect``, as kubectl writes a taint."""
    return f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}"


def _toleration(t: Any) -> str:
    value = f"={t.value}" if t.operator != "Exists" and t.value else ""
    key = t.key or "*"
    return (
        f"{key}{value}"
        + (f":{t.effect}" if t.effect else "")
        + (" (exists)" if t.operator == "Exists" else "")
    )


def _true_condition(manifest: Manifest, kind: str) -> dict[str, Any] | None:
    for c in (manifest.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def outcome(manifest: Manifest, state: str) -> tuple[str, str]:
    """How a workload ended, or what last happened to it, and the condition's message.

    Succeeded and Failed for a finished one; Preempted when its current eviction is a
    preemption (upstream's Preempted condition, or Evicted for reason Preempted);
    Evicted for any other current eviction (a stopped queue, a pods-ready timeout...);
    "" otherwise.
    """
    if state in ("Finished", "Failed"):
        done = _true_condition(manifest, "Finished") or {}
        return ("Failed" if state == "Failed" else "Succeeded"), str(done.get("message", ""))
    evicted = _true_condition(manifest, "Evicted")
    preempted = _true_condition(manifest, "Preempted")
    if preempted is not None or (evicted is not None and evicted.get("reason") == "Preempted"):
        return "Preempted", str((preempted or evicted or {}).get("message", ""))
    if evicted is not None:
        return "Evicted", str(evicted.get("message", ""))
    return "", ""


def _finished_at(manifest: Manifest) -> str:
    return str((_true_condition(manifest, "Finished") or {}).get("lastTransitionTime", ""))


def _events(manifest: Manifest) -> list[dict[str, str]]:
    """A workload's story: its conditions, oldest change first."""
    conditions = (manifest.get("status") or {}).get("conditions") or []
    out = [
        {
            "time": str(c.get("lastTransitionTime", "")),
            "type": str(c.get("type", "")),
            "status": str(c.get("status", "")),
            "reason": str(c.get("reason", "")),
            "message": str(c.get("message", "")),
        }
        for c in conditions
    ]
    return sorted(out, key=lambda e: e["time"])


def workload_row(
    state: State,
    manifest: Manifest,
    positions: dict[str, tuple[int, int]],
    estimated: visibility.EstimatedStart | None = None,
) -> dict[str, Any]:
    base = views.workload_row(manifest)
    key = f"{base['namespace']}/{base['name']}"
    wl = state.workloads.get(key)
    position, of = positions.get(key, (None, None))
    cause = pending_causes.cause_of(state, wl) if wl is not None and base["state"] != "Finished" else None
    # The same reasons as `describe` (views.why); a finished job's row keeps its failure.
    words = (
        why.reasons(state, wl, manifest)
        if wl is not None and base["state"] not in ("Finished", "Failed")
        else []
    )
    reason = "; ".join(text for _, text in words)
    pending = base["state"] == "Pending"
    ended, ended_message = outcome(manifest, base["state"])
    if pending and wl is not None:
        base["clusterQueue"] = state.route_of(wl) or ""
    return {
        **base,
        "reason": reason or base["reason"],
        "cause": cause,
        "outcome": ended,
        "outcomeMessage": ended_message,
        "finishedAt": _finished_at(manifest) if base["state"] in ("Finished", "Failed") else "",
        "position": position,
        "pendingInQueue": of,
        "priority": wl.priority if wl is not None else None,
        # What aging added, and the policy in words (docs/governance.md); 0 and "" without one.
        "aged": wl.aged if wl is not None else 0,
        "aging": aging.explain(state, wl) if wl is not None and wl.aged else "",
        "estimatedStart": estimated(key) if pending and estimated is not None else None,
        "events": _events(manifest),
    }


def _positions(state: State, cluster_queues: list[str]) -> dict[str, tuple[int, int]]:
    """1-based position of each pending workload in its ClusterQueue, and how many wait there."""
    out: dict[str, tuple[int, int]] = {}
    for name in cluster_queues:
        ordered = visibility.ordered_pending(state, name)
        for index, wl in enumerate(ordered, start=1):
            out[wl.key] = (index, len(ordered))
    return out


# ------------------------------------------------------------------ the document


def visible_local_queues(state: State, identity: access.Identity) -> list[str]:
    """The keys of the LocalQueues ``identity`` sees: those of its namespaces."""
    return sorted(
        k for k, lq in state.local_queues.items() if access.may_read(identity, "Workload", lq.namespace)
    )


def visible_cluster_queues(state: State, identity: access.Identity) -> list[str]:
    """The ClusterQueues ``identity`` sees: all for an admin, else those its LocalQueues point at."""
    if identity.is_admin:
        return sorted(state.cluster_queues)
    used = {state.local_queues[k].cluster_queue for k in visible_local_queues(state, identity)}
    return sorted(n for n in used if n in state.cluster_queues)


def build(
    state: State,
    workloads: list[Manifest],
    identity: access.Identity,
    history: UsageHistory,
    now: float,
    estimated: visibility.EstimatedStart | None = None,
) -> dict[str, Any]:
    """The dashboard document for ``identity`` (see the module docstring).

    ``estimated`` gives a pending workload's estimated start by key (the background
    estimator's, `reconcilers.estimating`); None shows no estimates.
    """
    state.ensure_tree()
    lq_keys = visible_local_queues(state, identity)
    cq_names = visible_cluster_queues(state, identity)
    cq_rows = [cluster_queue_row(state, n) for n in cq_names]
    positions = _positions(state, cq_names)
    readable = [
        w for w in workloads if access.may_read(identity, "Workload", str(w["metadata"].get("namespace", "")))
    ]
    rows = [workload_row(state, w, positions, estimated) for w in readable]
    live = [r for r in rows if r["state"] not in ("Finished", "Failed")]
    done = sorted(
        (r for r in rows if r["state"] in ("Finished", "Failed")),
        key=lambda r: str(r["finishedAt"] or r["created"]),
        reverse=True,
    )
    live.sort(key=lambda r: (r["position"] is None, r["position"] or 0, r["namespace"], r["name"]))
    return {
        "generatedAt": rfc3339(now),
        "identity": {"name": identity.name, "role": identity.role, "namespaces": list(identity.namespaces)},
        "causes": list(pending_causes.CAUSES),
        "cohorts": cohort_rows(state, cq_rows),
        "clusterQueues": cq_rows,
        "localQueues": [local_queue_row(state, k) for k in lq_keys],
        "flavors": flavor_rows(state, cq_rows, identity.is_admin),
        "workloads": [*live, *done[:FINISHED_SHOWN]],
        "history": {
            "interval": HISTORY_INTERVAL,
            "samples": history.visible(None if identity.is_admin else set(cq_names)),
        },
    }
