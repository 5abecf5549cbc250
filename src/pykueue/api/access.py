"""The Identity kind (``pykueue.io/v1``) and what each role may read and write.

Standalone mode's server authenticates callers (`pykueue.standalone.http.auth`); the
views (the dashboard, in both modes) filter what they show by the same rules, so
the rules live here, beside the kind, where both can reach them.

    admin    everything: ResourceFlavors, ClusterQueues, Cohorts, LocalQueues,
             priority classes, any namespace's jobs, identities
    tenant   Jobs, JobSets and Workloads in its ``namespaces`` only, with no
             priority class but those in ``priorityClasses``; reads the queues,
             and the workloads and jobs of its namespaces
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]

IDENTITY_KIND = "Identity"
IDENTITY_API = "pykueue.io/v1"
ADMIN = "admin"
TENANT = "tenant"
TENANT_KINDS = frozenset({"Job", "JobSet", "Workload"})
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Stamped by standalone mode's server on what it accepts: who submitted it, and the local
# account its processes run as (shown by the views of both modes).
SUBMITTED_BY_ANNOTATION = "pykueue.io/submitted-by"
RUN_AS_USER_ANNOTATION = "pykueue.io/run-as-user"
RUN_AS_UID_ANNOTATION = "pykueue.io/run-as-uid"


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


def author(identity: Identity) -> str:
    """Who a change is recorded as made by: the identity, and the Unix uid the kernel vouched for."""
    return identity.name if identity.uid is None else f"{identity.name} (uid {identity.uid})"


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
