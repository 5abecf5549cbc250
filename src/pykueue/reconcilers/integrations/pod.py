"""Plain Pods and pod groups (``v1`` Pod): held by a scheduling gate, queued alone or as a group.

    pod CREATE ──webhook──▶ label kueue.x-k8s.io/managed=true, gate kueue.x-k8s.io/admission
    one pod                 ──▶ a Workload of its own (pod set "main", count 1)
    kueue.x-k8s.io/pod-group-name + pod-group-total-count
                            ──▶ one Workload for the group, made once all its pods exist
                                (pod sets: pods of one role, i.e. the same scheduling shape)
    admitted                ──▶ the gate removed, the flavors' node selector and tolerations added
    evicted                 ──▶ the running pods deleted (their owner, if any, makes new ones)

MultiKueue dispatches plain pods and pod groups (`PodMultiKueue`), a StatefulSet's
included (its Workload is owned by the StatefulSet, its pods are copied): a pod has no
managed-by field, so every pod queued in a ClusterQueue with a MultiKueue check is
dispatched, as upstream does. It stays gated on the manager; its copy on the worker
keeps the gate and Kueue's labels, so the worker's Kueue queues it (a group once all
its copies exist), and the copy's status comes back onto it.

A Pod has no ``suspend``: the scheduling gate is what holds it, and Kubernetes lets a
gated pod's node selector and tolerations be added to, which is how admission places
it. This module is the adapter of one pod (what the webhook applies and what a
Workload is made of); `pykueue.reconcilers.pod_groups` gathers pods into the
groups they form and runs them.

Deployment and StatefulSet are queued through their pods, as upstream: their webhook
(`mutate_deployment`, `mutate_statefulset`) puts the queue name, and for a
StatefulSet the group it forms, on the pod template.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from pykueue.api import semantic
from pykueue.reconcilers.jobframework import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    TOPOLOGY_GATE,
    Finished,
    Integration,
    PodSetInfo,
    annotations_of,
    bare_copy,
    labels_of,
    merge_into_template,
    queue_name_of,
)
from pykueue.store.base import Manifest

SCHEDULING_GATE = "kueue.x-k8s.io/admission"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
GROUP_FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
GROUP_SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
SUSPENDED_BY_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
POD_SET = "main"
# TAS: a pod group numbers its pods with this label (its pod set's podIndexLabel), copied at
# creation from the label the pod's annotation names (upstream's pod-group-pod-index-label).
GROUP_POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
GROUP_POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
STATEFULSET_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def spec_of(pod: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = pod.setdefault("spec", {})
    return spec


def is_gated(pod: Manifest) -> bool:
    return any(g.get("name") == SCHEDULING_GATE for g in spec_of(pod).get("schedulingGates") or [])


def ungate(pod: Manifest, gate: str = SCHEDULING_GATE) -> None:
    gates = [g for g in spec_of(pod).get("schedulingGates") or [] if g.get("name") != gate]
    if gates:
        spec_of(pod)["schedulingGates"] = gates
    else:
        spec_of(pod).pop("schedulingGates", None)


def group_name(pod: Manifest) -> str:
    return str(labels_of(pod).get(GROUP_NAME_LABEL) or annotations_of(pod).get(GROUP_NAME_LABEL) or "")


def total_count(pod: Manifest) -> int | None:
    """The group's size from ``kueue.x-k8s.io/pod-group-total-count``; None when missing or not a number."""
    text = annotations_of(pod).get(GROUP_TOTAL_COUNT_ANNOTATION)
    try:
        value = int(str(text))
    except ValueError:
        return None
    return value if value > 0 else None


def is_serving(pod: Manifest) -> bool:
    return annotations_of(pod).get(GROUP_SERVING_ANNOTATION) == "true"


def fast_admission(pod: Manifest) -> bool:
    return annotations_of(pod).get(GROUP_FAST_ADMISSION_ANNOTATION) == "true"


def role_hash(pod: Manifest) -> str:
    """Pods with the same scheduling shape (containers' images and requests, placement) share a role."""
    spec = spec_of(pod)

    def containers(name: str) -> list[Any]:
        return [
            (
                c.get("name"),
                c.get("image"),
                semantic.canonical_resources((c.get("resources") or {}).get("requests")),
            )
            for c in spec.get(name) or []
        ]

    shape = {
        "containers": containers("containers"),
        "init": containers("initContainers"),
        "nodeSelector": spec.get("nodeSelector"),
        "tolerations": spec.get("tolerations"),
        "affinity": spec.get("affinity"),
        "priorityClassName": spec.get("priorityClassName"),
        "resourceClaims": spec.get("resourceClaims"),
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]


def template_of(pod: Manifest) -> Manifest:
    """The pod as a pod template: its labels, annotations and spec, without what the gate adds."""
    meta = pod.get("metadata") or {}
    spec = copy.deepcopy(spec_of(pod))
    spec.pop("nodeName", None)
    # Kueue's own gates are not the pod's: a Workload's template never carries them.
    ours = (SCHEDULING_GATE, TOPOLOGY_GATE)
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") not in ours]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)
    template: Manifest = {"spec": spec}
    template_meta = {key: dict(meta[key]) for key in ("labels", "annotations") if meta.get(key)}
    if template_meta:
        template["metadata"] = template_meta
    return template


def finished(pod: Manifest) -> Finished | None:
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return Finished(True, "Pod succeeded")
    if phase == "Failed":
        message = (pod.get("status") or {}).get("message") or (pod.get("status") or {}).get("reason")
        return Finished(False, str(message or "Pod failed"))
    return None


class PodAdapter:
    """One v1 Pod through `pykueue.reconcilers.jobframework.JobAdapter` (what the webhook and
    `pykueue validate` use; `pykueue.reconcilers.pod_groups` runs pods by group)."""

    kind = "Pod"
    api_version = "v1"

    def queue_name(self, job: Manifest) -> str:
        return queue_name_of(job)

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        return [{"name": POD_SET, "count": 1, "template": template_of(job)}]

    def is_suspended(self, job: Manifest) -> bool:
        return is_gated(job)

    def topology_indexes(self, job: Manifest, name: str) -> dict[str, object]:
        """How a pod group numbers its pods, for a topology request (upstream's pod pod sets)."""
        return {"podIndexLabel": GROUP_POD_INDEX_LABEL}

    def hold_for_topology(self, job: Manifest) -> None:
        """The webhook, with TopologyAwareScheduling on: a held pod also waits behind the topology
        gate (a gate cannot be added once a pod exists, and whether its Workload is placed by
        topology is known only at admission), and gets its pod-group index label copied from
        the label its annotation names, as upstream's pod webhook does."""
        meta = job.setdefault("metadata", {})
        annotations = annotations_of(job)
        source = annotations.get(GROUP_POD_INDEX_LABEL_ANNOTATION)
        if source is None and annotations.get(SUSPENDED_BY_PARENT_ANNOTATION) == "statefulset":
            # A StatefulSet's pods are numbered by their ordinal (upstream's StatefulSet pod
            # reconciler names this label on each pod; here the pod, not the template, so that
            # existing StatefulSets are not rolled).
            source = STATEFULSET_POD_INDEX_LABEL
        if source is not None:
            labels = dict(meta.get("labels") or {})
            labels[GROUP_POD_INDEX_LABEL] = str(labels.get(source, ""))
            meta["labels"] = labels
        gates = spec_of(job).get("schedulingGates") or []
        if not any(g.get("name") == TOPOLOGY_GATE for g in gates):
            spec_of(job)["schedulingGates"] = [*gates, {"name": TOPOLOGY_GATE}]

    def suspend(self, job: Manifest) -> None:
        # The webhook holds a new pod: the gate, and the label that marks it as Kueue's.
        meta = job.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), MANAGED_LABEL: "true"}
        if not is_gated(job):
            spec_of(job)["schedulingGates"] = [
                *(spec_of(job).get("schedulingGates") or []),
                {"name": SCHEDULING_GATE},
            ]
        meta["annotations"] = {**(meta.get("annotations") or {}), ROLE_HASH_ANNOTATION: role_hash(job)}

    def run_with_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> None:
        topology = bool(infos) and TOPOLOGY_GATE in infos[0].scheduling_gates
        if infos:
            # A gated pod's node selector and tolerations may be added to (not changed); it gets
            # the admission's labels (its queues'; placed by topology, those by which the
            # ungater finds it) and, placed by topology, the Workload annotation.
            info = infos[0]
            merge_into_template(
                job,
                PodSetInfo(
                    info.name,
                    1,
                    info.node_selector,
                    info.tolerations,
                    info.labels,
                    info.annotations if topology else {},
                ),
            )
        ungate(job)
        if not topology:
            # Not placed by topology: nothing will lift the topology gate the webhook added.
            ungate(job, TOPOLOGY_GATE)

    def restore_pod_sets(self, job: Manifest, infos: list[PodSetInfo]) -> bool:
        return False  # a started pod cannot be changed back; it is deleted instead

    def finished(self, job: Manifest) -> Finished | None:
        return finished(job)

    def is_active(self, job: Manifest) -> bool:
        return (job.get("status") or {}).get("phase") in ("Pending", "Running") and not is_gated(job)

    def pods_ready(self, job: Manifest) -> bool:
        conditions = (job.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def reclaimable_pods(self, job: Manifest) -> list[Manifest]:
        return []


# The service-account token volume the ServiceAccount admission of a pod's API server adds
# (``kube-api-access-<random>``); a worker's API server adds its own to the copy.
TOKEN_VOLUME_PREFIX = "kube-api-access-"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _without_token_volume(spec: dict[str, Any]) -> None:
    token = {
        str(v.get("name"))
        for v in spec.get("volumes") or []
        if str(v.get("name") or "").startswith(TOKEN_VOLUME_PREFIX) and "projected" in v
    }
    if not token:
        return
    volumes = [v for v in spec["volumes"] if v.get("name") not in token]
    if volumes:
        spec["volumes"] = volumes
    else:
        spec.pop("volumes")
    for name in CONTAINER_LISTS:
        for container in spec.get(name) or []:
            mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") not in token]
            if mounts:
                container["volumeMounts"] = mounts
            else:
                container.pop("volumeMounts", None)


def _scheduled(pod: Manifest) -> Manifest | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), None)


class PodMultiKueue:
    """A plain pod, alone or one of a group, through
    `pykueue.reconcilers.jobframework.MultiKueueAdapter`; MultiKueue applies it to each pod
    of a group (the pods of a Workload, `pykueue.reconcilers.pod_groups`)."""

    @property
    def managed_by_field(self) -> str:
        return "the queue (a Pod has no managed-by field)"

    def managed(self, job: Manifest) -> bool:
        # Queued in a ClusterQueue with a MultiKueue check is all it takes, as upstream.
        return True

    def remote_copy(self, job: Manifest) -> Manifest:
        remote = bare_copy(job)
        spec = spec_of(remote)
        spec.pop("nodeName", None)
        _without_token_volume(spec)
        # Held until the worker's Kueue admits it there (the manager's pod is gated already;
        # this only matters for a pod whose gate someone else removed).
        if not is_gated(remote):
            spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": SCHEDULING_GATE}]
        meta = remote["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), MANAGED_LABEL: "true"}
        return remote

    def mirror_status(self, job: Manifest, remote: Manifest) -> Manifest | None:
        """The worker pod's status (phase, conditions, container statuses, IPs) on the manager's.

        While the worker's pod is not scheduled, the manager's keeps its own PodScheduled
        condition (False, SchedulingGated): copied, the worker's False/Unschedulable would
        make the manager's cluster autoscaler add nodes for a pod that never runs there.
        """
        status = copy.deepcopy(remote.get("status") or {})
        local_scheduled = _scheduled(job)
        remote_scheduled = _scheduled(remote)
        if local_scheduled is not None and (remote_scheduled or {}).get("status") != "True":
            others = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            status["conditions"] = [*others, copy.deepcopy(local_scheduled)]
        if (job.get("status") or {}) == status:
            return None
        updated = copy.deepcopy(job)
        updated["status"] = status
        return updated

    def default_managed_by(self, job: Manifest) -> bool:
        return False  # nothing to write: the queue hands a pod over

    def status_forgotten(self, job: Manifest) -> Manifest | None:
        # A pod's status is its API server's too (phase, the gate's condition): it stays. The
        # manager's pod is gated, so a stale Running phase never holds an eviction back.
        return None


def multikueue_adapter() -> PodMultiKueue:
    return PodMultiKueue()


def _template(workload_kind: Manifest) -> dict[str, Any]:
    spec = workload_kind.setdefault("spec", {})
    template: dict[str, Any] = spec.setdefault("template", {})
    meta = template.get("metadata") or {}
    template["metadata"] = meta
    return template


def mutate_deployment(deployment: Manifest) -> None:
    """A queued Deployment's pods carry its queue (and priority class): each is queued on its own."""
    labels = labels_of(deployment)
    queue = queue_name_of(deployment)
    if not queue:
        return
    meta = _template(deployment)["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), QUEUE_NAME_LABEL: queue}
    if labels.get(PRIORITY_CLASS_LABEL):
        meta["labels"][PRIORITY_CLASS_LABEL] = labels[PRIORITY_CLASS_LABEL]
    meta["annotations"] = {**(meta.get("annotations") or {}), SUSPENDED_BY_PARENT_ANNOTATION: "deployment"}


def mutate_statefulset(statefulset: Manifest) -> None:
    """A queued StatefulSet's pods form one serving group of ``replicas`` pods, admitted as one.

    The group is admitted as soon as its first pod exists (fast admission): a StatefulSet
    creates its pods one by one, each after the previous is ready.
    """
    queue = queue_name_of(statefulset)
    if not queue:
        return
    name = str((statefulset.get("metadata") or {}).get("name") or "")
    replicas = (statefulset.get("spec") or {}).get("replicas")
    meta = _template(statefulset)["metadata"]
    meta["labels"] = {
        **(meta.get("labels") or {}),
        QUEUE_NAME_LABEL: queue,
        GROUP_NAME_LABEL: f"statefulset-{name}",
    }
    priority = labels_of(statefulset).get(PRIORITY_CLASS_LABEL)
    if priority:
        meta["labels"][PRIORITY_CLASS_LABEL] = priority
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        GROUP_TOTAL_COUNT_ANNOTATION: str(1 if replicas is None else int(replicas)),
        GROUP_FAST_ADMISSION_ANNOTATION: "true",
        GROUP_SERVING_ANNOTATION: "true",
        SUSPENDED_BY_PARENT_ANNOTATION: "statefulset",
    }


INTEGRATION = Integration(
    name="pod",
    kind="Pod",
    group="",
    version="v1",
    plural="pods",
    adapter=PodAdapter,
    composable=True,
    multikueue=multikueue_adapter,
)
DEPLOYMENT = Integration(
    name="deployment",
    kind="Deployment",
    group="apps",
    version="v1",
    plural="deployments",
    mutate=mutate_deployment,
)
STATEFULSET = Integration(
    name="statefulset",
    kind="StatefulSet",
    group="apps",
    version="v1",
    plural="statefulsets",
    mutate=mutate_statefulset,
    # Its pods form one group, which MultiKueue copies pod by pod as any pod group.
    multikueue=multikueue_adapter,
)
