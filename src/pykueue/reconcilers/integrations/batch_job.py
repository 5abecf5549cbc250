"""The batch/v1 Job adapter.

A Job is one pod set named ``main`` whose count is its parallelism (or its
completions, when fewer). With the ``kueue.x-k8s.io/job-min-parallelism``
annotation the Workload gets a ``minCount`` and may be admitted partially; the
Job then runs with ``parallelism`` lowered to the admitted count (and
``completions`` too when ``kueue.x-k8s.io/job-completions-equal-parallelism`` is
"true"), and gets its full parallelism back when it is stopped.

A Job's pod template may change only while it is suspended and has not started
(``status.startTime`` unset), which is why admission writes the flavors' node
selector in the same update that unsuspends it, and why stopping clears
``startTime`` before restoring the template (see the job reconciler).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from pykueue.errors import FieldProblem
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

MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
POD_SET = "main"
# The label an Indexed Job puts on each pod: its completion index (a topology request names it).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _spec(job: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = job.setdefault("spec", {})
    return spec


def _annotations(job: Manifest) -> dict[str, str]:
    return dict((job.get("metadata") or {}).get("annotations") or {})


def _min_count(job: Manifest) -> int | None:
    text = _annotations(job).get(MIN_PARALLELISM_ANNOTATION)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value > 0 else None


def _sync_completions(job: Manifest) -> bool:
    return _annotations(job).get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION) == "true"


class BatchJobAdapter:
    """batch/v1 Job through `pykueue.reconcilers.jobframework.JobAdapter`."""

    kind = "Job"
    api_version = "batch/v1"

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def _count(self, job: Manifest) -> int:
        spec = _spec(job)
        parallelism = spec.get("parallelism")
        count = 1 if parallelism is None else int(parallelism)
        completions = spec.get("completions")
        if completions is not None and int(completions) < count:
            count = int(completions)
        return count

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        count = self._count(job)
        pod_set: Manifest = {
            "name": POD_SET,
            "count": count,
            "template": copy.deepcopy(_spec(job).get("template") or {}),
        }
        min_count = _min_count(job)
        if min_count is not None and min_count < count:
            pod_set["minCount"] = min_count
        return [pod_set]

    def topology_indexes(self, job: Manifest, name: str) -> dict[str, object]:
        """How a Job numbers its pods, for a topology request (upstream's Job pod set)."""
        return {"podIndexLabel": COMPLETION_INDEX}

    def is_suspended(self, job: Manifest) -> bool:
        return bool(_spec(job).get("suspend"))

    def suspend(self, job: Manifest) -> None:
        _spec(job)["suspend"] = True

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        spec = _spec(job)
        spec["suspend"] = False
        if not infos:
            return
        info = infos[0]
        if _min_count(job) is not None:
            spec["parallelism"] = info.count
            if _sync_completions(job):
                spec["completions"] = info.count
        merge_into_template(spec.setdefault("template", {}), info)

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        if not infos:
            return False
        spec = _spec(job)
        info = infos[0]
        changed = False
        if _min_count(job) is not None and spec.get("parallelism") != info.count:
            spec["parallelism"] = info.count
            if _sync_completions(job):
                spec["completions"] = info.count
            changed = True
        template = spec.setdefault("template", {})
        # The labels the API server wrote from the Job's uid stay whatever the Workload says:
        # upstream's Workloads leave them out of the pod set (all but job-name), and a template
        # without controller-uid no longer matches the Job's selector (the update is refused).
        current = (template.get("metadata") or {}).get("labels") or {}
        generated = {key: current[key] for key in _GENERATED_TEMPLATE_LABELS if key in current}
        if generated:
            info = dataclasses.replace(info, labels={**info.labels, **generated})
        return restore_template(template, info) or changed

    def finished(self, job: Manifest) -> Finished | None:
        for cond in (job.get("status") or {}).get("conditions") or []:
            if cond.get("status") != "True":
                continue
            if cond.get("type") == "Complete":
                return Finished(True, str(cond.get("message") or "Job finished successfully"))
            if cond.get("type") == "Failed":
                return Finished(False, str(cond.get("message") or cond.get("reason") or "Job failed"))
        return None

    def is_active(self, job: Manifest) -> bool:
        status = job.get("status") or {}
        return int(status.get("active") or 0) > 0 or int(status.get("terminating") or 0) > 0

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        # Once fewer completions remain than pods run at once, the surplus pods never come
        # back: their quota can go to other workloads (upstream's ReclaimablePods).
        spec, status = _spec(job), job.get("status") or {}
        parallelism = 1 if spec.get("parallelism") is None else int(spec["parallelism"])
        succeeded = int(status.get("succeeded") or 0)
        if parallelism <= 1 or succeeded == 0:
            return []
        completions = parallelism if spec.get("completions") is None else int(spec["completions"])
        remaining = completions - succeeded
        if remaining >= parallelism:
            return []
        return [{"name": POD_SET, "count": parallelism - max(remaining, 0)}]

    def pods_ready(self, job: Manifest) -> bool:
        status = job.get("status") or {}
        ready = int(status.get("ready") or 0) + int(status.get("succeeded") or 0)
        return ready >= int(_spec(job).get("parallelism") or 1)


def validate(job: Manifest, old: Manifest | None) -> list[FieldProblem]:
    """The Job webhook's own rules (upstream's job_webhook.go), on create and update.

    ``job-min-parallelism`` is a number of pods between 1 and the Job's pod count - 1
    (checked on create, and on update when it changed); ``job-completions-equal-parallelism:
    "true"`` needs an Indexed Job whose completions equal its parallelism.
    """
    problems: list[FieldProblem] = []
    annotations = _annotations(job)
    min_path = f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]"
    text = annotations.get(MIN_PARALLELISM_ANNOTATION)
    if text is not None and (old is None or _annotations(old).get(MIN_PARALLELISM_ANNOTATION) != text):
        count = BatchJobAdapter()._count(copy.deepcopy(job))
        try:
            value = int(text)
        except ValueError:
            problems.append(FieldProblem(min_path, f"Invalid value: {text!r}: not a number"))
        else:
            if not 0 < value < count:
                problems.append(
                    FieldProblem(min_path, f"Invalid value: {value}: should be between 0 and {count - 1}")
                )
    sync_path = f"metadata.annotations[{COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION}]"
    sync = annotations.get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
    if sync is not None:
        if sync.lower() not in ("true", "false", "1", "0", "t", "f"):
            problems.append(FieldProblem(sync_path, f"Invalid value: {sync!r}: not a boolean"))
        elif sync.lower() in ("true", "1", "t"):
            spec = job.get("spec") or {}
            if spec.get("completionMode") != "Indexed":
                problems.append(
                    FieldProblem(
                        sync_path, f"Invalid value: {sync!r}: should not be enabled for NonIndexed jobs"
                    )
                )
            if int(spec.get("parallelism") or 1) != int(spec.get("completions") or 1):
                problems.append(
                    FieldProblem(
                        "spec.completions",
                        f"Invalid value: {spec.get('completions')}: should be equal to parallelism when "
                        f"{COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION} annotation is true",
                    )
                )
    return problems


# Labels and fields a Job's API server writes from the Job's own uid: a copy elsewhere gets its own.
_GENERATED_TEMPLATE_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)


def _strip_generated(remote: Manifest) -> None:
    """Without the selector and template labels the manager's API server made from its own uid
    (unless the user chose the selector): the worker's makes them again from the copy's."""
    spec = _spec(remote)
    if spec.get("manualSelector"):
        return
    spec.pop("selector", None)
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    for key in _GENERATED_TEMPLATE_LABELS:
        labels.pop(key, None)


# The Job's own controller, in spec.managedBy (Kubernetes 1.32+).
JOB_CONTROLLER = "kubernetes.io/job-controller"


def multikueue_adapter() -> SpecMultiKueue:
    """batch/v1 Job through `pykueue.reconcilers.jobframework.MultiKueueAdapter`."""
    return SpecMultiKueue(("spec", "managedBy"), ("spec", "suspend"), JOB_CONTROLLER, _strip_generated)


INTEGRATION = Integration(
    name="batch/job",
    kind="Job",
    group="batch",
    version="v1",
    plural="jobs",
    adapter=BatchJobAdapter,
    validate=validate,
    multikueue=multikueue_adapter,
    prebuilt_workload=True,
)
