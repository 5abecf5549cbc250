"""Standalone admission: the shared admission controller, plus what one machine needs of it.

`StandaloneAdmission` wraps `admission.AdmissionController` with what a
single machine with many short jobs needs:

* **explanations.** `explain` answers "why does this workload wait?" in the
  categories an operator acts on (quota, flavor mismatch, admission check,
  inactive), with its position in its ClusterQueue and the engine's message.

It also keeps the list of decisions (`decisions`) so the server can stream
them to a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pykueue.controllers.admission import AdmissionController
from pykueue.controllers.workload_status import is_finished
from pykueue.engine import aging, pending_causes
from pykueue.engine import status as engine_status
from pykueue.engine.events import ADMITTED, CHECKS_PASSED, Event
from pykueue.engine.workloads import Workload
from pykueue.store.base import Key, Manifest

QUOTA = "quota"
FLAVOR = "flavor mismatch"
CHECK = "admission check"
INACTIVE = "inactive"
INVALID = "invalid"

# Words of the engine's QuotaReserved messages that point at flavors rather than quota.
_FLAVOR_WORDS = ("taint", "doesn't match", "does not match", "node affinity", "nodeSelector", "no flavor")


@dataclass
class Explanation:
    """Why a workload is where it is, in words."""

    state: str  # Pending, Admitted, Finished, Inactive
    cluster_queue: str = ""
    position: int | None = None  # 1-based among the pending workloads of its ClusterQueue
    pending_in_queue: int = 0
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (category, message)
    engine_message: str = ""
    priority: str = ""  # its aging, in words, when its ClusterQueue has a policy (docs/governance.md)
    cause: str | None = None  # one word of engine.pending_causes; None when nothing keeps it

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "clusterQueue": self.cluster_queue,
            "position": self.position,
            "pendingInQueue": self.pending_in_queue,
            "reasons": [{"category": c, "message": m} for c, m in self.reasons],
            "engineMessage": self.engine_message,
            "priority": self.priority,
            "cause": self.cause,
        }


class StandaloneAdmission(AdmissionController):
    """The admission controller as standalone mode runs it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._decisions: list[Event] = []
        self._released: tuple[list[Event], int] = (self.state.events, 0)

    async def reconcile(self) -> int:
        written = await super().reconcile()
        self._release()
        return written

    def _release(self) -> None:
        """Pass on the decisions of the pass just written. An admission whose status write
        found the Workload deleted (the job reconciler removed it meanwhile) is left out, as
        upstream records its admission events only once the write succeeded: the engine has
        already forgotten that workload."""
        events = self.state.events
        source, done = self._released
        start = done if source is events else 0  # a sync starts a new list
        for event in events[start:]:
            if event.type in (ADMITTED, CHECKS_PASSED) and event.workload not in self.state.workloads:
                continue
            self._decisions.append(event)
        self._released = (events, len(events))

    # ------------------------------------------------------------ reading

    @property
    def decisions(self) -> list[Event]:
        """The engine's decisions, once written (the console prints them)."""
        return self._decisions

    def workload(self, namespace: str, name: str) -> Workload | None:
        return self.state.workloads.get(f"{namespace}/{name}")

    def cluster_queue_status(self, name: str) -> dict[str, Any] | None:
        if name not in self.state.cluster_queues:
            return None
        return engine_status.cluster_queue_status(self.state, name)

    def local_queue_status(self, namespace: str, name: str) -> dict[str, Any] | None:
        key = f"{namespace}/{name}"
        if key not in self.state.local_queues:
            return None
        return engine_status.local_queue_status(self.state, key)

    def position(self, wl: Workload) -> tuple[int | None, int, str]:
        """(1-based position, pending count, ClusterQueue) of a pending workload."""
        cq_name = self.state.route_of(wl)
        if cq_name is None:
            return None, 0, ""
        queue = self.state.queues.get(cq_name)
        if queue is None:
            return None, 0, cq_name
        pending = [*queue.active(), *queue.inadmissible.values()]
        pending.sort(key=lambda w: (queue.sort_key(w), w.seq))
        for index, other in enumerate(pending, start=1):
            if other.key == wl.key:
                return index, len(pending), cq_name
        return None, len(pending), cq_name

    def explain(self, stored: Manifest) -> Explanation:
        """Why the stored workload waits (or that it does not)."""
        key = Key.of(stored)
        if is_finished(stored):
            return Explanation("Finished", engine_message=_condition_message(stored, "Finished"))
        wl = self.workload(key.namespace or "default", key.name)
        rejected = self.rejected.get(key)
        if rejected:
            return Explanation("Invalid", reasons=[(INVALID, rejected)])
        if wl is None:
            return Explanation("Unknown", reasons=[(INVALID, "the engine has not read this workload yet")])
        cause = pending_causes.cause_of(self.state, wl)
        if wl.admission is not None:
            return Explanation(
                "Admitted",
                cluster_queue=wl.admission.cluster_queue,
                priority=aging.explain(self.state, wl),
                cause=cause,
            )
        if not wl.active:
            return Explanation(
                "Inactive",
                reasons=[(INACTIVE, "spec.active is false: resume the workload to queue it")],
                cause=cause,
            )
        result = Explanation("Pending", priority=aging.explain(self.state, wl), cause=cause)
        result.position, result.pending_in_queue, result.cluster_queue = self.position(wl)
        reserved = wl.conditions.get("QuotaReserved")
        message = reserved.message if reserved is not None else ""
        result.engine_message = message
        result.reasons.extend(self._routing_problems(wl))
        if reserved is not None and reserved.status == "False":
            result.reasons.extend(_categorise(reserved.reason, message))
        for check in (stored.get("status") or {}).get("admissionChecks", []):
            if check.get("state") != "Ready":
                text = (
                    f"admission check {check.get('name')} is {check.get('state')}: {check.get('message', '')}"
                )
                result.reasons.append((CHECK, text.rstrip(": ")))
        if not result.reasons:
            result.reasons.append((QUOTA, "waiting for its turn: the scheduler has not tried it yet"))
        return result

    def _routing_problems(self, wl: Workload) -> list[tuple[str, str]]:
        lq = self.state.local_queues.get(wl.queue_key)
        if lq is None:
            return [(INACTIVE, f"LocalQueue {wl.queue_key} does not exist")]
        if lq.stop_policy != "None":
            return [(INACTIVE, f"LocalQueue {wl.queue_key} is stopped ({lq.stop_policy})")]
        if lq.cluster_queue not in self.state.cluster_queues:
            return [(INACTIVE, f"ClusterQueue {lq.cluster_queue} does not exist")]
        reason = self.state.inactive_reason.get(lq.cluster_queue, "")
        if reason:
            return [(INACTIVE, f"ClusterQueue {lq.cluster_queue} is inactive: {reason}")]
        return []


def _categorise(reason: str, message: str) -> list[tuple[str, str]]:
    if not message:
        return []
    if reason == "Misconfigured":
        return [(INVALID, message)]
    if reason == "NoMatchingFlavor" or any(word in message for word in _FLAVOR_WORDS):
        return [(FLAVOR, message)]
    if reason == "ExceedsMaxQuota":
        return [(QUOTA, f"can never fit as requested: {message}")]
    return [(QUOTA, message)]


def _condition_message(obj: Manifest, kind: str) -> str:
    for cond in (obj.get("status") or {}).get("conditions", []):
        if cond.get("type") == kind:
            return f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return ""
