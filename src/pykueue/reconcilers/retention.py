"""``objectRetentionPolicies.workloads``: deleting what Kueue is done with, after a while.

    afterFinished            a Workload whose Finished condition has been True that long
                             is deleted (its job stays; Event "Deleted" on the Workload)
    afterDeactivatedByKueue  the job of a Workload that Kueue deactivated (its Evicted
                             reason is DeactivatedDueTo..., not a user's spec.active
                             false) is deleted that long after the eviction, with
                             background propagation, so its Workload and pods go too
                             (Event "Deleted" on the job)

Both count from the condition's lastTransitionTime, as upstream's workload and job
reconcilers do; unset, nothing is deleted. Only the Workloads a watch event showed in
that state are looked at: a heap of their expiry times, so a pass costs nothing
until one is due.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pykueue.api.configuration import ObjectRetentionPolicies
from pykueue.api.meta import parse_time
from pykueue.engine import intake
from pykueue.errors import NotFound, StoreError
from pykueue.store.base import Key, Manifest, Store, WatchEvent

log = logging.getLogger(__name__)

FINISHED = "afterFinished"
DEACTIVATED = "afterDeactivatedByKueue"
DEACTIVATED_BY_KUEUE = "DeactivatedDueTo"


@dataclass(frozen=True)
class Policy:
    """The two retention periods; None: never delete."""

    after_finished: timedelta | None = None
    after_deactivated_by_kueue: timedelta | None = None

    @property
    def enabled(self) -> bool:
        return self.after_finished is not None or self.after_deactivated_by_kueue is not None


def policy_of(section: ObjectRetentionPolicies) -> Policy:
    """The policy of a Configuration's ``objectRetentionPolicies`` (durations already checked)."""
    kept = section.workloads
    if kept is None:
        return Policy()

    def period(text: str | None) -> timedelta | None:
        return None if text is None else timedelta(microseconds=intake.parse_duration(text))

    return Policy(period(kept.after_finished), period(kept.after_deactivated_by_kueue))


def _condition(obj: Manifest, kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def expiry(policy: Policy, workload: Manifest) -> tuple[datetime, str] | None:
    """When and what to delete for this Workload as it stands; None for nothing."""
    finished = _condition(workload, "Finished")
    if finished is not None:
        since = parse_time(finished.get("lastTransitionTime"))
        if policy.after_finished is None or since is None:
            return None
        return since + policy.after_finished, FINISHED
    if policy.after_deactivated_by_kueue is None or (workload.get("spec") or {}).get("active", True):
        return None
    evicted = _condition(workload, "Evicted")
    if evicted is None or not str(evicted.get("reason", "")).startswith(DEACTIVATED_BY_KUEUE):
        return None
    since = parse_time(evicted.get("lastTransitionTime"))
    return None if since is None else (since + policy.after_deactivated_by_kueue, DEACTIVATED)


def _owner(workload: Manifest) -> tuple[str, str] | None:
    """(kind, name) of the job that owns the Workload (its controller owner reference)."""
    for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") and ref.get("name"):
            return str(ref["kind"]), str(ref["name"])
    return None


@dataclass
class WorkloadRetention:
    """Deletes finished Workloads and Kueue-deactivated jobs once their retention is over."""

    store: Store
    policy: Policy
    clock: Callable[[], datetime]
    # (type, reason, message) Events, as the job reconciler records them.
    on_event: Callable[[Manifest, str, str, str], object] | None = None
    # What is due for a Workload (when, what), and the Workload as last seen.
    _due: dict[Key, tuple[datetime, str, Manifest]] = field(default_factory=dict)
    _heap: list[tuple[datetime, str, str, str]] = field(default_factory=list)

    def handle(self, event: WatchEvent) -> None:
        if event.object.get("kind") != "Workload":
            return
        key = Key.of(event.object)
        due = None if event.type == "DELETED" else expiry(self.policy, event.object)
        if due is None:
            self._due.pop(key, None)
            return
        before = self._due.get(key)
        self._due[key] = (*due, event.object)
        if before is None or before[:2] != due:
            heapq.heappush(self._heap, (due[0], key.namespace, key.name, due[1]))

    def next_deadline(self) -> datetime | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    async def reconcile(self) -> int:
        """Delete what is due; the number of deletions."""
        now = self.clock()
        done = 0
        while self._heap:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                break
            _, namespace, name, what = heapq.heappop(self._heap)
            _, _, workload = self._due.pop(Key("Workload", namespace, name))
            done += await self._delete(workload, what)
        return done

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            at, namespace, name, what = heap[0]
            current = self._due.get(Key("Workload", namespace, name))
            if current is not None and current[:2] == (at, what):
                return
            heapq.heappop(heap)

    async def _delete(self, workload: Manifest, what: str) -> int:
        meta = workload.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        if what == FINISHED:
            target: tuple[str, str, Manifest] = ("Workload", name, workload)
            message = "Deleted finished workload due to elapsed retention"
        else:
            owner = _owner(workload)
            if owner is None:
                return 0  # a Workload of its own: upstream's job reconciler has no job to delete
            found = await self._get(owner[0], namespace, owner[1])
            if found is None:
                return 0
            target = (owner[0], owner[1], found)
            message = "Deleted job: deactivation retention period expired"
        try:
            await self.store.delete(target[0], namespace, target[1])
        except NotFound:
            return 0
        except StoreError as exc:
            # Tried again at the next event about it, or the full resync.
            log.warning("retention: could not delete %s %s/%s: %s", target[0], namespace, target[1], exc)
            return 0
        if self.on_event is not None:
            self.on_event(target[2], "Normal", "Deleted", message)
        return 1

    async def _get(self, kind: str, namespace: str, name: str) -> Manifest | None:
        try:
            return await self.store.get(kind, namespace, name)
        except NotFound:
            return None
        except StoreError as exc:
            log.warning("retention: could not read %s %s/%s: %s", kind, namespace, name, exc)
            return None
