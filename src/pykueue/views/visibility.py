"""The visibility API's data: pending workloads of a ClusterQueue or LocalQueue, with positions.

Upstream serves ``visibility.kueue.x-k8s.io/v1beta1`` as an aggregated API:

    GET .../clusterqueues/{name}/pendingworkloads?offset=&limit=
    GET .../namespaces/{ns}/localqueues/{name}/pendingworkloads?offset=&limit=

and answers a ``PendingWorkloadsSummary`` whose ``items`` are ``PendingWorkload``s
(``metadata``, ``priority``, ``localQueueName``, ``positionInClusterQueue``,
``positionInLocalQueue``). We serve the same paths and shape on the controller's
plain HTTP port (v1beta1) and, as upstream, through the API server as an aggregated
API, v1beta2 and v1beta1 (`visibility_api`). The order is the engine's: the active heap in its sort order,
then the inadmissible workloads in the same order (upstream does the same).

Access: ClusterQueue summaries span namespaces and are for cluster readers; a
LocalQueue summary is for anyone allowed in its namespace. Who is who is decided
by an `Authorizer` (a bearer token → the namespaces it may read, or ``None`` for
all); the controller's is built on TokenReview + SubjectAccessReview.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pykueue.engine.state import State
from pykueue.engine.workloads import Workload

GROUP = "visibility.kueue.x-k8s.io"
# Served versions, preferred first (upstream serves both with the same objects).
VERSIONS = ("v1beta2", "v1beta1")
GROUP_VERSION = f"{GROUP}/v1beta1"
DEFAULT_LIMIT = 1000

# (token, namespace or None for a cluster-wide question) -> allowed?
Authorizer = Callable[[str, str | None], Awaitable[bool]]
# "namespace/name" -> its estimated start ({"at", "low", "high", "basis"}) or None.
EstimatedStart = Callable[[str], dict[str, str | None] | None]


def _time(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ordered_pending(state: State, cluster_queue: str) -> list[Workload]:
    """A ClusterQueue's pending workloads in the order they would be tried."""
    queue = state.queues.get(cluster_queue)
    if queue is None:
        return []
    active = sorted(queue.active(), key=queue.sort_key)
    parked = sorted(queue.inadmissible.values(), key=queue.sort_key)
    return [*active, *parked]


def _item(wl: Workload, in_cq: int, in_lq: int, estimated: EstimatedStart | None = None) -> dict[str, Any]:
    # estimatedStart is pykueue's addition to upstream's PendingWorkload (clients ignore unknown fields).
    estimate = estimated(wl.key) if estimated is not None else None
    return {
        "metadata": {
            "name": wl.name,
            "namespace": wl.namespace,
            "creationTimestamp": _time(wl.created),
            **({"uid": wl.uid} if wl.uid else {}),
        },
        "priority": wl.priority,
        "localQueueName": wl.queue_name,
        "positionInClusterQueue": in_cq,
        "positionInLocalQueue": in_lq,
        **({"estimatedStart": estimate} if estimate is not None else {}),
    }


def _summary(items: list[dict[str, Any]], api_version: str) -> dict[str, Any]:
    return {"kind": "PendingWorkloadsSummary", "apiVersion": api_version, "metadata": {}, "items": items}


def _positions(workloads: list[Workload]) -> list[tuple[Workload, int, int]]:
    per_lq: dict[tuple[str, str], int] = {}
    out = []
    for index, wl in enumerate(workloads):
        lq = (wl.namespace, wl.queue_name)
        per_lq[lq] = per_lq.get(lq, -1) + 1
        out.append((wl, index, per_lq[lq]))
    return out


def cluster_queue_summary(
    state: State,
    cluster_queue: str,
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
    estimated: EstimatedStart | None = None,
    api_version: str = GROUP_VERSION,
) -> dict[str, Any] | None:
    """The summary of one ClusterQueue, or None when it does not exist."""
    if cluster_queue not in state.cluster_queues:
        return None
    rows = _positions(ordered_pending(state, cluster_queue))[offset : offset + limit]
    return _summary([_item(*row, estimated) for row in rows], api_version)


def local_queue_summary(
    state: State,
    namespace: str,
    name: str,
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
    estimated: EstimatedStart | None = None,
    api_version: str = GROUP_VERSION,
) -> dict[str, Any] | None:
    """The summary of one LocalQueue (positions in its ClusterQueue too), or None when unknown."""
    lq = state.local_queues.get(f"{namespace}/{name}")
    if lq is None:
        return None
    rows = [
        row
        for row in _positions(ordered_pending(state, lq.cluster_queue))
        if row[0].namespace == namespace and row[0].queue_name == name
    ][offset : offset + limit]
    return _summary([_item(*row, estimated) for row in rows], api_version)
