"""The `Store` protocol every backend implements, and the values it speaks.

Objects are manifests (``dict``) with ``apiVersion``, ``kind``, ``metadata``,
``spec`` and ``status``. A store owns ``metadata.resourceVersion``,
``metadata.uid``, ``metadata.creationTimestamp`` and ``metadata.generation``:
it sets them on create and bumps them on every write. A write that carries a
``resourceVersion`` must match the stored one, or it fails with
`pykueue.errors.Conflict` (optimistic concurrency, as the API server).

``update_status`` changes only ``status`` (the status subresource) and
``update`` only the rest, so a controller writing decisions can never undo a
user's edit of the spec, and the other way round.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Manifest = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]

# The rank of the requests made in this context. A store with a client-side rate limit
# lets the lowest rank through first when requests wait for it; a caller that orders its
# writes (the Workload status write queue, from (1, ...) on) sets it around its call.
# Unranked requests rank (0,), first: a job's Finished, say, gives quota back.
request_rank: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("request_rank", default=(0,))

# Requests made in this context may wait for spare capacity: under a client-side rate
# limit they take a token only while the bucket keeps half its burst for the others.
# What a reader merely reads (a pending workload's explanation, an estimated start) must
# not use up the burst that the next admissions need.
request_spare_only: contextvars.ContextVar[bool] = contextvars.ContextVar("request_spare_only", default=False)

# Called when a request made in this context has passed the client-side rate limit (at
# once without one): a caller that bounds what it decides ahead of its writes (the
# Workload status write queue) counts only what still waits for a token, not what is
# already travelling, however slowly the API server answers.
request_on_its_way: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "request_on_its_way", default=None
)

# Who the writes made in this context are made for: a store that keeps policy history
# (sqlite) records it with every change of a policy object. The server sets it to the
# authenticated caller around a request's writes; anything else writes as the system.
SYSTEM_AUTHOR = "system:pykueue"
change_author: contextvars.ContextVar[str] = contextvars.ContextVar("change_author", default=SYSTEM_AUTHOR)


@contextlib.contextmanager
def authored_by(who: str) -> Iterator[None]:
    """Writes inside are recorded as made by ``who``."""
    token = change_author.set(who)
    try:
        yield
    finally:
        change_author.reset(token)


@dataclass(frozen=True, slots=True)
class Key:
    """Where an object lives: its kind, namespace ("" when cluster-scoped) and name."""

    kind: str
    namespace: str
    name: str

    @staticmethod
    def of(obj: Manifest) -> Key:
        meta = obj.get("metadata") or {}
        return Key(str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    object: Manifest
    resource_version: str


class Store(Protocol):
    """What the controllers need from a place that keeps objects."""

    async def get(self, kind: str, namespace: str, name: str) -> Manifest:
        """The object, or `NotFound`."""
        ...

    async def list(self, kind: str, namespace: str | None = None) -> tuple[list[Manifest], str]:
        """All objects of a kind (in a namespace, or all when None) and the store's version."""
        ...

    async def create(self, obj: Manifest) -> Manifest:
        """Store a new object; `AlreadyExists` if the name is taken. Returns it as stored."""
        ...

    async def update(self, obj: Manifest) -> Manifest:
        """Replace everything but status; `Conflict` on a stale resourceVersion."""
        ...

    async def update_status(self, obj: Manifest) -> Manifest:
        """Replace only the status; `Conflict` on a stale resourceVersion."""
        ...

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        """Remove the object; `NotFound` if it is not there."""
        ...

    def watch(self, kind: str, since: str) -> AsyncIterator[WatchEvent]:
        """Changes of a kind after version ``since``, in order, until the watcher stops."""
        ...


def key_of(obj: Manifest) -> Key:
    return Key.of(obj)


def resource_version(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def version_number(obj: Manifest) -> int:
    """The resourceVersion as a number, to tell newer from older (0 when it is not one)."""
    text = resource_version(obj)
    return int(text) if text.isdigit() else 0
