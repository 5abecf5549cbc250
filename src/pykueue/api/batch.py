"""batch/v1 Job, the first job kind Kueue integrates.

Kueue suspends a Job (``spec.suspend``), builds a one-pod-set Workload from its
template with ``count = parallelism`` (and ``minCount`` from the
``kueue.x-k8s.io/job-min-parallelism`` annotation), and unsuspends it once admitted.
Only the fields that integration reads are modelled; the others pass through.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pykueue.api.core import PodTemplateSpec
from pykueue.api.meta import Int32, Int64, KubeModel, LabelSelector, ObjectMeta, PassthroughModel

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"


class JobSpec(PassthroughModel):
    parallelism: Int32 | None = 1
    completions: Int32 | None = None
    active_deadline_seconds: Int64 | None = None
    backoff_limit: Int32 | None = None
    suspend: bool | None = None
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    completion_mode: Literal["NonIndexed", "Indexed"] | None = None
    ttl_seconds_after_finished: Int32 | None = None
    template: PodTemplateSpec


class Job(KubeModel):
    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    metadata: ObjectMeta
    spec: JobSpec
    # The Job's status belongs to the job controller; it is carried, not interpreted.
    status: dict[str, Any] = Field(default_factory=dict)

    @property
    def queue_name(self) -> str:
        return self.metadata.labels.get(QUEUE_NAME_LABEL, "")
