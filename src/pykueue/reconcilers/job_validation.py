"""The job webhook's rules that hold for every job kind, as upstream's jobframework checks them.

A new job needs a queue name that can name a LocalQueue and a positive
``max-exec-time-seconds``; a changed job keeps what its running Workload was made of
(its queue, its maximum execution time, its priority class); a
``prebuilt-workload-name`` must be a Workload's name, on a kind that takes one. The
Kubernetes webhooks and standalone's apply path both call these; each kind's own
rules are its integration's.
"""

from __future__ import annotations

from pykueue.api.meta import dns_subdomain_errors
from pykueue.errors import FieldProblem
from pykueue.reconcilers import tas_annotations
from pykueue.reconcilers.jobframework import (
    MAX_EXEC_TIME_LABEL,
    PREBUILT_WORKLOAD_KEY,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    Integration,
    JobAdapter,
    annotations_of,
    labels_of,
    prebuilt_workload_name,
    queue_name_of,
)
from pykueue.store.base import Manifest


def _label_path(key: str) -> str:
    return f"metadata.labels[{key}]"


def _annotation_path(key: str) -> str:
    return f"metadata.annotations[{key}]"


def _prebuilt_path(job: Manifest) -> str:
    if annotations_of(job).get(PREBUILT_WORKLOAD_KEY):
        return _annotation_path(PREBUILT_WORKLOAD_KEY)
    return _label_path(PREBUILT_WORKLOAD_KEY)


def validate_prebuilt_workload(
    integration: Integration, new: Manifest, old: Manifest | None = None
) -> list[FieldProblem]:
    """Upstream's rules for ``prebuilt-workload-name``: a Workload's name, on a kind that takes one,
    and unchanged while the job runs (held, it may change: the job is queued anew)."""
    name = prebuilt_workload_name(new)
    adapter = integration.adapter() if integration.adapter is not None else None
    if old is not None and adapter is not None and not adapter.is_suspended(new):
        if name != prebuilt_workload_name(old):
            return [_immutable(_prebuilt_path(new))]
        return []
    problems = [
        FieldProblem(path(PREBUILT_WORKLOAD_KEY), f"Invalid value: {value!r}: {error}")
        for value, path in (
            (annotations_of(new).get(PREBUILT_WORKLOAD_KEY), _annotation_path),
            (labels_of(new).get(PREBUILT_WORKLOAD_KEY), _label_path),
        )
        if value is not None
        for error in dns_subdomain_errors(str(value))
    ]
    if name and not integration.prebuilt_workload:
        gvk = f"{integration.api_version}, Kind={integration.kind}"
        why = " (pykueue queues pods by group and takes no pre-built Workload for them)"
        problems.append(
            FieldProblem(
                _prebuilt_path(new),
                f'Forbidden: Is not supported for "{gvk}"' + (why if integration.composable else ""),
            )
        )
    return problems


def _immutable(path: str, message: str = "field is immutable") -> FieldProblem:
    return FieldProblem(path, message)


def validate_on_create(job: Manifest) -> list[FieldProblem]:
    """Upstream's rules for a new job of any kind: a queue name that can name a LocalQueue,
    a positive ``kueue.x-k8s.io/max-exec-time-seconds``, and topology annotations on its pod
    templates that mean one thing (`tas_annotations.problems`)."""
    problems: list[FieldProblem] = []
    labels = labels_of(job)
    queue = labels.get(QUEUE_NAME_LABEL)
    if queue is not None:
        problems.extend(
            FieldProblem(_label_path(QUEUE_NAME_LABEL), f"Invalid value: {queue!r}: {error}")
            for error in dns_subdomain_errors(str(queue))
        )
    text = labels.get(MAX_EXEC_TIME_LABEL)
    if text is not None:
        try:
            value = int(text)
        except ValueError:
            problems.append(
                FieldProblem(_label_path(MAX_EXEC_TIME_LABEL), f"Invalid value: {text!r}: not a number")
            )
        else:
            if value <= 0:
                problems.append(
                    FieldProblem(
                        _label_path(MAX_EXEC_TIME_LABEL), f"Invalid value: {value}: should be greater than 0"
                    )
                )
    problems.extend(tas_annotations.problems(job))
    return problems


def validate_on_update(
    adapter: JobAdapter, old: Manifest, new: Manifest, default_queue_exists: bool = False
) -> list[FieldProblem]:
    """Upstream's rules for a changed job: what a running job's Workload was made of stays.

    * the queue name cannot change while the job runs (it can while it is held), and it
      cannot be removed in a namespace that has a ``default`` LocalQueue;
    * ``max-exec-time-seconds`` cannot change unless the job is held before and after;
    * a ``kueue.x-k8s.io/priority-class`` cannot be added to a running job, nor removed ever.
    """
    problems = validate_on_create(new)
    new_held, old_held = adapter.is_suspended(new), adapter.is_suspended(old)
    old_queue, new_queue = queue_name_of(old), queue_name_of(new)
    queue_path = _label_path(QUEUE_NAME_LABEL)
    if not new_held and new_queue != old_queue:
        problems.append(_immutable(queue_path))
    if not new_queue and old_queue and default_queue_exists:
        problems.append(
            FieldProblem(
                queue_path, 'Invalid value: "": queue-name must not be empty in namespace with default queue'
            )
        )
    old_labels, new_labels = labels_of(old), labels_of(new)
    if (not new_held or not old_held) and old_labels.get(MAX_EXEC_TIME_LABEL) != new_labels.get(
        MAX_EXEC_TIME_LABEL
    ):
        problems.append(_immutable(_label_path(MAX_EXEC_TIME_LABEL)))
    old_class, new_class = old_labels.get(PRIORITY_CLASS_LABEL, ""), new_labels.get(PRIORITY_CLASS_LABEL, "")
    class_path = _label_path(PRIORITY_CLASS_LABEL)
    if not new_held and not old_class and new_class:
        problems.append(
            FieldProblem(
                class_path,
                f"Invalid value: {new_class!r}: WorkloadPriorityClass cannot be added to a non-suspended workload",
            )
        )
    if old_class and not new_class:
        problems.append(
            FieldProblem(
                class_path, 'Invalid value: "": WorkloadPriorityClass cannot be removed from a workload'
            )
        )
    return problems
