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

from pykueue.engine import aging, lost_work, pending_causes
from pykueue.engine import status as engine_status
from pykueue.engine.events import ADMITTED, CHECKS_PASSED, Event
from pykueue.engine.workloads import Workload
from pykueue.reconcilers.admission import AdmissionController
from pykueue.reconcilers.workload_status import is_finished
from pykueue.store.base import Key, Manifest
from pykueue.views import why


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
    lost_work: str = ""  # what its preemptions threw away, in resource-hours (engine/lost_work.py)

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
            "lostWork": self.lost_work,
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
            return Explanation("Invalid", reasons=[(pending_causes.MISCONFIGURED, rejected)])
        if wl is None:
            return Explanation(
                "Unknown", reasons=[(pending_causes.EVALUATING, "the engine has not read this workload yet")]
            )
        cause = pending_causes.cause_of(self.state, wl)
        reasons = why.reasons(self.state, wl, stored)
        lost = lost_work.words(wl.lost_work) if wl.lost_work else ""
        if wl.admission is not None:
            return Explanation(
                # Quota reserved with a check not Ready yet: the job does not run.
                "Admitted" if wl.is_admitted() else "QuotaReserved",
                cluster_queue=wl.admission.cluster_queue,
                reasons=reasons,
                priority=aging.explain(self.state, wl),
                cause=cause,
                lost_work=lost,
            )
        if not wl.active:
            return Explanation("Inactive", reasons=reasons, cause=cause, lost_work=lost)
        result = Explanation(
            "Pending", reasons=reasons, priority=aging.explain(self.state, wl), cause=cause, lost_work=lost
        )
        result.position, result.pending_in_queue, result.cluster_queue = self.position(wl)
        reserved = wl.conditions.get("QuotaReserved")
        result.engine_message = reserved.message if reserved is not None else ""
        return result


def _condition_message(obj: Manifest, kind: str) -> str:
    for cond in (obj.get("status") or {}).get("conditions", []):
        if cond.get("type") == kind:
            return f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return ""
