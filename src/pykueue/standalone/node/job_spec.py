"""What a Job or a JobSet asks of the local node, read from its manifest.

The executor runs both kinds the same way; this module hides where they keep what
it needs: each pod's slot (its index, name, template and pod set), a Job's
``parallelism`` and ``completions`` with Kubernetes' defaults, whether the job runs
as one gang, whether this node runs it at all (``spec.managedBy``), and whether it
is suspended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pykueue.standalone.node import local_jobset
from pykueue.store.base import Manifest

GANG_ANNOTATION = "pykueue.io/gang"
# The value of ``spec.managedBy`` that means "the ordinary Job controller" (and its default).
JOB_CONTROLLER = "kubernetes.io/job-controller"


def int_or(value: Any, default: int) -> int:
    return int(value) if value is not None else default


def job_counts(spec: Manifest) -> tuple[int, int]:
    """(parallelism, completions) of a Job spec, with Kubernetes' defaults."""
    parallelism = int_or(spec.get("parallelism"), 1)
    return parallelism, int_or(spec.get("completions"), parallelism)


@dataclass(frozen=True, slots=True)
class PodSlot:
    """What one pod of a Job or JobSet runs, and where it sits."""

    index: int  # the executor's number for it: a Job's completion index, a JobSet's rank
    name: str  # shown by describe and the logs: <job>-<index>, <jobset>-<replicated job>-<job>-<pod>
    template: Manifest  # its pod template
    pod_set: str | None  # its pod set in the Workload (None: the first one)
    jobset_pod: local_jobset.JobSetPod | None = None

    @property
    def container(self) -> Manifest:
        containers = (self.template.get("spec") or {}).get("containers") or [{}]
        first: Manifest = containers[0]
        return first

    @property
    def fields(self) -> dict[str, str]:
        """What ``valueFrom.fieldRef`` reads for this pod: its name, its index labels."""
        if self.jobset_pod is not None:
            return local_jobset.field_values(self.jobset_pod)
        index = str(self.index)
        key = "batch.kubernetes.io/job-completion-index"
        return {
            "metadata.name": self.name,
            f"metadata.labels['{key}']": index,
            f"metadata.annotations['{key}']": index,
        }


def pod_slot(job: Manifest, index: int) -> PodSlot:
    """Pod ``index`` of a Job or a JobSet."""
    name = str((job.get("metadata") or {}).get("name", ""))
    if job.get("kind") == local_jobset.KIND:
        pod = local_jobset.pods(job)[index]
        return PodSlot(index, pod.name, pod.template, pod.replicated_job, pod)
    template = (job.get("spec") or {}).get("template") or {}
    return PodSlot(index, f"{name}-{index}", template, None)


def gang_size(job: Manifest) -> int:
    """The ranks of a gang: a Job's completions, every pod of a JobSet."""
    if job.get("kind") == local_jobset.KIND:
        return len(local_jobset.pods(job))
    return job_counts(job.get("spec") or {})[1]


def is_gang(job: Manifest) -> bool:
    """A distributed job: N > 1 pods that all run at once until each completes (parallelism = completions).

    A JobSet always is one: its replicated jobs start together, as JobSet's own
    controller creates all its Jobs at once.
    """
    if job.get("kind") == local_jobset.KIND:
        return True
    if ((job.get("metadata") or {}).get("annotations") or {}).get(GANG_ANNOTATION) == "false":
        return False
    parallelism, completions = job_counts(job.get("spec") or {})
    return parallelism > 1 and completions == parallelism


def ours(job: Manifest) -> bool:
    """Whether this node runs the Job: as Kubernetes' Job controller, not when ``spec.managedBy``
    hands it to another controller (MultiKueue runs it on a worker and mirrors its status)."""
    managed_by = (job.get("spec") or {}).get("managedBy")
    return not managed_by or managed_by == JOB_CONTROLLER


def suspended(job: Manifest) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def templates(job: Manifest) -> list[Manifest]:
    """The pod templates of a Job (one) or a JobSet (one per replicated job)."""
    if job.get("kind") == local_jobset.KIND:
        return [
            ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            for rj in local_jobset.replicated_jobs(job)
        ]
    return [(job.get("spec") or {}).get("template") or {}]
