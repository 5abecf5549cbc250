"""Policy history: what a revision of a queue-setup object holds, and how two versions differ.

    normalize   a stored manifest -> its user-owned part (no status, no store bookkeeping)
    operation   (before, after) -> create | update | delete, or None when nothing a user owns changed
    diff        (before, after) -> readable lines, one per changed leaf: ``path: old -> new``
    state_at    revisions, REV -> every object changed after REV, as it was at REV (None: absent)

Only five kinds are policy: the objects that decide who gets what quota. A revision keeps
the normalized object before and after the change, so a revision can be shown, and a
rollback computed, from the history alone. Pure: the stores and the server call these.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Manifest = dict[str, Any]
Operation = Literal["create", "update", "delete"]

POLICY_KINDS = frozenset({"ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass"})

# Metadata a store or the API server writes on every change: it says nothing about policy,
# and keeping it would make every status write look like a policy change.
NOISY_METADATA = frozenset(
    {
        "resourceVersion",
        "managedFields",
        "generation",
        "uid",
        "creationTimestamp",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "finalizers",
        "ownerReferences",
    }
)
# Annotations written by tools rather than by the object's owner.
NOISY_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


def is_policy(kind: str) -> bool:
    return kind in POLICY_KINDS


def normalize(obj: Manifest | None) -> Manifest | None:
    """The part of ``obj`` its owner wrote: no status, no bookkeeping metadata, no empty maps."""
    if obj is None:
        return None
    out: Manifest = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("status", "metadata")}
    meta = {k: copy.deepcopy(v) for k, v in (obj.get("metadata") or {}).items() if k not in NOISY_METADATA}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in NOISY_ANNOTATIONS}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    if not meta.get("labels"):
        meta.pop("labels", None)
    if not meta.get("namespace"):
        meta.pop("namespace", None)
    out["metadata"] = meta
    return out


def _canonical(obj: Manifest | None) -> str:
    # As JSON, not Python equality: false and 0 (or 1 and 1.0) are equal in Python but are
    # different values in a manifest, and the diff below tells them apart.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def operation(before: Manifest | None, after: Manifest | None) -> Operation | None:
    """What changed between two versions of one object, or None when its normalized form did not."""
    old, new = normalize(before), normalize(after)
    if _canonical(old) == _canonical(new):
        return None
    if old is None:
        return "create"
    if new is None:
        return "delete"
    return "update"


def _leaves(value: Any, path: str, out: dict[str, Any]) -> None:
    """Flatten ``value`` into {path: leaf}; an empty map or list is a leaf of its own."""
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _leaves(value[key], f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _leaves(item, f"{path}[{index}]", out)
    else:
        out[path] = value


def leaves(obj: Manifest | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if obj is not None:
        _leaves(obj, "", out)
    return out


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def diff(before: Manifest | None, after: Manifest | None) -> list[str]:
    """One line per changed leaf of the normalized objects, in path order.

    ``path: old -> new`` for a changed value, ``+ path: new`` for an added one,
    ``- path: old`` for a removed one. List items are compared by position.
    """
    old, new = leaves(normalize(before)), leaves(normalize(after))
    lines = []
    for path in sorted(set(old) | set(new)):
        if path not in old:
            lines.append(f"+ {path}: {_shown(new[path])}")
        elif path not in new:
            lines.append(f"- {path}: {_shown(old[path])}")
        elif old[path] != new[path] or type(old[path]) is not type(new[path]):
            lines.append(f"  {path}: {_shown(old[path])} -> {_shown(new[path])}")
    return lines


ObjectKey = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


@dataclass(frozen=True, slots=True)
class Revision:
    """One recorded change of a policy object."""

    rev: int
    at: str  # RFC 3339, UTC
    who: str
    kind: str
    namespace: str
    name: str
    operation: Operation
    before: Manifest | None  # normalized
    after: Manifest | None  # normalized

    @property
    def key(self) -> ObjectKey:
        return (self.kind, self.namespace, self.name)

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"

    def summary(self) -> dict[str, Any]:
        """The row `policy history` shows."""
        return {
            "rev": self.rev,
            "at": self.at,
            "who": self.who,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "operation": self.operation,
            "changes": len(diff(self.before, self.after)),
        }

    def as_dict(self) -> dict[str, Any]:
        """Everything, with the readable diff (`policy show`)."""
        return {
            **self.summary(),
            "before": self.before,
            "after": self.after,
            "diff": diff(self.before, self.after),
        }

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> Revision:
        return Revision(
            rev=int(raw["rev"]),
            at=str(raw["at"]),
            who=str(raw["who"]),
            kind=str(raw["kind"]),
            namespace=str(raw.get("namespace") or ""),
            name=str(raw["name"]),
            operation=raw["operation"],
            before=raw.get("before"),
            after=raw.get("after"),
        )


def revision(rev: int, at: str, who: str, before: Manifest | None, after: Manifest | None) -> Revision | None:
    """The revision recording the change from ``before`` to ``after``, or None if nothing changed."""
    op = operation(before, after)
    if op is None:
        return None
    either = after if after is not None else before
    assert either is not None  # operation() is None when both are
    meta = either.get("metadata") or {}
    return Revision(
        rev=rev,
        at=at,
        who=who,
        kind=str(either.get("kind", "")),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name", "")),
        operation=op,
        before=normalize(before),
        after=normalize(after),
    )


def state_at(revisions: Iterable[Revision], rev: int) -> dict[ObjectKey, Manifest | None]:
    """Every object changed after ``rev``, as it was just after ``rev`` (None: it did not exist).

    That is the ``before`` of the first revision after ``rev`` of each object: the
    history need not reach back to the object's creation.
    """
    out: dict[ObjectKey, Manifest | None] = {}
    for item in sorted(revisions, key=lambda r: r.rev):
        if item.rev > rev and item.key not in out:
            out[item.key] = copy.deepcopy(item.before)
    return out
