"""The JobSet adapter (``jobset.x-k8s.io/v1alpha2``).

    JobSet ── replicatedJobs[i] ──▶ pod set named after it, count = replicas x pods per Job
       │                            (pods per Job: parallelism, or completions when fewer)
       └ spec.suspend ──▶ the JobSet controller suspends / resumes every child Job

A JobSet is held with ``spec.suspend``, like a Job. The JobSet controller creates
its Jobs suspended while the JobSet is, and when the JobSet is resumed it copies
the admitted templates' node selector, tolerations, labels and annotations into
the Jobs before it resumes them; stopping suspends them again (their pods go).
A JobSet's pod templates may be changed while it is suspended, so admission
writes the flavors' directives in the same update that resumes it.

The Jobs a JobSet owns are never queued on their own (the framework skips jobs
whose controller is a managed kind). No partial admission: every replicated job
runs with all its pods, as upstream.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.reconcilers.jobframework import (
    Finished,
    Integration,
    PodSetInfo,
    SpecMultiKueue,
    merge_into_template,
    queue_name_of,
    restore_template,
)
from pykueue.store.base import Manifest

# How pods are numbered: the completion index within a Job, the Job index within its replicated job.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"


def _replicated_jobs(jobset: Manifest) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = (jobset.get("spec") or {}).get("replicatedJobs") or []
    return jobs


def _job_spec(replicated: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = (replicated.get("template") or {}).get("spec") or {}
    return spec


def _replicas(replicated: Manifest) -> int:
    replicas = replicated.get("replicas")
    return 1 if replicas is None else int(replicas)


def pods_per_replica(replicated: Manifest) -> int:
    """The pods one Job of a replicated job runs at once."""
    spec = _job_spec(replicated)
    parallelism = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
    completions = spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def _pod_template(replicated: Manifest) -> dict[str, Any]:
    spec = replicated.setdefault("template", {}).setdefault("spec", {})
    template: dict[str, Any] = spec.setdefault("template", {})
    return template


class JobSetAdapter:
    """jobset.x-k8s.io JobSet through `pykueue.reconcilers.jobframework.JobAdapter`."""

    kind = "JobSet"
    api_version = "jobset.x-k8s.io/v1alpha2"

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        return [
            {
                "name": str(replicated["name"]),
                "count": _replicas(replicated) * pods_per_replica(replicated),
                "template": copy.deepcopy(_job_spec(replicated).get("template") or {}),
            }
            for replicated in _replicated_jobs(job)
        ]

    def topology_indexes(self, job: Manifest, name: str) -> dict[str, object]:
        """How a JobSet numbers its pods: the completion index within each Job, and the Job's
        index among its replicated job's replicas (upstream's JobSet pod sets)."""
        for replicated in _replicated_jobs(job):
            if str(replicated.get("name")) == name:
                return {
                    "podIndexLabel": COMPLETION_INDEX,
                    "subGroupIndexLabel": JOB_INDEX,
                    "subGroupCount": _replicas(replicated),
                }
        return {}

    def is_suspended(self, job: Manifest) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        job.setdefault("spec", {})["suspend"] = True

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        job.setdefault("spec", {})["suspend"] = False
        by_name = {info.name: info for info in infos}
        for replicated in _replicated_jobs(job):
            info = by_name.get(str(replicated.get("name")))
            if info is not None:
                merge_into_template(_pod_template(replicated), info)

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        by_name = {info.name: info for info in infos}
        changed = False
        for replicated in _replicated_jobs(job):
            info = by_name.get(str(replicated.get("name")))
            if info is not None:
                changed = restore_template(_pod_template(replicated), info) or changed
        return changed

    def finished(self, job: Manifest) -> Finished | None:
        for cond in (job.get("status") or {}).get("conditions") or []:
            if cond.get("status") != "True":
                continue
            if cond.get("type") == "Completed":
                return Finished(True, str(cond.get("message") or "JobSet finished successfully"))
            if cond.get("type") == "Failed":
                return Finished(False, str(cond.get("message") or cond.get("reason") or "JobSet failed"))
        return None

    def _statuses(self, job: Manifest) -> list[Manifest]:
        statuses: list[Manifest] = (job.get("status") or {}).get("replicatedJobsStatus") or []
        return statuses

    def is_active(self, job: Manifest) -> bool:
        return any(int(s.get("active") or 0) > 0 for s in self._statuses(job))

    def pods_ready(self, job: Manifest) -> bool:
        # Counted in Jobs, as the JobSet controller reports them: every Job ready or done.
        wanted = sum(_replicas(r) for r in _replicated_jobs(job))
        ready = sum(int(s.get("ready") or 0) + int(s.get("succeeded") or 0) for s in self._statuses(job))
        return ready >= wanted

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        # A replicated job's succeeded Jobs never run again: their pods' quota can go.
        statuses = {str(s.get("name")): s for s in self._statuses(job)}
        reclaimable = []
        for replicated in _replicated_jobs(job):
            succeeded = int((statuses.get(str(replicated.get("name"))) or {}).get("succeeded") or 0)
            if 0 < succeeded <= _replicas(replicated):
                reclaimable.append(
                    {"name": str(replicated["name"]), "count": succeeded * pods_per_replica(replicated)}
                )
        return reclaimable


# The JobSet controller's name, in spec.managedBy.
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"


def multikueue_adapter() -> SpecMultiKueue:
    """JobSet through `pykueue.reconcilers.jobframework.MultiKueueAdapter`: like a Job, a JobSet
    has ``spec.managedBy``, and the JobSet controller of the manager leaves it alone."""
    return SpecMultiKueue(("spec", "managedBy"), ("spec", "suspend"), JOBSET_CONTROLLER)


INTEGRATION = Integration(
    name="jobset.x-k8s.io/jobset",
    kind="JobSet",
    group="jobset.x-k8s.io",
    version="v1alpha2",
    plural="jobsets",
    adapter=JobSetAdapter,
    multikueue=multikueue_adapter,
    prebuilt_workload=True,
)
