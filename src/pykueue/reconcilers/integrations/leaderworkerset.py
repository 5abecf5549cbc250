"""LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``), queued through its pods, one group per replica.

    LWS ──webhook──▶ leader and worker templates: queue name, "suspended by parent", serving
    replica i's pods (labels name + group-index) ──▶ one pod group "leaderworkerset-<name>-<i>"
        pod sets: "leader" (count 1, the leader template or the worker one) and
                  "worker" (count size - 1, the worker template), read from the LWS spec
    admitted ──▶ each gated pod of the group gets its pod set's flavors and is ungated

As upstream: every replica of a LeaderWorkerSet is admitted (and preempted) as a
whole, its pods kept behind the ``kueue.x-k8s.io/admission`` gate until then. A
LeaderWorkerSet serves until it is deleted, so its groups never finish; the LWS
controller makes a group's pods again after they are evicted. The group's Workload
is owned by the LeaderWorkerSet. No partial admission.
"""

from __future__ import annotations

import copy
from typing import Any

from pykueue.engine import topology_requests as tr
from pykueue.errors import FieldProblem
from pykueue.reconcilers import tas_annotations, topology_ranks
from pykueue.reconcilers.integrations import pod as pods
from pykueue.reconcilers.jobframework import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    Integration,
    queue_name_of,
)
from pykueue.store.base import Manifest

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
PARENT = "leaderworkerset"
LEADER, WORKER = "leader", "worker"


def _template_defaults(lws: Manifest, template: dict[str, Any]) -> None:
    meta = template.setdefault("metadata", {})
    labels = dict(meta.get("labels") or {})
    labels[QUEUE_NAME_LABEL] = queue_name_of(lws)
    priority = ((lws.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL)
    if priority:
        labels[PRIORITY_CLASS_LABEL] = priority
    meta["labels"] = labels
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        pods.SUSPENDED_BY_PARENT_ANNOTATION: PARENT,
        pods.GROUP_SERVING_ANNOTATION: "true",
    }


def mutate(lws: Manifest) -> None:
    """A queued LeaderWorkerSet's leader and worker templates carry its queue and mark its pods."""
    if not queue_name_of(lws):
        return
    spec = lws.setdefault("spec", {}).setdefault("leaderWorkerTemplate", {})
    if spec.get("leaderTemplate") is not None:
        _template_defaults(lws, spec["leaderTemplate"])
    worker = spec.setdefault("workerTemplate", {})
    _template_defaults(lws, worker)
    annotations = worker["metadata"]["annotations"]
    if tr.GROUP_NAME not in annotations:
        # TAS ranks the worker pod set's pods by worker index; the leader is index 0, so the
        # workers' ranks start at 1. A group (podset-group-name) counts the leader in itself.
        annotations[topology_ranks.INDEX_OFFSET_ANNOTATION] = "1"


def belongs(pod: Manifest) -> bool:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        (meta.get("annotations") or {}).get(pods.SUSPENDED_BY_PARENT_ANNOTATION) == PARENT
        and bool(labels.get(NAME_LABEL))
        and GROUP_INDEX_LABEL in labels
    )


def group_name(pod: Manifest) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return f"leaderworkerset-{labels[NAME_LABEL]}-{labels[GROUP_INDEX_LABEL]}"


def pod_set_of(pod: Manifest) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return LEADER if labels.get(WORKER_INDEX_LABEL, "0") == "0" else WORKER


def pod_sets(lws: Manifest) -> list[Manifest]:
    """One replica's pod sets: the leader, then its workers (none when size is 1)."""
    template = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = int(template.get("size") or 1)
    worker = template.get("workerTemplate") or {}
    leader = template.get("leaderTemplate") or worker
    sets: list[Manifest] = [{"name": LEADER, "count": 1, "template": copy.deepcopy(leader)}]
    if size > 1:
        sets.append({"name": WORKER, "count": size - 1, "template": copy.deepcopy(worker)})
    for ps in sets:
        # The workers are ranked by their worker index (TAS), the leader (one pod) is not.
        indexes = {"podIndexLabel": WORKER_INDEX_LABEL} if ps["name"] == WORKER else None
        annotations = ((ps["template"].get("metadata") or {}).get("annotations")) or {}
        request = tas_annotations.topology_request({str(k): str(v) for k, v in annotations.items()}, indexes)
        if request is not None:
            ps["topologyRequest"] = request
    return sets


SIZE_PATH = "spec.leaderWorkerTemplate.size"


def _size(lws: Manifest) -> int:
    return int(((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size") or 1)


def validate(lws: Manifest, old: Manifest | None) -> list[FieldProblem]:
    """Feature gate LWSImmutableGroupSize (on by default, as upstream): a queued LeaderWorkerSet
    keeps its group size, admitted or not. A group's Workload is not rebuilt when the size
    changes, so a larger group would ungate pods its quota never counted; to resize, recreate
    the LeaderWorkerSet (or turn the gate off)."""
    if old is None or not queue_name_of(lws) or _size(lws) == _size(old):
        return []
    return [FieldProblem(SIZE_PATH, f"Invalid value: {_size(lws)}: field is immutable")]


INTEGRATION = Integration(
    name="leaderworkerset.x-k8s.io/leaderworkerset",
    kind="LeaderWorkerSet",
    group="leaderworkerset.x-k8s.io",
    version="v1",
    plural="leaderworkersets",
    mutate=mutate,
    validate=validate,
    validate_gate="LWSImmutableGroupSize",
)
