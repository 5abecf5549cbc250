"""Per-tenant limits of the standalone API: a request rate and a count of objects (HTTP 429).

    rate     a token bucket per identity: ``limits.burst`` requests at once, refilled at
             ``limits.requestsPerSecond``; a request finding it empty is refused before
             its body is read, with ``Retry-After`` (whole seconds)
    objects  the Jobs, JobSets and Workloads of its own (not those a controller made for a
             job) in each namespace of a tenant, after the apply, at most ``limits.maxObjects``;
             an apply with more such documents than that is refused as soon as its YAML is
             read, before the costlier checks

Admins are not limited: the limits keep one tenant from starving the others (and the
admin), and an admin can change them. Counting per namespace and not per identity: a
namespace's objects are what the engine and every listing of it pay for, whoever sent them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pykueue.api import access
from pykueue.errors import NotFound
from pykueue.standalone.http import inputs
from pykueue.standalone.http.limits import Limits
from pykueue.store.base import Key

COUNTED_KINDS = ("Job", "JobSet", "Workload")


class TooManyRequests(inputs.InputRefused):
    """HTTP 429 with the seconds to wait (``Retry-After``), or 0 when waiting would not help."""

    def __init__(self, message: str, problems: list[str], retry_after: int = 0) -> None:
        super().__init__(429, message, problems)
        self.retry_after = retry_after


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateLimiter:
    """One token bucket per tenant identity, in memory (a restart forgives everyone)."""

    limits: Limits
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def admit(self, identity: access.Identity) -> None:
        """Take one request from ``identity``'s bucket; TooManyRequests when it is empty."""
        if identity.is_admin:
            return
        now = self.clock()
        rate, burst = self.limits.requests_per_second, self.limits.burst
        bucket = self._buckets.get(identity.name)
        if bucket is None:
            bucket = self._buckets[identity.name] = _Bucket(float(burst), now)
        bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        wait = max(1, math.ceil((1.0 - bucket.tokens) / rate))
        raise TooManyRequests(
            f"tenant {identity.name} sent requests faster than limits.requestsPerSecond ({rate:g} per "
            f"second, bursts of limits.burst {burst}); retry in {wait} s",
            [f"limits.requestsPerSecond: {rate:g}", f"limits.burst: {burst}"],
            retry_after=wait,
        )


def _counted(manifest: Any) -> bool:
    if not isinstance(manifest, dict) or manifest.get("kind") not in COUNTED_KINDS:
        return False
    return not (manifest.get("metadata") or {}).get("ownerReferences")


def check_document_count(identity: access.Identity, raw: Iterable[tuple[str, Any]], limits: Limits) -> None:
    """Before validation: more counted documents for one namespace than it may hold at all is
    refused at once, without the costlier checks of every document."""
    if identity.is_admin:
        return
    per_namespace: dict[str, int] = {}
    for _, doc in raw:
        if _counted(doc):
            namespace = str((doc.get("metadata") or {}).get("namespace") or "default")
            per_namespace[namespace] = per_namespace.get(namespace, 0) + 1
    for namespace, count in sorted(per_namespace.items()):
        if count > limits.max_objects:
            raise _over(
                identity,
                f"the apply holds {count} Jobs, JobSets and Workloads for namespace {namespace}",
                limits,
            )


async def check_room(store: Any, identity: access.Identity, manifests: Iterable[Any], limits: Limits) -> None:
    """After validation: each namespace's counted objects, with the apply's new ones, within the limit."""
    if identity.is_admin:
        return
    new: dict[str, int] = {}
    for manifest in manifests:
        if not _counted(manifest):
            continue
        key = Key.of(manifest)
        if key.name and await _exists(store, key):
            continue  # an update, or unchanged: nothing more to hold
        new[key.namespace] = new.get(key.namespace, 0) + 1
    for namespace, added in sorted(new.items()):
        held = sum(store.count(kind, namespace, unowned_only=kind == "Workload") for kind in COUNTED_KINDS)
        if held + added > limits.max_objects:
            raise _over(
                identity,
                f"namespace {namespace} holds {held} Jobs, JobSets and Workloads and the apply adds {added}",
                limits,
            )


async def _exists(store: Any, key: Key) -> bool:
    try:
        await store.get(key.kind, key.namespace, key.name)
    except NotFound:
        return False
    return True


def _over(identity: access.Identity, what: str, limits: Limits) -> TooManyRequests:
    return TooManyRequests(
        f"tenant {identity.name} is over limits.maxObjects: {what}, more than the {limits.max_objects} "
        "a namespace may hold; delete finished jobs first",
        [f"limits.maxObjects: {limits.max_objects}"],
    )
