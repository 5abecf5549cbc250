"""A JobSet on one machine: its pods as ranks of one gang, its policies, its status.

The executor plays the JobSet controller, the Job controller and kubelet at once.
Instead of making child Jobs it numbers every pod of every replicated job::

    rank  replicated job  job index  pod index   pod name
    0     driver          0          0           <jobset>-driver-0-0
    1     workers         0          0           <jobset>-workers-0-0
    2     workers         0          1           <jobset>-workers-0-1
    3     workers         1          0           <jobset>-workers-1-0
    ...

(replicated jobs in declaration order, then job index, then pod index). A
replicated job's Job runs `jobset.pods_per_replica` pods, the count the Workload's
pod set was sized with, so what runs is exactly what was admitted. All ranks
start together and each runs once to completion; a child Job has succeeded
when all its pods have.

* success: ``successPolicy.operator`` All (the default) needs every Job of the
  target replicated jobs (default: all of them) to succeed, Any needs one; the
  JobSet is then Completed and any pod still running is stopped.
* failure: any pod exiting non-zero fails its Job, and a failed Job restarts
  the whole JobSet (every pod, finished ones too) until ``failurePolicy.
  maxRestarts`` restarts are used; the next failure fails the JobSet
  (``ReachedMaxRestarts``). The child Jobs' ``backoffLimit`` is not used: a
  rank retried alone could not rejoin its gang.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from pykueue.reconcilers.integrations.jobset import pods_per_replica
from pykueue.store.base import Manifest

KIND = "JobSet"
COMPLETED = "Completed"
FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class JobSetPod:
    """One pod of a JobSet: where it sits, what it runs."""

    jobset: str
    restarts: int  # the JobSet's restarts so far: this pod's restart attempt
    rank: int
    replicated_job: str
    replicas: int
    job_index: int
    job_global_index: int
    pod_index: int
    name: str
    template: Manifest

    @property
    def job(self) -> tuple[str, int]:
        """The child Job it belongs to: (replicated job, job index)."""
        return self.replicated_job, self.job_index


def _spec(jobset: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = jobset.get("spec") or {}
    return spec


def replicated_jobs(jobset: Manifest) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = _spec(jobset).get("replicatedJobs") or []
    return jobs


def _replicas(replicated: Manifest) -> int:
    value = replicated.get("replicas")
    return 1 if value is None else int(value)


def pods(jobset: Manifest) -> list[JobSetPod]:
    """Every pod of the JobSet, in rank order."""
    name = str((jobset.get("metadata") or {}).get("name", ""))
    restarts = int((jobset.get("status") or {}).get("restarts") or 0)
    out: list[JobSetPod] = []
    global_job = 0
    for replicated in replicated_jobs(jobset):
        rj_name = str(replicated.get("name", ""))
        replicas = _replicas(replicated)
        template = ((replicated.get("template") or {}).get("spec") or {}).get("template") or {}
        for job_index in range(replicas):
            for pod_index in range(pods_per_replica(replicated)):
                out.append(
                    JobSetPod(
                        jobset=name,
                        restarts=restarts,
                        rank=len(out),
                        replicated_job=rj_name,
                        replicas=replicas,
                        job_index=job_index,
                        job_global_index=global_job,
                        pod_index=pod_index,
                        name=f"{name}-{rj_name}-{job_index}-{pod_index}",
                        template=template,
                    )
                )
            global_job += 1
    return out


def environment(pod: JobSetPod) -> dict[str, str]:
    """JobSet's own variables (its pod labels as values); the trainer's are the executor's gang's."""
    return {
        "JOB_COMPLETION_INDEX": str(pod.pod_index),
        "JOBSET_NAME": pod.jobset,
        "REPLICATED_JOB_NAME": pod.replicated_job,
        "REPLICATED_JOB_REPLICAS": str(pod.replicas),
        "JOB_INDEX": str(pod.job_index),
        "JOB_GLOBAL_INDEX": str(pod.job_global_index),
        "JOBSET_RESTART_ATTEMPT": str(pod.restarts),
    }


def field_values(pod: JobSetPod) -> dict[str, str]:
    """What a ``valueFrom.fieldRef`` on the pod's labels or annotations would read in Kubernetes."""
    values = {
        "jobset.sigs.k8s.io/jobset-name": pod.jobset,
        "jobset.sigs.k8s.io/replicatedjob-name": pod.replicated_job,
        "jobset.sigs.k8s.io/replicatedjob-replicas": str(pod.replicas),
        "jobset.sigs.k8s.io/job-index": str(pod.job_index),
        "jobset.sigs.k8s.io/job-global-index": str(pod.job_global_index),
        "jobset.sigs.k8s.io/restart-attempt": str(pod.restarts),
        "batch.kubernetes.io/job-completion-index": str(pod.pod_index),
    }
    out = {}
    for key, value in values.items():
        out[f"metadata.labels['{key}']"] = value
        out[f"metadata.annotations['{key}']"] = value
    out["metadata.name"] = pod.name
    return out


def succeeded_jobs(jobset: Manifest, completed: Collection[int]) -> set[tuple[str, int]]:
    """The child Jobs all of whose pods exited 0."""
    by_job: dict[tuple[str, int], list[int]] = {}
    for pod in pods(jobset):
        by_job.setdefault(pod.job, []).append(pod.rank)
    return {job for job, ranks in by_job.items() if all(r in completed for r in ranks)}


def success(jobset: Manifest, completed: Collection[int]) -> str | None:
    """The message of a met success policy, or None while it is not met."""
    policy = _spec(jobset).get("successPolicy") or {}
    operator = str(policy.get("operator") or "All")
    names = [str(r.get("name", "")) for r in replicated_jobs(jobset)]
    targets = [str(t) for t in policy.get("targetReplicatedJobs") or []] or names
    done = succeeded_jobs(jobset, completed)
    wanted = [
        (r, i) for r in replicated_jobs(jobset) if str(r.get("name")) in targets for i in range(_replicas(r))
    ]
    jobs = [(str(r.get("name")), i) for r, i in wanted]
    if operator == "Any":
        hit = next((job for job in jobs if job in done), None)
        return (
            None
            if hit is None
            else f"job {hit[0]}-{hit[1]} succeeded (successPolicy Any of {', '.join(targets)})"
        )
    if jobs and all(job in done for job in jobs):
        return f"all jobs of {', '.join(targets)} succeeded"
    return None


def max_restarts(jobset: Manifest) -> int:
    return int((_spec(jobset).get("failurePolicy") or {}).get("maxRestarts") or 0)


def replicated_jobs_status(
    jobset: Manifest, completed: Collection[int], running: Iterable[tuple[int, bool]], suspended: bool
) -> list[dict[str, Any]]:
    """``status.replicatedJobsStatus``, counted in Jobs as the JobSet controller counts them.

    ``running`` is (rank, ready) of every live pod.
    """
    live = dict(running)
    done = succeeded_jobs(jobset, completed)
    members: dict[tuple[str, int], list[int]] = {}
    for pod in pods(jobset):
        members.setdefault(pod.job, []).append(pod.rank)
    out = []
    for replicated in replicated_jobs(jobset):
        name = str(replicated.get("name", ""))
        jobs = [(job, ranks) for job, ranks in members.items() if job[0] == name]
        active = [ranks for job, ranks in jobs if job not in done and any(r in live for r in ranks)]
        out.append(
            {
                "name": name,
                "ready": sum(1 for ranks in active if all(live.get(r, r in completed) for r in ranks)),
                "succeeded": sum(1 for job, _ in jobs if job in done),
                "failed": 0,
                "active": len(active),
                "suspended": _replicas(replicated) if suspended else 0,
            }
        )
    return out
