"""Who is calling, and what they may do: tokens, identities, roles.

A token is a random string shown once; the store keeps only its SHA-256, in
an ``Identity`` object (``pykueue.io/v1``, cluster-scoped) that also holds
the role:

    admin    everything: ResourceFlavors, ClusterQueues, Cohorts, LocalQueues,
             priority classes, any namespace's jobs, identities
    tenant   Jobs and Workloads in its ``namespaces`` only, with no priority
             class but those in ``priorityClasses``; reads the queues, and
             the workloads and jobs of its namespaces

Every refusal is a sentence that says who asked, what was refused and what
would be allowed, so a tenant can fix the request without asking an admin.

Callers on the server's Unix socket need no token: the kernel tells who they
are (`peer`). Root and the server's own user are admins; any other local user
is the identity mapped to it (``spec.unixUser``), or refused. Every request is
checked against the stored identity, so deleting an identity or replacing its
token takes effect at the next request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from pykueue.api.access import ADMIN, IDENTITY_API, IDENTITY_KIND, Identity
from pykueue.errors import NotFound
from pykueue.standalone.node import accounts
from pykueue.store.base import Manifest, Store


def new_token() -> str:
    return "pk_" + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def identity_manifest(identity: Identity, token: str) -> Manifest:
    spec: Manifest = {
        "role": identity.role,
        "namespaces": list(identity.namespaces),
        "priorityClasses": list(identity.priority_classes),
        "tokenSha256": token_hash(token),
    }
    if identity.unix_user:
        spec["unixUser"] = identity.unix_user
    return {
        "apiVersion": IDENTITY_API,
        "kind": IDENTITY_KIND,
        "metadata": {"name": identity.name},
        "spec": spec,
    }


def local_admin(uid: int) -> Identity:
    """Root, or the server's own user, on the socket (and the server applying its own config)."""
    user = accounts.by_uid(uid)
    name = user.name if user is not None else str(uid)
    return Identity(name, ADMIN, unix_user=name, uid=uid)


@dataclass
class Authenticator:
    """Who a request comes from: a bearer token's identity, or the socket peer's."""

    store: Store
    server_uid: int = 0
    _names: dict[str, str] = field(default_factory=dict)  # token hash -> identity name

    async def refresh(self) -> None:
        items, _ = await self.store.list(IDENTITY_KIND)
        self._names = {
            str(obj["spec"]["tokenSha256"]): str(obj["metadata"]["name"])
            for obj in items
            if (obj.get("spec") or {}).get("tokenSha256")
        }

    async def identify(self, token: str) -> Identity | None:
        """The token's identity, read from the store on every call: a revoked token fails at once."""
        digest = token_hash(token)
        name = self._names.get(digest)
        if name is None:
            await self.refresh()
            name = self._names.get(digest)
            if name is None:
                return None
        try:
            stored = await self.store.get(IDENTITY_KIND, "", name)
        except NotFound:
            stored = None
        if stored is None or (stored.get("spec") or {}).get("tokenSha256") != digest:
            self._names.pop(digest, None)
            return None
        return Identity.from_manifest(stored)

    async def identify_peer(self, uid: int) -> Identity | None:
        """A local caller by uid: root and the server's user are admins; others by their mapping."""
        if uid in (0, self.server_uid):
            return local_admin(uid)
        user = accounts.by_uid(uid)
        items, _ = await self.store.list(IDENTITY_KIND)
        for obj in items:
            mapped = str((obj.get("spec") or {}).get("unixUser") or "")
            if mapped and (mapped == str(uid) or (user is not None and mapped == user.name)):
                found = Identity.from_manifest(obj)
                return Identity(
                    found.name, found.role, found.namespaces, found.priority_classes, found.unix_user, uid
                )
        return None
