"""The topology ungater: each pod of a workload placed by topology gets its domain, then may run.

The engine decides how many pods of a pod set go to which domain (the admission's
``topologyAssignment``); kube-scheduler decides the node. Between the two:

    Workload admitted (topologyAssignment)  ──▶  job started, its pod template carrying the
                                                 ``kueue.x-k8s.io/topology`` gate, the pod set
                                                 label and the workload annotation (jobframework)
    pods created by the job's controller    ──▶  gated: kube-scheduler leaves them alone
    each pass, per touched workload and pod set:
        the pod set numbers its pods (its topologyRequest names an index label):
            each gated pod to the domain of its rank (`topology_ranks`): pod i to the i-th
            slot of the assignment, so a slice's consecutive indexes share its domain
        otherwise, or when the ranks cannot be used (greedy, as upstream falls back):
            count the live pods already let go per domain (their nodeSelector's level values)
            hand the gated pods, by name, to the domains that still have room
        each such pod: the domain's level labels added to its nodeSelector, the gate removed

Pods of a Job, a JobSet, a LeaderWorkerSet (its workers) and pod groups get the gate
with their pod template, or from the pod webhook for pods queued by themselves.

A pod is written once: the updated pod the API server returns goes into the cache at
once, so the next pass counts it as let go in its domain even before its watch event
arrives, and never sends a second pod to a domain that is already full. Pods that come
later (a Job creates them over time, replaces failed ones) are handled as they appear;
a terminated pod no longer counts in its domain, so its replacement takes its place.

When the lowest level is ``kubernetes.io/hostname`` the assignment names hosts only, and
the pod's selector is that one host label: kube-scheduler binds it to that node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from pykueue.api.workload import TopologyAssignment as ApiTopologyAssignment
from pykueue.engine import topology_assignments
from pykueue.engine.topology_assignments import TopologyAssignment
from pykueue.errors import Conflict, NotFound, StoreError
from pykueue.reconcilers import topology_ranks
from pykueue.reconcilers.jobframework import POD_SET_LABEL, TOPOLOGY_GATE, WORKLOAD_ANNOTATION
from pykueue.reconcilers.topology_ranks import Ranking
from pykueue.store.base import Key, Manifest, Store, WatchEvent, version_number

log = logging.getLogger(__name__)

# A workload: its namespace and name.
WorkloadRef = tuple[str, str]


def is_gated(pod: Manifest) -> bool:
    return any(g.get("name") == TOPOLOGY_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def _terminated(pod: Manifest) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _workload_of(pod: Manifest) -> WorkloadRef | None:
    meta = pod.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
    return (str(meta.get("namespace") or "default"), str(name)) if name else None


def _pod_set_of(pod: Manifest) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(POD_SET_LABEL, ""))


def _live(pod: Manifest) -> bool:
    return not _terminated(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")


def _name(pod: Manifest) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))


def plan(
    assignment: TopologyAssignment, pods: Iterable[Manifest], ranking: Ranking | None = None
) -> list[tuple[Manifest, dict[str, str]]]:
    """Which gated pods to let go now, each with its domain's node labels.

    With a ``ranking`` (the pod set numbers its pods) each gated pod goes to its rank's domain
    (`topology_ranks`), so consecutive indexes, a slice, share a domain; when the ranks cannot
    be used, or without a ranking, greedily: live pods already let go fill their domain first
    (read back from their nodeSelector); the gated ones then go, in name order, to the domains
    with room, in the assignment's order. A domain never gets more pods than the assignment
    gives it.
    """
    live = [p for p in pods if _live(p)]
    if ranking is not None:
        by_rank = _plan_by_rank(assignment, live, ranking)
        if by_rank is not None:
            return by_rank
    return _plan_greedy(assignment, live)


def _plan_by_rank(
    assignment: TopologyAssignment, live: list[Manifest], ranking: Ranking
) -> list[tuple[Manifest, dict[str, str]]] | None:
    offset = topology_ranks.offset_of(sorted(live, key=_name))
    if offset is None:
        return None
    ranked = topology_ranks.ranks(live, ranking.shifted(offset) if offset else ranking)
    if ranked is None:
        return None
    where = topology_ranks.slots((d.values, d.count) for d in assignment.domains)
    levels = assignment.levels
    for rank, pod in ranked.items():
        if rank >= len(where):
            return None  # the assignment covers fewer pods than the pod set counts
        if not is_gated(pod) and topology_ranks.level_values(pod, levels) != where[rank]:
            return None  # a pod let go elsewhere before: ranks no longer say where pods are
    return [
        (pod, dict(zip(levels, where[rank], strict=True)))
        for rank, pod in sorted(ranked.items())
        if is_gated(pod)
    ]


def _plan_greedy(
    assignment: TopologyAssignment, live: list[Manifest]
) -> list[tuple[Manifest, dict[str, str]]]:
    levels = assignment.levels
    placed: dict[tuple[str, ...], int] = {}
    gated: list[Manifest] = []
    for pod in live:
        if is_gated(pod):
            gated.append(pod)
            continue
        values = topology_ranks.level_values(pod, levels)
        placed[values] = placed.get(values, 0) + 1
    gated.sort(key=_name)
    result: list[tuple[Manifest, dict[str, str]]] = []
    for domain in assignment.domains:
        room = max(domain.count - placed.get(domain.values, 0), 0)
        for pod in gated[len(result) : len(result) + room]:
            result.append((pod, dict(zip(levels, domain.values, strict=True))))
    return result


def ungated(pod: Manifest, node_labels: Mapping[str, str]) -> Manifest:
    """A copy of ``pod`` with the domain's labels in its nodeSelector and the topology gate gone.

    A label the pod already selects with another value is a contradiction the scheduler could
    never satisfy; it is refused (ValueError) rather than overwritten.
    """
    spec = dict(pod.get("spec") or {})
    selector = dict(spec.get("nodeSelector") or {})
    for key, value in node_labels.items():
        if selector.get(key, value) != value:
            raise ValueError(
                f"spec.nodeSelector {key}={selector[key]} contradicts its topology domain's {value}"
            )
        selector[key] = value
    spec["nodeSelector"] = selector
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != TOPOLOGY_GATE]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)
    return {**pod, "spec": spec}


def assignments_of(workload: Manifest) -> dict[str, TopologyAssignment]:
    """The topology assignment of each pod set of a workload's admission (none: not placed by topology)."""
    result: dict[str, TopologyAssignment] = {}
    admission = (workload.get("status") or {}).get("admission") or {}
    for index, written in enumerate(admission.get("podSetAssignments") or []):
        raw = written.get("topologyAssignment")
        if not raw:
            continue
        try:
            parsed = ApiTopologyAssignment.model_validate(raw)
        except ValidationError as exc:
            name = (workload.get("metadata") or {}).get("name")
            raise ValueError(
                f"Workload {name}: status.admission.podSetAssignments[{index}].topologyAssignment: {exc}"
            ) from exc
        result[str(written.get("name", "main"))] = topology_assignments.from_api(parsed)
    return result


def _admitted(workload: Manifest) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)


@dataclass
class TopologyUngater:
    """Lets the gated pods of admitted TAS workloads go to their domains (see the module docstring)."""

    store: Store
    # The stored Workload of a key (the admission controller's cache), None when unknown.
    workload: Callable[[Key], Manifest | None]
    pods: dict[Key, Manifest] = field(default_factory=dict)
    members: dict[WorkloadRef, set[Key]] = field(default_factory=dict)
    dirty: set[WorkloadRef] = field(default_factory=set)
    ungated_total: int = 0

    def kinds(self) -> list[str]:
        return ["Workload", "Pod"]

    def handle(self, event: WatchEvent) -> None:
        obj = event.object
        key = Key.of(obj)
        if key.kind == "Workload":
            if (obj.get("status") or {}).get("admission"):
                self.dirty.add((key.namespace or "default", key.name))
            return
        if key.kind != "Pod":
            return
        ref = _workload_of(obj)
        if event.type == "DELETED":
            self._forget(key)
        elif ref is not None:
            self._remember(key, ref, obj)
        if ref is not None:
            self.dirty.add(ref)

    def _remember(self, key: Key, ref: WorkloadRef, pod: Manifest) -> None:
        known = self.pods.get(key)
        if known is not None and version_number(pod) <= version_number(known):
            return  # our own write came back, or an older version
        self.pods[key] = pod
        self.members.setdefault(ref, set()).add(key)

    def _forget(self, key: Key) -> None:
        pod = self.pods.pop(key, None)
        ref = None if pod is None else _workload_of(pod)
        if ref is not None and ref in self.members:
            self.members[ref].discard(key)
            if not self.members[ref]:
                del self.members[ref]

    def seed(self, stored: Iterable[Manifest]) -> None:
        """Start from the pods listed at start (the admission controller lists every Pod)."""
        for pod in stored:
            ref = _workload_of(pod)
            if ref is not None:
                self._remember(Key.of(pod), ref, pod)
                self.dirty.add(ref)

    async def reconcile(self) -> int:
        """Let go the gated pods of every touched workload that is admitted; the pods written."""
        written = 0
        todo, self.dirty = self.dirty, set()
        for ref in sorted(todo):
            written += await self._reconcile_workload(ref)
        self.ungated_total += written
        return written

    async def _reconcile_workload(self, ref: WorkloadRef) -> int:
        workload = self.workload(Key("Workload", ref[0], ref[1]))
        keys = self.members.get(ref)
        if workload is None or not keys or not _admitted(workload):
            return 0
        try:
            assignments = assignments_of(workload)
        except ValueError as exc:
            log.warning("not ungating pods: %s", exc)
            return 0
        rankings = topology_ranks.rankings_of(workload)
        pods = [self.pods[k] for k in sorted(keys, key=str)]
        written = 0
        for pod_set, assignment in assignments.items():
            mine = [p for p in pods if _pod_set_of(p) == pod_set]
            for pod, node_labels in plan(assignment, mine, rankings.get(pod_set)):
                written += await self._ungate(ref, pod, node_labels)
        return written

    async def _ungate(self, ref: WorkloadRef, pod: Manifest, node_labels: Mapping[str, str]) -> int:
        key = Key.of(pod)
        try:
            changed = ungated(pod, node_labels)
        except ValueError as exc:
            log.warning("%s: %s", key, exc)
            return 0
        try:
            result: Any = await self.store.update(changed)
        except (Conflict, NotFound):
            # A newer pod (or none) is on its way as an event: the workload is looked at again then.
            self.dirty.add(ref)
            return 0
        except StoreError as exc:
            log.warning("ungating %s failed: %s", key, exc)
            self.dirty.add(ref)
            return 0
        self._remember(key, ref, result)
        log.info("ungated %s to %s", key, dict(node_labels))
        return 1
