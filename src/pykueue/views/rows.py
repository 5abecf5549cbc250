"""What ``get`` and ``describe`` show: rows built from the store and the live engine.

Queues' usage and pending counts come from the engine the server runs
(`engine.status`, upstream's status shape), so they are exact at the moment
of the request; workloads and jobs come from the store, which is what
survives a restart.
"""

from __future__ import annotations

from typing import Any, Protocol

from pykueue.api.access import RUN_AS_USER_ANNOTATION, SUBMITTED_BY_ANNOTATION
from pykueue.reconcilers import integrations, job_reconciler, jobframework
from pykueue.reconcilers.estimating import StartEstimates
from pykueue.store.base import Manifest
from pykueue.views import why


class Explained(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


class QueueReader(Protocol):
    """What the rows read from the running admission controller (standalone mode's
    `StandaloneAdmission`): queue status from the live engine, and why a workload waits."""

    def cluster_queue_status(self, name: str) -> dict[str, Any] | None: ...

    def local_queue_status(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def explain(self, stored: Manifest) -> Explained: ...


_REGISTRY = integrations.registry(integrations.STANDALONE_FRAMEWORKS)


def _cond(obj: Manifest, kind: str) -> dict[str, Any] | None:
    return job_reconciler.condition(obj, kind)


def workload_state(obj: Manifest) -> str:
    finished = _cond(obj, "Finished")
    if finished is not None and finished.get("status") == "True":
        return "Failed" if finished.get("reason") == "Failed" else "Finished"
    if not (obj.get("spec") or {}).get("active", True):
        return "Inactive"
    if job_reconciler.is_admitted(obj):
        return "Admitted"
    if (obj.get("status") or {}).get("admission"):
        return "QuotaReserved"  # an admission check is not Ready yet: the job does not run
    return "Pending"


def workload_row(obj: Manifest, estimates: StartEstimates | None = None) -> dict[str, Any]:
    """One workload; ``estimatedStart`` is the latest estimate while it is pending (else None)."""
    meta = obj["metadata"]
    status = obj.get("status") or {}
    reserved = _cond(obj, "QuotaReserved") or {}
    state = workload_state(obj)
    owner = _REGISTRY.owner_of(obj)
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "queue": (obj.get("spec") or {}).get("queueName", ""),
        "state": state,
        "clusterQueue": (status.get("admission") or {}).get("clusterQueue", ""),
        "job": str(owner[1].get("name", "")) if owner is not None else "",
        "reason": _why(obj, state, reserved),
        "created": meta.get("creationTimestamp", ""),
        "estimatedStart": _estimate(estimates, obj) if state == "Pending" else None,
        # The MultiKueue worker running it (a manager's workload elected on a worker).
        "worker": status.get("clusterName", ""),
    }


def _why(obj: Manifest, state: str, reserved: Manifest) -> str:
    """What `get workloads` says in WHY: why it waits, or why its job failed."""
    if state == "Pending":
        return str(reserved.get("message", ""))
    if state == "QuotaReserved":
        return "; ".join(why.checks_waited_for(obj))
    if state == "Failed":
        return str((_cond(obj, "Finished") or {}).get("message", ""))
    return ""


def _estimate(estimates: StartEstimates | None, obj: Manifest) -> dict[str, str | None] | None:
    if estimates is None:
        return None
    meta = obj["metadata"]
    return estimates.estimated_start(f"{meta.get('namespace') or 'default'}/{meta['name']}")


def _pod_counts(job: Manifest) -> Manifest:
    """A Job's pod counts are its status's own; a JobSet's (which counts Jobs) are pykueue's."""
    status: Manifest = job.get("status") or {}
    if job.get("kind") == "JobSet":
        extra: Manifest = status.get("pykueue") or {}
        return extra
    return status


def job_state(job: Manifest) -> str:
    for kind, name in (("Complete", "Succeeded"), ("Completed", "Succeeded"), ("Failed", "Failed")):
        cond = _cond(job, kind)
        if cond is not None and cond.get("status") == "True":
            return name
    active = _pod_counts(job).get("active")
    if (job.get("spec") or {}).get("suspend"):
        return "Stopping" if active else "Queued"
    return "Running" if active else "Starting"


def job_row(job: Manifest) -> dict[str, Any]:
    meta = job["metadata"]
    annotations = meta.get("annotations") or {}
    status = job.get("status") or {}
    extra = status.get("pykueue") or {}
    counts = _pod_counts(job)
    return {
        "kind": job.get("kind", "Job"),
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "queue": (meta.get("labels") or {}).get(jobframework.QUEUE_NAME_LABEL, ""),
        "state": job_state(job),
        "active": counts.get("active", 0),
        "succeeded": counts.get("succeeded", 0),
        "failed": counts.get("failed", 0),
        "restarts": status.get("restarts", 0),
        "preemptions": extra.get("preemptions", 0),
        "interruptions": extra.get("interruptions", 0),
        "waiting": extra.get("waiting", ""),
        # A crashing command shows its exit code while it is retried, not only once it failed.
        "lastFailure": extra.get("lastFailure", ""),
        "owner": annotations.get(RUN_AS_USER_ANNOTATION, ""),
        "submittedBy": annotations.get(SUBMITTED_BY_ANNOTATION, ""),
        "usage": extra.get("usage") or {},
        "failure": _failure(job),
    }


def _failure(job: Manifest) -> str:
    """Why a failed job failed, ``reason: message`` of its Failed condition (else empty)."""
    cond = _cond(job, "Failed")
    if cond is None or cond.get("status") != "True":
        return ""
    return f"{cond.get('reason', '')}: {cond.get('message', '')}"


def cluster_queue_row(admission: QueueReader, obj: Manifest) -> dict[str, Any]:
    name = obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    status = admission.cluster_queue_status(name) or {}
    nominal: dict[tuple[str, str], str] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                nominal[(flavor["name"], res["name"])] = str(res.get("nominalQuota", "0"))
    usage = []
    for flavor in status.get("flavorsReservation") or []:
        for res in flavor.get("resources") or []:
            usage.append(
                {
                    "flavor": flavor["name"],
                    "resource": res["name"],
                    "used": res["total"],
                    "borrowed": res["borrowed"],
                    "nominal": nominal.get((flavor["name"], res["name"]), "0"),
                }
            )
    active: dict[str, Any] = next((c for c in status.get("conditions", []) if c.get("type") == "Active"), {})
    return {
        "name": name,
        "cohort": spec.get("cohortName", "") or spec.get("cohort", ""),
        "stopPolicy": spec.get("stopPolicy", "None"),
        "active": active.get("status", "Unknown") == "True",
        "activeMessage": active.get("message", ""),
        "pending": status.get("pendingWorkloads", 0),
        "admitted": status.get("reservingWorkloads", 0),
        "usage": usage,
    }


def local_queue_row(admission: QueueReader, obj: Manifest) -> dict[str, Any]:
    meta = obj["metadata"]
    status = admission.local_queue_status(meta.get("namespace", "default"), meta["name"]) or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "clusterQueue": (obj.get("spec") or {}).get("clusterQueue", ""),
        "stopPolicy": (obj.get("spec") or {}).get("stopPolicy", "None"),
        "pending": status.get("pendingWorkloads", 0),
        "admitted": status.get("reservingWorkloads", 0),
    }


def describe_workload(
    admission: QueueReader,
    workload: Manifest,
    job: Manifest | None,
    estimates: StartEstimates | None = None,
) -> dict[str, Any]:
    explanation = admission.explain(workload)
    row = workload_row(workload, estimates)
    return {
        "workload": row,
        "estimatedStart": row["estimatedStart"],
        "explanation": explanation.as_dict(),
        "conditions": (workload.get("status") or {}).get("conditions", []),
        "admission": (workload.get("status") or {}).get("admission"),
        # Quota reserved but a check not Ready yet (a MultiKueue job waiting for a worker) is
        # "Admitted" to the engine; the checks say what it still waits for.
        "admissionChecks": (workload.get("status") or {}).get("admissionChecks", []),
        "job": job_row(job) if job is not None else None,
        "pods": ((job or {}).get("status") or {}).get("pykueue", {}).get("pods", []),
        "warnings": ((job or {}).get("status") or {}).get("pykueue", {}).get("warnings", []),
    }
