"""jobset.x-k8s.io/v1alpha2 JobSet: a group of Jobs that run and finish as one.

Kueue queues a JobSet as one Workload with one pod set per replicated job (see
`pykueue.reconcilers.integrations.jobset`). Only the fields that queueing and the
standalone executor read are modelled: the replicated jobs (name, replicas, Job
template), the success policy and the failure policy's restart budget; the rest
(network, coordinator, startupPolicy, ...) passes through untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from pykueue.api.batch import JobSpec
from pykueue.api.checks import Problems
from pykueue.api.meta import (
    KubeModel,
    NonNegInt32,
    ObjectMeta,
    PassthroughModel,
    dns_label_errors,
)

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"


class JobTemplateSpec(PassthroughModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec


class ReplicatedJob(PassthroughModel):
    name: str
    replicas: NonNegInt32 = 1
    template: JobTemplateSpec


class SuccessPolicy(PassthroughModel):
    operator: Literal["All", "Any"] = "All"
    target_replicated_jobs: list[str] = Field(default_factory=list)


class FailurePolicy(PassthroughModel):
    max_restarts: NonNegInt32 = 0


class JobSetSpec(PassthroughModel):
    replicated_jobs: list[ReplicatedJob] = Field(min_length=1)
    success_policy: SuccessPolicy | None = None
    failure_policy: FailurePolicy | None = None
    suspend: bool | None = None


class JobSet(KubeModel):
    api_version: Literal["jobset.x-k8s.io/v1alpha2"] = "jobset.x-k8s.io/v1alpha2"
    kind: Literal["JobSet"] = "JobSet"
    metadata: ObjectMeta
    spec: JobSetSpec
    # The JobSet's status belongs to its controller (the executor in standalone mode).
    status: dict[str, Any] = Field(default_factory=dict)


def problems(jobset: JobSet, check_job: Callable[[JobSpec, str, Problems], None], out: Problems) -> None:
    """What the JobSet's own webhook refuses: names, duplicates, policies naming unknown jobs.

    ``check_job(spec, path, out)`` applies the Job rules to each replicated job's template.
    """
    names: list[str] = []
    for i, replicated in enumerate(jobset.spec.replicated_jobs):
        path = f"spec.replicatedJobs[{i}]"
        for message in dns_label_errors(replicated.name):
            out.add(f"{path}.name", message)
        if replicated.name in names:
            out.add(f"{path}.name", f"duplicate replicated job name {replicated.name!r}")
        names.append(replicated.name)
        check_job(replicated.template.spec, f"{path}.template.spec", out)
    policy = jobset.spec.success_policy
    for i, target in enumerate(policy.target_replicated_jobs if policy is not None else []):
        if target not in names:
            out.add(
                f"spec.successPolicy.targetReplicatedJobs[{i}]",
                f"{target!r} is not a replicated job of this JobSet (its replicated jobs: {', '.join(names)})",
            )
