"""Kubernetes mode's policy history: revisions recorded from the watches, kept in ConfigMaps.

    start     list the revision ConfigMaps of our namespace -> the last recorded state of every
              policy object; compare it with what the first list returned: a revision for every
              object that changed (or appeared, or went) while no controller was recording
    handle    a watch event of a policy kind: a revision when its normalized form changed
    flush     (each pass) write the new revisions, one ConfigMap each, then drop the oldest
              beyond ``retention`` (never the latest revision of an object that exists)

One ConfigMap per revision (``pykueue-policy-rev-<10 digits>``, label
``pykueue.io/policy-history=revision``, the revision as JSON under ``revision.json``): a
revision is written once and never rewritten, so two writes never race on one object, and a
ConfigMap stays far below its 1 MiB limit. The manager runs on the leader only, and writes
through its fenced store, so only the leader records.

**Who.** A watch event does not carry the user, but the validating webhook's
AdmissionRequest does: when this process's webhook server allowed a create or update whose
object is exactly what the watch then shows, the recorder names that request's user
(``alice (admission request)``). Otherwise (another replica answered the request, the
webhooks are off) it names the field manager of the object's most recent ``managedFields``
entry and its operation (``kubectl (Apply)``); for a deletion it says that it does not know
(the webhooks are not called on deletes).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pykueue.api import policy_history
from pykueue.api.policy_history import ObjectKey, Revision
from pykueue.errors import AlreadyExists, NotFound, PykueueError
from pykueue.store.base import Key, Manifest, WatchEvent

log = logging.getLogger(__name__)

LABEL = "pykueue.io/policy-history"
SELECTOR = f"{LABEL}=revision"
PREFIX = "pykueue-policy-rev-"
DATA_KEY = "revision.json"
RETENTION = 500
UNKNOWN_DELETER = "unknown (a watch does not say who deleted)"
UNKNOWN_WHILE_DOWN = "unknown (changed while no controller was recording)"
RETRY_SECONDS = 15  # between tries of a revision that could not be written
NOTES_PER_OBJECT = 8  # admission requests remembered per object until the watch shows them


def _utc_now() -> datetime:
    return datetime.now(UTC)


def configmap_name(rev: int) -> str:
    return f"{PREFIX}{rev:010d}"


def to_configmap(item: Revision, namespace: str) -> Manifest:
    record = {**item.summary(), "before": item.before, "after": item.after}
    record.pop("changes", None)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": configmap_name(item.rev), "namespace": namespace, "labels": {LABEL: "revision"}},
        "data": {DATA_KEY: json.dumps(record, sort_keys=True)},
    }


def from_configmap(obj: Manifest) -> Revision | None:
    """The revision a ConfigMap holds, or None (and a warning) when it cannot be read."""
    try:
        return Revision.from_dict(json.loads((obj.get("data") or {})[DATA_KEY]))
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("ignoring policy revision ConfigMap %s: %s", (obj.get("metadata") or {}).get("name"), exc)
        return None


async def load(store: Any, namespace: str) -> list[Revision]:
    """Every revision kept in ``namespace``, oldest first."""
    selected = getattr(store, "list_selected", None)
    if selected is not None:  # the API server filters by label
        items, _ = await selected("ConfigMap", namespace, SELECTOR)
    else:
        listed, _ = await store.list("ConfigMap", namespace)
        items = [
            i for i in listed if ((i.get("metadata") or {}).get("labels") or {}).get(LABEL) == "revision"
        ]
    found = [r for r in (from_configmap(i) for i in items) if r is not None]
    return sorted(found, key=lambda r: r.rev)


def who_changed(obj: Manifest) -> str:
    """The field manager of the latest managedFields entry, and its operation."""
    entries = [e for e in (obj.get("metadata") or {}).get("managedFields") or [] if isinstance(e, dict)]
    if not entries:
        return "unknown (no managedFields)"
    latest = max(entries, key=lambda e: str(e.get("time") or ""))
    return f"{latest.get('manager') or 'unknown'} ({latest.get('operation') or 'Update'})"


def _key(obj: Manifest) -> ObjectKey:
    key = Key.of(obj)
    return (key.kind, key.namespace, key.name)


@dataclass
class PolicyRecorder:
    """Records revisions of the policy kinds the manager watches (the leader's only)."""

    store: Any  # a KubernetesStore (or its leader fence)
    namespace: str
    clock: Callable[[], datetime] = _utc_now
    retention: int = RETENTION
    last: dict[ObjectKey, Manifest | None] = field(default_factory=dict)  # as last recorded
    latest_rev: dict[ObjectKey, int] = field(default_factory=dict)
    kept: dict[int, ObjectKey] = field(default_factory=dict)  # revisions in the cluster
    unwritten: list[Revision] = field(default_factory=list)
    # Users of recent admission requests per object: (the normalized object asked for, user).
    authors: dict[ObjectKey, list[tuple[Manifest | None, str]]] = field(default_factory=dict)
    next_rev: int = 1
    started: bool = False
    # Per object, what a policy change would alter (uid, generation, labels, annotations) as
    # last observed: the queues' own status writes come back on the watch a thousand times a
    # minute in a busy cluster, and comparing each whole object cost more than the pass.
    seen: dict[ObjectKey, tuple[Any, ...]] = field(default_factory=dict)
    retry_after: datetime | None = None  # a failed write is retried from then on
    _write_problem: str = ""

    async def start(self, current: Iterable[Manifest]) -> None:
        """Load what is recorded, and record what changed while nobody was recording."""
        for item in await load(self.store, self.namespace):
            self._remember(item)
        seen = set()
        for obj in current:
            if policy_history.is_policy(str(obj.get("kind", ""))):
                seen.add(_key(obj))
                self._observe(_key(obj), obj, who_changed(obj))
        for key, before in list(self.last.items()):
            if before is not None and key not in seen:
                self._observe(key, None, UNKNOWN_WHILE_DOWN)
        self.started = True

    def handle(self, event: WatchEvent) -> None:
        obj = event.object
        if not self.started or not policy_history.is_policy(str(obj.get("kind", ""))):
            return
        key = _key(obj)
        if event.type == "DELETED":
            self.seen.pop(key, None)
            self._observe(key, None, UNKNOWN_DELETER)
            return
        meta = obj.get("metadata") or {}
        mark = (meta.get("uid"), meta.get("generation"), meta.get("labels"), meta.get("annotations"))
        # A spec change moves the generation; without one (some stores) every event is compared.
        if mark[1] is not None and self.seen.get(key) == mark:
            return
        self.seen[key] = mark
        self._observe(key, obj, who_changed(obj))

    def note_request(self, review: dict[str, Any]) -> None:
        """An allowed AdmissionRequest for a Kueue object: who asked for this exact object."""
        obj = review.get("object") or {}
        user = str((review.get("userInfo") or {}).get("username") or "")
        if not user or review.get("operation") not in ("CREATE", "UPDATE"):
            return
        if not policy_history.is_policy(str(obj.get("kind", ""))):
            return
        asked = policy_history.normalize(obj)
        assert asked is not None
        if review.get("namespace"):  # a create may leave the namespace to the request
            asked["metadata"]["namespace"] = str(review["namespace"])
        key = (
            str(obj.get("kind")),
            str(review.get("namespace") or ""),
            str(asked["metadata"].get("name", "")),
        )
        notes = self.authors.setdefault(key, [])
        notes.append((asked, user))
        del notes[:-NOTES_PER_OBJECT]

    def _requested_by(self, key: ObjectKey, obj: Manifest) -> str | None:
        """The user of the admission request for exactly ``obj``, if this process saw it."""
        notes = self.authors.get(key) or []
        wanted = policy_history.normalize(obj)
        for index in range(len(notes) - 1, -1, -1):
            if notes[index][0] == wanted:
                user = notes[index][1]
                del notes[: index + 1]  # older requests were overtaken by this one
                return f"{user} (admission request)"
        return None

    def _observe(self, key: ObjectKey, obj: Manifest | None, who: str) -> None:
        if obj is not None:
            who = self._requested_by(key, obj) or who
        before = self.last.get(key)
        at = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        # The recorded `before` is the last recorded state (normalized), not the event's.
        item = policy_history.revision(self.next_rev, at, who, before, obj)
        if item is None:
            return
        self.next_rev += 1
        self.unwritten.append(item)
        self.last[key] = item.after

    def _remember(self, item: Revision) -> None:
        self.last[item.key] = item.after
        self.latest_rev[item.key] = item.rev
        self.kept[item.rev] = item.key
        self.next_rev = max(self.next_rev, item.rev + 1)

    async def flush(self) -> int:
        """Write the revisions recorded since the last flush, oldest first; the number written."""
        written = 0
        if self.unwritten and self.retry_after is not None and self.clock() < self.retry_after:
            return 0
        while self.unwritten:
            item = self.unwritten[0]
            try:
                await self._create(item)
            except PykueueError as exc:
                # Say it once per cause, and do not retry every pass (a missing namespace stays
                # missing for a while; each try is a request to the API server).
                if str(exc) != self._write_problem:
                    log.warning(
                        "policy revision %d not written yet (%s); retrying every %d s",
                        item.rev,
                        exc,
                        RETRY_SECONDS,
                    )
                    self._write_problem = str(exc)
                self.retry_after = self.clock() + timedelta(seconds=RETRY_SECONDS)
                return written
            self.retry_after = None
            self._write_problem = ""
            self.unwritten.pop(0)
            self.kept[item.rev] = item.key
            self.latest_rev[item.key] = item.rev
            written += 1
        if written:
            await self._prune()
        return written

    async def _create(self, item: Revision) -> None:
        try:
            await self.store.create(to_configmap(item, self.namespace))
        except AlreadyExists:
            # Another recorder (a former leader) took this number: renumber what is unwritten.
            taken = max([r.rev for r in await load(self.store, self.namespace)] or [0])
            for offset, pending in enumerate(self.unwritten):
                self.unwritten[offset] = _renumbered(pending, taken + 1 + offset)
            self.next_rev = taken + 1 + len(self.unwritten)
            raise

    async def _prune(self) -> None:
        """Drop the oldest revisions beyond the retention, but never an object's latest."""
        protected = {rev for key, rev in self.latest_rev.items() if self.last.get(key) is not None}
        extra = len(self.kept) - self.retention
        for rev in sorted(self.kept):
            if extra <= 0:
                break
            if rev in protected:
                continue
            try:
                await self.store.delete("ConfigMap", self.namespace, configmap_name(rev))
            except NotFound:
                pass
            except PykueueError as exc:
                log.warning("old policy revision %d not deleted (%s)", rev, exc)
                return
            del self.kept[rev]
            extra -= 1


def _renumbered(item: Revision, rev: int) -> Revision:
    return Revision(
        rev, item.at, item.who, item.kind, item.namespace, item.name, item.operation, item.before, item.after
    )
