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
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

from pykueue.store.base import Manifest, Store

IDENTITY_KIND = "Identity"
IDENTITY_API = "pykueue.io/v1"
ADMIN = "admin"
TENANT = "tenant"
TENANT_KINDS = frozenset({"Job", "Workload"})
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

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role,
            "namespaces": list(self.namespaces),
            "priorityClasses": list(self.priority_classes),
        }

    @staticmethod
    def from_manifest(obj: Manifest) -> Identity:
        spec = obj.get("spec") or {}
        return Identity(
            name=str(obj["metadata"]["name"]),
            role=str(spec.get("role", TENANT)),
            namespaces=tuple(spec.get("namespaces") or ()),
            priority_classes=tuple(spec.get("priorityClasses") or ()),
        )


def identity_manifest(identity: Identity, token: str) -> Manifest:
    return {
        "apiVersion": IDENTITY_API,
        "kind": IDENTITY_KIND,
        "metadata": {"name": identity.name},
        "spec": {
            "role": identity.role,
            "namespaces": list(identity.namespaces),
            "priorityClasses": list(identity.priority_classes),
            "tokenSha256": token_hash(token),
        },
    }


@dataclass
class Authenticator:
    """Maps a bearer token to its identity (identities cached, refreshed when a token is unknown)."""

    store: Store
    _by_hash: dict[str, Identity] = field(default_factory=dict)

    async def refresh(self) -> None:
        items, _ = await self.store.list(IDENTITY_KIND)
        self._by_hash = {
            str(obj["spec"]["tokenSha256"]): Identity.from_manifest(obj)
            for obj in items
            if (obj.get("spec") or {}).get("tokenSha256")
        }

    async def identify(self, token: str) -> Identity | None:
        digest = token_hash(token)
        if digest not in self._by_hash:
            await self.refresh()
        return self._by_hash.get(digest)


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
    templates = [spec.get("template") or {}, *[ps.get("template") or {} for ps in spec.get("podSets") or []]]
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
            f"ClusterQueues, Cohorts, LocalQueues and priority classes); tenants submit Jobs and Workloads"
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
