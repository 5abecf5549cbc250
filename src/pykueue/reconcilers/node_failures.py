"""Failed nodes under workloads placed by topology: named in ``status.unhealthyNodes``.

    Node deleted, or NotReady for FAILURE_DELAY (upstream's NodeFailureDelay, 30 s)
        │ each pass: the admitted TAS workloads on it (a pod of theirs bound to it, or a
        │ hostname domain of their assignment naming it)
        ├─▶ Workload status.unhealthyNodes += the node   (the engine re-places its pods, or
        │                                                 evicts with reason NodeFailures)
        └─▶ their pods bound to it marked Failed          (the job's controller replaces them;
                                                           the ungater sends the new ones to
                                                           the domains of the new assignment)

A node that is Ready again is forgotten; taking it back out of ``unhealthyNodes`` is the
engine's part (it does so once the pods are placed again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pykueue.api.meta import parse_time
from pykueue.errors import Conflict, NotFound, StoreError
from pykueue.reconcilers import topology_ungater
from pykueue.reconcilers.jobframework import WORKLOAD_ANNOTATION
from pykueue.store.base import Key, Manifest, Store, WatchEvent

log = logging.getLogger(__name__)

FAILURE_DELAY = timedelta(seconds=30)
HOSTNAME = "kubernetes.io/hostname"


def failed_at(node: Manifest, delay: timedelta = FAILURE_DELAY) -> datetime | None:
    """When a node counts as failed: NotReady since + ``delay``; None while it is Ready.

    A node without a Ready condition, or one whose time cannot be read, failed already
    (``datetime.min``), as upstream marks it at once.
    """
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") != "Ready":
            continue
        if cond.get("status") == "True":
            return None
        since = parse_time(cond.get("lastTransitionTime"))
        return datetime.min if since is None else since + delay
    return datetime.min


def _admitted_with_topology(workload: Manifest) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    admitted = any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)
    assignments = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    return admitted and any(a.get("topologyAssignment") for a in assignments)


def _names_host(workload: Manifest, host: str) -> bool:
    try:
        assignments = topology_ungater.assignments_of(workload)
    except ValueError:
        return False
    return any(
        a.levels[-1] == HOSTNAME and any(d.values[-1] == host for d in a.domains)
        for a in assignments.values()
    )


def _unhealthy(workload: Manifest) -> list[str]:
    return [str(n.get("name")) for n in (workload.get("status") or {}).get("unhealthyNodes") or []]


@dataclass
class NodeFailures:
    """Writes failed nodes into the Workloads placed on them (see the module docstring)."""

    store: Store
    # The admission controller's cache: Nodes, Pods and Workloads as last seen.
    cache: Mapping[Key, Manifest]
    clock: Callable[[], datetime]
    delay: timedelta = FAILURE_DELAY
    # Node name -> (its hostname label, when it counts as failed).
    failing: dict[str, tuple[str, datetime]] = field(default_factory=dict)

    def kinds(self) -> list[str]:
        return ["Node"]

    def handle(self, event: WatchEvent) -> None:
        node = event.object
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        host = str((meta.get("labels") or {}).get(HOSTNAME, name))
        if event.type == "DELETED":
            known = self.cache.get(Key("Node", "", name)) or node
            host = str(((known.get("metadata") or {}).get("labels") or {}).get(HOSTNAME, name))
            self.failing[name] = (host, datetime.min)
            return
        when = failed_at(node, self.delay)
        if when is None:
            self.failing.pop(name, None)
        else:
            self.failing[name] = (host, when)

    async def reconcile(self) -> int:
        """Mark the workloads and pods on every node whose failure is due; the objects written."""
        now = self.clock().replace(tzinfo=None)
        written = 0
        for name, (host, when) in sorted(self.failing.items()):  # sorted() copies: entries may go
            if when.replace(tzinfo=None) > now:
                continue
            found = list(self._on_node(name, host))
            for workload, pods in found:
                written += await self._mark(workload, name, pods)
            if not found and Key("Node", "", name) not in self.cache:
                del self.failing[name]  # deleted and nothing left on it: nothing more to do
        return written

    def _on_node(self, name: str, host: str) -> Iterator[tuple[Manifest, list[Manifest]]]:
        pods_of: dict[Key, list[Manifest]] = {}
        for key, obj in self.cache.items():
            if key.kind != "Pod" or (obj.get("spec") or {}).get("nodeName") != name:
                continue
            if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            owner = ((obj.get("metadata") or {}).get("annotations") or {}).get(WORKLOAD_ANNOTATION)
            if owner:
                pods_of.setdefault(Key("Workload", key.namespace, str(owner)), []).append(obj)
        for key, workload in list(self.cache.items()):
            if key.kind != "Workload" or not _admitted_with_topology(workload):
                continue
            pods = pods_of.get(key, [])
            if pods or _names_host(workload, host):
                yield workload, pods

    async def _mark(self, workload: Manifest, node: str, pods: list[Manifest]) -> int:
        written = 0
        if node not in _unhealthy(workload):
            status = dict(workload.get("status") or {})
            status["unhealthyNodes"] = [{"name": n} for n in [*_unhealthy(workload), node]]
            written += await self._write_status({**workload, "status": status})
        for pod in pods:
            status = {**(pod.get("status") or {}), "phase": "Failed", "reason": "NodeFailure"}
            status["message"] = f"node {node} failed under a workload placed by topology"
            written += await self._write_status({**pod, "status": status})
        return written

    async def _write_status(self, obj: Manifest) -> int:
        try:
            await self.store.update_status(obj)
        except (Conflict, NotFound):
            return 0  # the newer object comes as an event; the next pass looks again
        except StoreError as exc:
            log.warning("marking %s for a failed node: %s", Key.of(obj), exc)
            return 0
        log.info("%s: marked for a failed node", Key.of(obj))
        return 1
