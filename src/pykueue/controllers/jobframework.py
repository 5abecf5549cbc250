"""How a job kind plugs into Kueue: one small `JobAdapter` protocol and an explicit `Registry`.

The job reconciler (`pykueue.controllers.job_reconciler`) is generic: it builds a
Workload from whatever the adapter says the job's pod sets are, and when the
Workload is admitted or evicted it asks the adapter to run or stop the job. An
adapter only knows its own kind's manifest:

    queue_name        which LocalQueue the job names (its ``kueue.x-k8s.io/queue-name`` label)
    pod_sets          the Workload pod sets (name, count, minCount, template)
    is_suspended      whether the job is held back now
    suspend           hold it back (the reconciler writes the manifest)
    run_with_pod_sets let it start with each pod set's admitted count and its flavors'
                      nodeSelector, tolerations, labels and annotations merged in
    restore_pod_sets  put the template back as it was before the admission
    finished          done, and whether it succeeded, or None while it runs
    is_active         pods still exist (a stopped job has to wait for them to go)
    pods_ready        every pod the admission allows is running and ready
    reclaimable_pods  pods of a running job that finished and need their quota no more

Adapters change the manifest dict they are given, in place; the reconciler hands
them a copy and writes it. Registering is explicit (`default_registry()`), so
importing an adapter module never changes what the controller manages.

`PodSetInfo` carries what an admission changes in one pod set. The info that
*restores* a job comes from its Workload's pod sets, which keep the template as
it was when the Workload was created; that is how upstream's jobframework does it,
so no annotation on the job is needed to remember the original.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pykueue.store.base import Manifest

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
MAX_NAME = 253


class PodSetMergeError(Exception):
    """An admission's node selector contradicts the job's own (same key, other value)."""


@dataclass(frozen=True, slots=True)
class PodSetInfo:
    """What an admission sets on one pod set (or, to restore it, what the template had)."""

    name: str
    count: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def from_assignment(assignment: Manifest, flavors: Mapping[str, Manifest], count: int) -> PodSetInfo:
        """The info of an admitted pod set: its flavors' node labels and tolerations, its count."""
        selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for flavor_name in dict.fromkeys((assignment.get("flavors") or {}).values()):
            spec = (flavors.get(flavor_name) or {}).get("spec") or {}
            selector.update(spec.get("nodeLabels") or {})
            tolerations.extend(t for t in spec.get("tolerations") or [] if t not in tolerations)
        if assignment.get("count") is not None:
            count = int(assignment["count"])
        return PodSetInfo(str(assignment.get("name", "main")), count, selector, tuple(tolerations))

    def with_update(self, update: Manifest, check: str = "") -> PodSetInfo:
        """This info plus an admission check's podSetUpdate (labels, annotations, nodeSelector,
        tolerations), as upstream merges them when a job starts: a key already set to another
        value is a conflict, not an override, since either side may be relied upon."""
        merged: dict[str, dict[str, str]] = {}
        for name, mine in (
            ("labels", self.labels),
            ("annotations", self.annotations),
            ("nodeSelector", self.node_selector),
        ):
            result = dict(mine)
            for key, value in (update.get(name) or {}).items():
                if result.get(key, value) != value:
                    where = f" in admission check {check!r}" if check else ""
                    raise PodSetMergeError(f"{name} {key}={result[key]} conflicts with {value}{where}")
                result[key] = str(value)
            merged[name] = result
        tolerations = list(self.tolerations)
        tolerations.extend(t for t in update.get("tolerations") or [] if t not in tolerations)
        return PodSetInfo(
            self.name,
            self.count,
            merged["nodeSelector"],
            tuple(tolerations),
            merged["labels"],
            merged["annotations"],
        )

    @staticmethod
    def from_pod_set(pod_set: Manifest) -> PodSetInfo:
        """The info that restores a template to a Workload pod set's (the original) one."""
        template = pod_set.get("template") or {}
        meta, spec = template.get("metadata") or {}, template.get("spec") or {}
        return PodSetInfo(
            name=str(pod_set.get("name", "main")),
            count=int(pod_set.get("count", 1)),
            node_selector=dict(spec.get("nodeSelector") or {}),
            tolerations=tuple(spec.get("tolerations") or ()),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
        )


def merge_into_template(template: Manifest, info: PodSetInfo) -> None:
    """Add an admission's scheduling directives to a pod template (in place)."""
    meta = template.setdefault("metadata", {}) or {}
    template["metadata"] = meta
    spec = template.setdefault("spec", {})
    selector = dict(spec.get("nodeSelector") or {})
    for key, value in info.node_selector.items():
        if selector.get(key, value) != value:
            raise PodSetMergeError(f"nodeSelector {key}={selector[key]} conflicts with the flavor's {value}")
        selector[key] = value
    if selector:
        spec["nodeSelector"] = selector
    tolerations = list(spec.get("tolerations") or [])
    tolerations.extend(dict(t) for t in info.tolerations if t not in tolerations)
    if tolerations:
        spec["tolerations"] = tolerations
    if info.labels:
        meta["labels"] = {**(meta.get("labels") or {}), **info.labels}
    if info.annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **info.annotations}


def _directives(template: Manifest) -> tuple[Any, ...]:
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    return (
        spec.get("nodeSelector") or {},
        spec.get("tolerations") or [],
        meta.get("labels") or {},
        meta.get("annotations") or {},
    )


def restore_template(template: Manifest, info: PodSetInfo) -> bool:
    """Put a template's scheduling directives back to ``info``'s; True when something changed."""
    wanted = (
        dict(info.node_selector),
        [dict(t) for t in info.tolerations],
        dict(info.labels),
        dict(info.annotations),
    )
    if _directives(template) == wanted:
        return False
    spec = template.setdefault("spec", {})
    meta = template.get("metadata") or {}
    for container, name, value in (
        (spec, "nodeSelector", wanted[0]),
        (spec, "tolerations", wanted[1]),
        (meta, "labels", wanted[2]),
        (meta, "annotations", wanted[3]),
    ):
        if value:
            container[name] = value
        else:
            container.pop(name, None)
    template["metadata"] = meta
    return True


@dataclass(frozen=True, slots=True)
class Finished:
    """How a job ended: the Workload's Finished condition reason and message."""

    succeeded: bool
    message: str

    @property
    def reason(self) -> str:
        return "Succeeded" if self.succeeded else "Failed"


class JobAdapter(Protocol):
    """One job kind, seen through what Kueue needs of it."""

    kind: str
    api_version: str

    def queue_name(self, job: Manifest) -> str: ...

    def pod_sets(self, job: Manifest) -> list[Manifest]: ...

    def is_suspended(self, job: Manifest) -> bool: ...

    def suspend(self, job: Manifest) -> None: ...

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None: ...

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool: ...

    def finished(self, job: Manifest) -> Finished | None: ...

    def is_active(self, job: Manifest) -> bool: ...

    def pods_ready(self, job: Manifest) -> bool: ...

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        """``[{name, count}]`` for Workload ``status.reclaimablePods``; empty when none."""
        ...


class Registry:
    """The job kinds a controller manages, by kind; built explicitly, never on import."""

    def __init__(self, adapters: Iterable[JobAdapter] = ()) -> None:
        self._adapters: dict[str, JobAdapter] = {}
        for adapter in adapters:
            self.register(adapter)

    def register(self, adapter: JobAdapter) -> None:
        if adapter.kind in self._adapters:
            raise ValueError(f"a job adapter for {adapter.kind} is registered already")
        self._adapters[adapter.kind] = adapter

    def get(self, kind: str) -> JobAdapter | None:
        return self._adapters.get(kind)

    def kinds(self) -> list[str]:
        return list(self._adapters)

    def owner_of(self, workload: Manifest) -> tuple[JobAdapter, Manifest] | None:
        """The adapter and ownerReference of a Workload made for a job of a registered kind."""
        for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
            adapter = self._adapters.get(str(ref.get("kind")))
            if adapter is not None and ref.get("apiVersion") == adapter.api_version and ref.get("controller"):
                return adapter, ref
        return None


def default_registry() -> Registry:
    """The job kinds pykueue integrates today: batch/v1 Job."""
    from pykueue.controllers.integrations import batch_job

    return Registry([batch_job.BatchJobAdapter()])


# -------------------------------------------------------------- Workload build


def workload_name(kind: str, job_name: str, job_uid: str) -> str:
    """``<kind>-<name>-<hash>`` as upstream names them; stable for one job, unique across re-creations."""
    digest = hashlib.sha1(f"{kind}/{job_name}/{job_uid}".encode()).hexdigest()[:5]
    prefix = f"{kind.lower()}-{job_name}"[: MAX_NAME - 6]
    return f"{prefix}-{digest}"


def workload_for(
    adapter: JobAdapter, job: Manifest, priority_of: Callable[[str, str], int | None] | None = None
) -> Manifest:
    """The Workload that queues ``job``: owned by it, with its pod sets, queue and priority class.

    ``priority_of(kind, name)`` gives a priority class's value; as upstream, the Workload's
    ``spec.priority`` is that value when it is created, and stays so if the class changes.
    """
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    spec: Manifest = {"queueName": adapter.queue_name(job), "podSets": adapter.pod_sets(job)}
    if labels.get(PRIORITY_CLASS_LABEL):
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_CLASS_LABEL],
        }
    else:
        pod_class = next(
            (
                ps["template"]["spec"].get("priorityClassName")
                for ps in spec["podSets"]
                if ps["template"]["spec"].get("priorityClassName")
            ),
            None,
        )
        if pod_class:
            spec["priorityClassRef"] = {
                "group": "scheduling.k8s.io",
                "kind": "PriorityClass",
                "name": pod_class,
            }
    ref = spec.get("priorityClassRef")
    if ref is not None and priority_of is not None:
        value = priority_of(ref["kind"], ref["name"])
        if value is not None:
            spec["priority"] = value
    # The job's ProvisioningRequest parameters travel on its Workload, as upstream copies them.
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(PROVREQ_ANNOTATION_PREFIX)
    }
    workload_meta: Manifest = {
        "name": workload_name(adapter.kind, str(meta["name"]), str(meta.get("uid", ""))),
        "namespace": meta.get("namespace") or "default",
        "labels": {JOB_UID_LABEL: str(meta.get("uid", ""))[:63]},
    }
    if annotations:
        workload_meta["annotations"] = annotations
    return {
        "apiVersion": WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {
            **workload_meta,
            "ownerReferences": [
                {
                    "apiVersion": adapter.api_version,
                    "kind": adapter.kind,
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def equivalent_pod_sets(workload: Manifest, pod_sets: list[Manifest]) -> bool:
    """Whether a Workload still describes the job's pod sets (names, counts, requests)."""

    def shape(items: list[Manifest]) -> list[tuple[Any, ...]]:
        return [
            (
                ps.get("name"),
                ps.get("count"),
                ps.get("minCount"),
                [
                    (c.get("name"), (c.get("resources") or {}).get("requests"))
                    for c in ((ps.get("template") or {}).get("spec") or {}).get("containers") or []
                ],
            )
            for ps in items
        ]

    return shape((workload.get("spec") or {}).get("podSets") or []) == shape(pod_sets)
