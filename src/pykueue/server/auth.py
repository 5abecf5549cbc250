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
from typing import Any

from pykueue.controllers import accounts
from pykueue.errors import NotFound
from pykueue.store.base import Manifest, Store

IDENTITY_KIND = "Identity"
IDENTITY_API = "pykueue.io/v1"
ADMIN = "admin"
TENANT = "tenant"
TENANT_KINDS = frozenset({"Job", "JobSet", "Workload"})
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def new_token() -> str:
    return "pk_" + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    namespaces: tuple[str, ...] = ()
    priority_classes: tuple[str, ...] = ()
    unix_user: str = ""  # the local user it is mapped to (its socket caller, and whom its jobs run as)
    uid: int | None = None  # set when the kernel vouched for the caller (the Unix socket)

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "role": self.role,
            "namespaces": list(self.namespaces),
            "priorityClasses": list(self.priority_classes),
        }
        if self.unix_user:
            out["unixUser"] = self.unix_user
        if self.uid is not None:
            out["uid"] = self.uid
        return out

    @staticmethod
    def from_manifest(obj: Manifest) -> Identity:
        spec = obj.get("spec") or {}
        return Identity(
            name=str(obj["metadata"]["name"]),
            role=str(spec.get("role", TENANT)),
            namespaces=tuple(spec.get("namespaces") or ()),
            priority_classes=tuple(spec.get("priorityClasses") or ()),
            unix_user=str(spec.get("unixUser") or ""),
        )


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


def author(identity: Identity) -> str:
    """Who a change is recorded as made by: the identity, and the Unix uid the kernel vouched for."""
    return identity.name if identity.uid is None else f"{identity.name} (uid {identity.uid})"


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


def priority_class_of(obj: Manifest) -> str:
    """The priority class an object asks for (Job label, Workload ref, or pod priorityClassName)."""
    meta = obj.get("metadata") or {}
    label = (meta.get("labels") or {}).get(PRIORITY_LABEL)
    if label:
        return str(label)
    spec = obj.get("spec") or {}
    ref = spec.get("priorityClassRef") or {}
    if ref.get("name"):
        return str(ref["name"])
    templates = [
        spec.get("template") or {},
        *[ps.get("template") or {} for ps in spec.get("podSets") or []],
        *[
            ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            for rj in spec.get("replicatedJobs") or []
        ],
    ]
    for template in templates:
        name = (template.get("spec") or {}).get("priorityClassName")
        if name:
            return str(name)
    return ""


def write_refusal(identity: Identity, obj: Manifest) -> str | None:
    """Why ``identity`` may not create, change or delete ``obj`` (None when it may)."""
    if identity.is_admin:
        return None
    kind = str(obj.get("kind", ""))
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    ref = f"{kind}/{namespace}/{meta.get('name', '')}"
    allowed = ", ".join(identity.namespaces) or "no namespace"
    if kind not in TENANT_KINDS:
        return (
            f"tenant {identity.name} may not manage {kind} objects (only admins manage ResourceFlavors, "
            f"ClusterQueues, Cohorts, LocalQueues and priority classes); tenants submit Jobs, JobSets and Workloads"
        )
    if namespace not in identity.namespaces:
        return f"tenant {identity.name} may only submit to namespaces {allowed}; {ref} is in namespace {namespace}"
    wanted = priority_class_of(obj)
    if wanted and wanted not in identity.priority_classes:
        granted = ", ".join(identity.priority_classes) or "none"
        return f"tenant {identity.name} is not granted priority class {wanted} (granted: {granted}); {ref} asks for it"
    return None


def may_read(identity: Identity, kind: str, namespace: str) -> bool:
    if identity.is_admin or kind not in TENANT_KINDS:
        return kind != IDENTITY_KIND or identity.is_admin
    return namespace in identity.namespaces
