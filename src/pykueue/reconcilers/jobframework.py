"""How a job kind plugs into Kueue: one small `JobAdapter` protocol and an explicit `Registry`.

The job reconciler (`pykueue.reconcilers.job_reconciler`) is generic: it builds a
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
them a copy and writes it.

Kinds plug in through `Integration`s: each kind's module under
`pykueue.reconcilers.integrations` describes itself with one (upstream's framework
name, its API resource, a factory of its adapter), and the integrations package
lists them, as upstream's jobs.go does. This module never names a kind, and a
`Registry` is built explicitly from the names enabled in the configuration's
``integrations.frameworks``, so importing a kind's module changes nothing.

`Settings` carries what the configuration says about which jobs are managed at
all (``manageJobsWithoutQueueName``, ``managedJobsNamespaceSelector``).

`PodSetInfo` carries what an admission changes in one pod set. The info that
*restores* a job comes from its Workload's pod sets, which keep the template as
it was when the Workload was created; that is how upstream's jobframework does it,
so no annotation on the job is needed to remember the original.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pykueue.api import semantic
from pykueue.api.meta import LabelSelector, dns_label_errors, label_value_errors
from pykueue.errors import FieldProblem
from pykueue.reconcilers import tas_annotations
from pykueue.store.base import Manifest

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# Kueue's first releases read the queue from an annotation of this name; jobs written then still work.
QUEUE_NAME_ANNOTATION = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# A job that names a Workload made for it beforehand (by MultiKueue on a worker, or by a user):
# an annotation (read first, as upstream since v0.18) or a label of this key.
PREBUILT_WORKLOAD_KEY = "kueue.x-k8s.io/prebuilt-workload-name"
# A pre-built Workload that does not describe its job is finished with this reason, as upstream.
OUT_OF_SYNC = "OutOfSync"
WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
MAX_NAME = 253
# Topology-aware scheduling: pods of a pod set placed by topology wait behind this gate until
# the topology ungater gives each one its domain's node selector (reconcilers/topology_ungater.py).
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
# On such pods: which Workload and pod set they belong to, and that their node capacity is
# counted through the Workload's topology assignment (not as a pod the engine does not manage).
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
POD_SET_LABEL = "kueue.x-k8s.io/podset"
TAS_LABEL = "kueue.x-k8s.io/tas"
# Feature gate AssignQueueLabelsForPods (on by default, as upstream): an admitted job's pods
# carry the queues that admitted it, so their usage can be summed per queue by label.
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"


class PodSetMergeError(Exception):
    """An admission's node selector contradicts the job's own (same key, other value)."""


def labels_of(obj: Manifest) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Manifest) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def queue_name_of(obj: Manifest) -> str:
    """The LocalQueue a job names: its ``kueue.x-k8s.io/queue-name`` label, else the old annotation."""
    return str(labels_of(obj).get(QUEUE_NAME_LABEL) or annotations_of(obj).get(QUEUE_NAME_ANNOTATION) or "")


def max_execution_seconds(obj: Manifest) -> int | None:
    """``kueue.x-k8s.io/max-exec-time-seconds`` as a positive number; None when absent or not one."""
    text = labels_of(obj).get(MAX_EXEC_TIME_LABEL)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value > 0 else None


@dataclass(frozen=True, slots=True)
class PodSetInfo:
    """What an admission sets on one pod set (or, to restore it, what the template had)."""

    name: str
    count: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduling_gates: tuple[str, ...] = ()

    @staticmethod
    def from_assignment(
        assignment: Manifest, flavors: Mapping[str, Manifest], count: int, workload: str = ""
    ) -> PodSetInfo:
        """The info of an admitted pod set: its flavors' node labels and tolerations, its count.

        A pod set placed by topology (its assignment has a ``topologyAssignment``) also gets
        the topology gate, and the label and annotation by which the ungater finds its pods.
        """
        selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for flavor_name in dict.fromkeys((assignment.get("flavors") or {}).values()):
            spec = (flavors.get(flavor_name) or {}).get("spec") or {}
            selector.update(spec.get("nodeLabels") or {})
            tolerations.extend(t for t in spec.get("tolerations") or [] if t not in tolerations)
        if assignment.get("count") is not None:
            count = int(assignment["count"])
        name = str(assignment.get("name", "main"))
        if not assignment.get("topologyAssignment"):
            return PodSetInfo(name, count, selector, tuple(tolerations))
        return PodSetInfo(
            name,
            count,
            selector,
            tuple(tolerations),
            labels={POD_SET_LABEL: name, TAS_LABEL: "true"},
            annotations={WORKLOAD_ANNOTATION: workload},
            scheduling_gates=(TOPOLOGY_GATE,),
        )

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
            self.scheduling_gates,
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
            scheduling_gates=tuple(str(g.get("name", "")) for g in spec.get("schedulingGates") or ()),
        )


def queue_labels(workload: Manifest) -> dict[str, str]:
    """An admitted Workload's queues as its pods' labels (AssignQueueLabelsForPods). As upstream,
    a ClusterQueue name that is no DNS-1123 label is left out; so is a LocalQueue name no label
    value can hold (upstream would fail the pod's update for ever, so the pods never start)."""
    local = str((workload.get("spec") or {}).get("queueName") or "")
    cluster = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
    labels = {LOCAL_QUEUE_LABEL: local} if local and not label_value_errors(local) else {}
    if cluster and not dns_label_errors(cluster):
        labels[CLUSTER_QUEUE_LABEL] = cluster
    return labels


def with_queue_labels(info: PodSetInfo, workload: Manifest) -> PodSetInfo:
    return replace(info, labels={**info.labels, **queue_labels(workload)})


def merge_into_template(template: Manifest, info: PodSetInfo) -> None:
    """Add an admission's scheduling directives to a pod template (in place)."""
    meta = template.get("metadata") or {}
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
    gates = list(spec.get("schedulingGates") or [])
    gates.extend({"name": g} for g in info.scheduling_gates if {"name": g} not in gates)
    if gates:
        spec["schedulingGates"] = gates
    if info.labels:
        meta["labels"] = {**(meta.get("labels") or {}), **info.labels}
    if info.annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **info.annotations}
    if meta:
        template["metadata"] = meta


def _directives(template: Manifest) -> tuple[Any, ...]:
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    return (
        spec.get("nodeSelector") or {},
        spec.get("tolerations") or [],
        meta.get("labels") or {},
        meta.get("annotations") or {},
        spec.get("schedulingGates") or [],
    )


def restore_template(template: Manifest, info: PodSetInfo) -> bool:
    """Put a template's scheduling directives back to ``info``'s; True when something changed."""
    wanted = (
        dict(info.node_selector),
        [dict(t) for t in info.tolerations],
        dict(info.labels),
        dict(info.annotations),
        [{"name": g} for g in info.scheduling_gates],
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
        (spec, "schedulingGates", wanted[4]),
    ):
        if value:
            container[name] = value
        elif container.get(name):
            del container[name]  # (an empty map the user wrote stays as written)
    if meta or "metadata" in template:
        template["metadata"] = meta
    return True


@dataclass(frozen=True, slots=True)
class Finished:
    """How a job ended: the Workload's Finished condition reason and message."""

    succeeded: bool
    message: str
    cause: str = ""  # a reason other than Succeeded/Failed (OutOfSync)

    @property
    def reason(self) -> str:
        return self.cause or ("Succeeded" if self.succeeded else "Failed")

    def on(self, workload: Manifest, now: str) -> Manifest:
        """A copy of ``workload`` with ``Finished=True`` (the status to write; ``now`` RFC 3339)."""
        updated = copy.deepcopy(workload)
        status = updated.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Finished"]
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": self.reason,
                "message": self.message[:32768],
                "lastTransitionTime": now,
                "observedGeneration": (workload.get("metadata") or {}).get("generation", 0),
            }
        )
        status["conditions"] = conditions
        return updated


def eviction_marker(workload: Manifest) -> str:
    """Tells one eviction of a Workload from the next (its uid and the Evicted condition's time),
    so that a reconciler reports a stopped job once per eviction."""
    conditions = (workload.get("status") or {}).get("conditions") or []
    evicted: Manifest = next((c for c in conditions if c.get("type") == "Evicted"), {})
    return f"{(workload.get('metadata') or {}).get('uid', '')}/{evicted.get('lastTransitionTime', '')}"


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


# The value of a job's ``spec.managedBy`` that hands it to MultiKueue: on the manager cluster
# the kind's own controller leaves such a job alone, and MultiKueue runs it on a worker.
MULTIKUEUE_MANAGED_BY = "kueue.x-k8s.io/multikueue"
# Labels of a job copy in a worker: which manager made it, and the manager Workload it runs for.
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/multikueue-workload"


class MultiKueueAdapter(Protocol):
    """What MultiKueue needs of one job kind to run a manager's job on a worker cluster.

    ``managed_by_field``    where the kind says who manages it (dotted path, for messages)
    ``managed``             the job hands itself to MultiKueue (its managed-by field says so)
    ``remote_copy``         the object to create in a worker: the job as its user wrote it,
                            suspended, without what the manager's API server (or Kueue) filled
                            in for its own copy
    ``mirror_status``       the manager's job with the worker copy's status, or None when they agree
    ``default_managed_by``  hand a new job to MultiKueue (the job webhook, for jobs queued in a
                            ClusterQueue with a MultiKueue check); True when that changed the job,
                            False when it is MultiKueue's already or names a third controller
    ``status_forgotten``    the manager's job without the status mirrored from a copy no longer
                            elected, or None when there is nothing to clear

    A kind run as a group of objects (a pod group: `Registry.composable`) has one adapter
    too; MultiKueue applies it to each object of the group (see `multikueue`).
    """

    @property
    def managed_by_field(self) -> str: ...

    def managed(self, job: Manifest) -> bool: ...

    def remote_copy(self, job: Manifest) -> Manifest: ...

    def mirror_status(self, job: Manifest, remote: Manifest) -> Manifest | None: ...

    def default_managed_by(self, job: Manifest) -> bool: ...

    def status_forgotten(self, job: Manifest) -> Manifest | None: ...


def bare_copy(job: Manifest) -> Manifest:
    """A job's manifest without what its API server made of it: identity, status, bookkeeping.

    The base of every kind's `MultiKueueAdapter.remote_copy`: a worker's API server assigns its
    own uid, resourceVersion and owner references, and the manager's are meaningless there.
    """
    meta = job.get("metadata") or {}
    kept = {
        key: copy.deepcopy(meta[key]) for key in ("name", "namespace", "labels", "annotations") if key in meta
    }
    result = {key: copy.deepcopy(value) for key, value in job.items() if key not in ("metadata", "status")}
    result["metadata"] = kept
    return result


def copied_status(job: Manifest, remote: Manifest) -> Manifest | None:
    """``job`` with ``remote``'s status in place of its own; None when they are already equal."""
    status = remote.get("status") or {}
    if (job.get("status") or {}) == status:
        return None
    updated = copy.deepcopy(job)
    updated["status"] = copy.deepcopy(status)
    return updated


def _field(obj: Manifest, path: tuple[str, ...]) -> Any:
    value: Any = obj
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _parent(obj: Manifest, path: tuple[str, ...]) -> dict[str, Any]:
    """The map holding the last key of ``path``, made on the way when missing."""
    for part in path[:-1]:
        if not isinstance(obj.get(part), dict):
            obj[part] = {}
        obj = obj[part]
    return obj


@dataclass(frozen=True, slots=True)
class SpecMultiKueue:
    """The `MultiKueueAdapter` of a kind dispatched as one object whose spec holds its
    managed-by field and its suspend flag: every kind upstream's MultiKueue copies whole
    (Job, JobSet, the Kubeflow jobs, MPIJob, TrainJob, RayJob, RayCluster, AppWrapper).

    ``own_controller`` is the value of the managed-by field that names the kind's own
    controller: a job naming it, or nothing, may be handed to MultiKueue by the webhook;
    one naming a third controller is left to it. ``strip`` removes from the copy what only
    means something on the manager (besides the identity, status and managed-by field).
    """

    managed_by: tuple[str, ...]
    suspend: tuple[str, ...]
    own_controller: str
    strip: Callable[[Manifest], None] | None = None

    @property
    def managed_by_field(self) -> str:
        return ".".join(self.managed_by)

    def managed(self, job: Manifest) -> bool:
        return bool(_field(job, self.managed_by) == MULTIKUEUE_MANAGED_BY)

    def remote_copy(self, job: Manifest) -> Manifest:
        remote = bare_copy(job)
        # The worker's own controller must run the copy, and the worker's Kueue admit it first.
        _parent(remote, self.managed_by).pop(self.managed_by[-1], None)
        _parent(remote, self.suspend)[self.suspend[-1]] = True
        if self.strip is not None:
            self.strip(remote)
        return remote

    def mirror_status(self, job: Manifest, remote: Manifest) -> Manifest | None:
        return copied_status(job, remote)

    def default_managed_by(self, job: Manifest) -> bool:
        if _field(job, self.managed_by) not in (None, "", self.own_controller):
            return False
        _parent(job, self.managed_by)[self.managed_by[-1]] = MULTIKUEUE_MANAGED_BY
        return True

    def status_forgotten(self, job: Manifest) -> Manifest | None:
        # The job never ran here: all of its status came from the copy.
        if not job.get("status"):
            return None
        cleared = copy.deepcopy(job)
        cleared["status"] = {}
        return cleared


@dataclass(frozen=True, slots=True)
class Integration:
    """One job kind as the configuration names it: upstream's framework name and where it lives.

    ``name`` is what ``integrations.frameworks`` lists (``batch/job``,
    ``jobset.x-k8s.io/jobset``, ``pod``...); ``group``/``version``/``plural`` say where
    the API serves the kind; ``adapter`` makes its `JobAdapter`.

    Two variations: a kind queued through the pods it creates (Deployment, StatefulSet)
    has no adapter, only ``mutate``, which its webhook applies on create and update to
    hand the queue down to the pod template; and a ``composable`` kind (Pod) is run by
    groups of objects rather than one object each (`pykueue.reconcilers.pod_groups`).
    """

    name: str
    kind: str
    group: str
    version: str
    plural: str
    adapter: Callable[[], JobAdapter] | None = None
    mutate: Callable[[Manifest], None] | None = None
    composable: bool = False
    # The kind's own webhook rules, besides `job_validation`'s for every kind:
    # ``validate(new, old)`` (old is None on create) -> the problems, with field paths.
    validate: Callable[[Manifest, Manifest | None], list[FieldProblem]] | None = None
    # A feature gate that, off, switches ``validate`` off (its rules are upstream's gated ones).
    validate_gate: str = ""
    # How MultiKueue dispatches the kind to worker clusters; None: it cannot be dispatched.
    multikueue: Callable[[], MultiKueueAdapter] | None = None
    # Whether a job of the kind may name a pre-built Workload (upstream's list of kinds).
    prebuilt_workload: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class UnknownFramework(ValueError):
    """``integrations.frameworks`` names a kind pykueue does not integrate."""


class Registry:
    """The job kinds a controller manages, by kind; built explicitly, never on import."""

    def __init__(self, adapters: Iterable[JobAdapter] = ()) -> None:
        self._adapters: dict[str, JobAdapter] = {}
        self._remote: dict[str, MultiKueueAdapter] = {}
        self.composable: set[str] = set()
        self.integrations: list[Integration] = []
        for adapter in adapters:
            self.register(adapter)

    @classmethod
    def of(cls, available: Iterable[Integration], frameworks: Iterable[str]) -> Registry:
        """The adapters of the frameworks named, in that order; `UnknownFramework` for a name not available."""
        by_name = {integration.name: integration for integration in available}
        registry = cls()
        for name in dict.fromkeys(frameworks):
            integration = by_name.get(name)
            if integration is None:
                known = ", ".join(sorted(by_name))
                raise UnknownFramework(f"integrations.frameworks: unknown framework {name!r}; known: {known}")
            registry.integrations.append(integration)
            if integration.adapter is not None:
                registry.register(integration.adapter(), composable=integration.composable)
            if integration.multikueue is not None:
                registry._remote[integration.kind] = integration.multikueue()
        return registry

    def framework_of(self, job: Manifest) -> str:
        """The framework name (``batch/job``, ...) of a job of an enabled kind; "" for none."""
        api_version, kind = str(job.get("apiVersion") or ""), str(job.get("kind") or "")
        found = (i.name for i in self.integrations if (i.api_version, i.kind) == (api_version, kind))
        return next(found, "")

    def multikueue(self, kind: str) -> MultiKueueAdapter | None:
        """How MultiKueue dispatches ``kind``, if it can."""
        return self._remote.get(kind)

    def prebuilt(self, kind: str) -> bool:
        """Whether a job of ``kind`` may name a pre-built Workload (so MultiKueue can send one)."""
        return any(i.kind == kind and i.prebuilt_workload for i in self.integrations)

    def multikueue_kinds(self) -> list[str]:
        """The kinds of the copies MultiKueue makes, composable ones (Pod) included: a kind
        queued through its pods (a StatefulSet) has an adapter, but its copies are Pods."""
        return [kind for kind in self._remote if kind in self._adapters]

    def register(self, adapter: JobAdapter, composable: bool = False) -> None:
        if adapter.kind in self._adapters:
            raise ValueError(f"a job adapter for {adapter.kind} is registered already")
        self._adapters[adapter.kind] = adapter
        if composable:
            self.composable.add(adapter.kind)

    def get(self, kind: str) -> JobAdapter | None:
        return self._adapters.get(kind)

    def kinds(self) -> list[str]:
        """The kinds run one object per job (every registered kind but the composable ones)."""
        return [kind for kind in self._adapters if kind not in self.composable]

    def enabled(self, name: str) -> bool:
        return any(integration.name == name for integration in self.integrations)

    def owner_of(self, workload: Manifest) -> tuple[JobAdapter, Manifest] | None:
        """The adapter and ownerReference of a Workload made for a job run one object per job."""
        owner = self.managed_owner(workload)
        return None if owner is None or owner[0].kind in self.composable else owner

    def managed_owner(self, obj: Manifest) -> tuple[JobAdapter, Manifest] | None:
        """The adapter and controller ownerReference of an object whose controller is a registered kind.

        A JobSet's Jobs, a Kubeflow job's pods and a Workload made for a job all have one:
        they are queued through that owner, never on their own.
        """
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            adapter = self._adapters.get(str(ref.get("kind")))
            if adapter is not None and ref.get("apiVersion") == adapter.api_version and ref.get("controller"):
                return adapter, ref
        return None


@dataclass(frozen=True, slots=True)
class Settings:
    """Which jobs are Kueue's business, from the configuration (upstream's names in brackets).

    ``manage_jobs_without_queue_name`` [manageJobsWithoutQueueName]: a job without a
    queue name is held too; its Workload names no queue, so it waits until the job gets
    one (the webhook gives it the namespace's ``default`` LocalQueue when that exists).
    ``namespace_selector`` [managedJobsNamespaceSelector]:
    only jobs in matching namespaces are managed; None manages every namespace.
    ``label_keys_to_copy`` [integrations.labelKeysToCopy]: job labels copied onto its Workload.
    ``device_classes`` [resources.deviceClassMappings]: see `pykueue.reconcilers.dra`.
    """

    manage_jobs_without_queue_name: bool = False
    namespace_selector: LabelSelector | None = None
    label_keys_to_copy: tuple[str, ...] = ()
    # [resources.deviceClassMappings] DRA: DeviceClass name -> the quota resource its devices use.
    device_classes: Mapping[str, str] = field(default_factory=dict)
    # DeviceClass name -> the deviceClassMappings source field pykueue cannot charge (`dra.unsupported_sources`).
    device_class_sources: Mapping[str, str] = field(default_factory=dict)

    def manages(self, obj: Manifest) -> bool:
        """Whether a top-level job is held by Kueue: it names a queue, or every job is."""
        return bool(queue_name_of(obj)) or self.manage_jobs_without_queue_name

    def namespace_managed(self, namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether jobs of a namespace with these labels are managed (unknown namespace: yes)."""
        if self.namespace_selector is None or namespace_labels is None:
            return True
        return self.namespace_selector.matches(dict(namespace_labels))


# -------------------------------------------------------------- Workload build


def workload_name(kind: str, job_name: str, job_uid: str) -> str:
    """``<kind>-<name>-<hash>`` as upstream names them; stable for one job, unique across re-creations."""
    digest = hashlib.sha1(f"{kind}/{job_name}/{job_uid}".encode()).hexdigest()[:5]
    prefix = f"{kind.lower()}-{job_name}"[: MAX_NAME - 6]
    return f"{prefix}-{digest}"


def controller_reference(adapter: JobAdapter, job: Manifest) -> Manifest:
    """The owner reference that makes ``job`` its Workload's controller (garbage collected with it)."""
    meta = job.get("metadata") or {}
    return {
        "apiVersion": adapter.api_version,
        "kind": adapter.kind,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def workload_for(
    adapter: JobAdapter,
    job: Manifest,
    priority_of: Callable[[str, str], int | None] | None = None,
    label_keys_to_copy: Iterable[str] = (),
) -> Manifest:
    """The Workload that queues ``job``: owned by it, with its pod sets, queue and priority class.

    ``priority_of(kind, name)`` gives a priority class's value; as upstream, the Workload's
    ``spec.priority`` is that value when it is created, and stays so if the class changes.
    The job's ``kueue.x-k8s.io/max-exec-time-seconds`` label becomes the Workload's
    ``maximumExecutionTimeSeconds``; the labels named in ``label_keys_to_copy`` are copied.
    """
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    spec: Manifest = {"podSets": adapter.pod_sets(job)}
    fill_topology_requests(adapter, job, spec["podSets"])
    if adapter.queue_name(job):
        spec = {"queueName": adapter.queue_name(job), **spec}
    max_seconds = max_execution_seconds(job)
    if max_seconds is not None:
        spec["maximumExecutionTimeSeconds"] = max_seconds
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
        "labels": {
            **{key: labels[key] for key in label_keys_to_copy if key in labels},
            JOB_UID_LABEL: str(meta.get("uid", ""))[:63],
        },
    }
    if annotations:
        workload_meta["annotations"] = annotations
    return {
        "apiVersion": WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {
            **workload_meta,
            "ownerReferences": [controller_reference(adapter, job)],
        },
        "spec": spec,
    }


def fill_topology_requests(adapter: JobAdapter, job: Manifest, pod_sets: list[Manifest]) -> None:
    """Each pod set's ``topologyRequest`` from its template's annotations, as upstream's jobs do.

    A kind that numbers its pods says how with an optional ``topology_indexes(job, name)``
    (the pod index label, the sub-group label and count) on its adapter.
    """
    indexes = getattr(adapter, "topology_indexes", None)
    for ps in pod_sets:
        if "topologyRequest" in ps:
            continue
        meta = (ps.get("template") or {}).get("metadata") or {}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        named = indexes(job, str(ps.get("name", ""))) if indexes is not None else None
        request = tas_annotations.topology_request(annotations, named)
        if request is not None:
            ps["topologyRequest"] = request


def equivalent_pod_sets(workload: Manifest, pod_sets: list[Manifest]) -> bool:
    """Whether a Workload still describes the job's pod sets (names, counts, requests).

    Requests are compared by value, as upstream's semantic equality does: a job's ``cpu: 1``
    and its Workload's ``cpu: "1"`` (or ``1000m``) ask for the same.
    """

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

    mine, theirs = shape((workload.get("spec") or {}).get("podSets") or []), shape(pod_sets)
    return len(mine) == len(theirs) and all(
        a[:3] == b[:3]
        and len(a[3]) == len(b[3])
        and all(
            ca[0] == cb[0] and semantic.same_resources(ca[1], cb[1])
            for ca, cb in zip(a[3], b[3], strict=True)
        )
        for a, b in zip(mine, theirs, strict=True)
    )


def equivalent_to_job(workload: Manifest, adapter: JobAdapter, job: Manifest) -> bool:
    """Whether a Workload still queues the job as it is: pod sets, queue and time limit."""
    spec = workload.get("spec") or {}
    return (
        equivalent_pod_sets(workload, adapter.pod_sets(job))
        and str(spec.get("queueName") or "") == adapter.queue_name(job)
        and spec.get("maximumExecutionTimeSeconds") == max_execution_seconds(job)
    )


def prebuilt_workload_name(job: Manifest) -> str:
    """The Workload made beforehand for ``job`` (its annotation, else its label), or ""."""
    return str(
        annotations_of(job).get(PREBUILT_WORKLOAD_KEY) or labels_of(job).get(PREBUILT_WORKLOAD_KEY) or ""
    )
