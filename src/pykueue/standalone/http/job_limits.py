"""What ``apply`` does to a job's pods under the config's ``limits`` (`pykueue.standalone.http.limits`).

    defaults   a container (or init container) of a Job, JobSet or Workload pod template that
               names neither a request nor a limit for a resource of ``defaultRequests`` that
               its ClusterQueue covers gets that request written into the stored object, as a
               LimitRange's defaultRequest would: without it a pod asks for nothing, so uses
               no quota however many run
    pod cap    a Job's parallelism, a JobSet's replicas x parallelism summed over its
               replicated jobs, a Workload's pod set counts summed: at most ``maxPodsPerJob``
               -> 422 naming the field

Both run on every document before anything is stored, the admin's included: the cap is
about what this one machine can run, not about who asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pykueue.api import manifests
from pykueue.api.batch import QUEUE_NAME_LABEL
from pykueue.errors import FieldProblem, NotFound, ValidationError
from pykueue.standalone.http.limits import Limits
from pykueue.store.base import Key

Manifest = dict[str, Any]


async def apply_limits(store: Any, documents: list[Any], limits: Limits) -> None:
    """Fill in default requests, then refuse every job over the pod cap (all at once)."""
    incoming = {Key.of(d.manifest): d.manifest for d in documents}
    covered: dict[tuple[str, str], frozenset[str]] = {}
    problems: list[FieldProblem] = []
    for doc in documents:
        pod_specs = list(_pod_specs(doc.manifest))
        if pod_specs and limits.default_requests:
            queue = _queue_of(doc.manifest)
            if queue not in covered:
                covered[queue] = await _covered(store, incoming, *queue)
            defaults = {n: v for n, v in limits.default_requests.items() if n in covered[queue]}
            for pod_spec in pod_specs:
                _default_requests(pod_spec, defaults)
        problem = _over_cap(doc.manifest, limits.max_pods_per_job)
        if problem is not None:
            path, message = problem
            problems.append(FieldProblem(path, message, manifests.object_ref(doc.manifest), doc.source))
    if problems:
        raise ValidationError(problems)


def _queue_of(obj: Manifest) -> tuple[str, str]:
    """(namespace, LocalQueue name) a job or Workload is submitted to."""
    meta = obj.get("metadata") or {}
    if obj.get("kind") == "Workload":
        name = (obj.get("spec") or {}).get("queueName")
    else:
        name = (meta.get("labels") or {}).get(QUEUE_NAME_LABEL)
    return str(meta.get("namespace") or "default"), str(name or "")


async def _covered(store: Any, incoming: dict[Key, Manifest], namespace: str, queue: str) -> frozenset[str]:
    """The resources the ClusterQueue behind a LocalQueue covers, as this apply leaves them.

    A default only for these: a request for a resource the queue does not cover keeps a
    workload from ever being admitted there (a bare job to a GPU-only queue must still run).
    """
    local = await as_applied(store, incoming, Key("LocalQueue", namespace, queue)) if queue else None
    cq_name = str(((local or {}).get("spec") or {}).get("clusterQueue") or "")
    cq = await as_applied(store, incoming, Key("ClusterQueue", "", cq_name)) if cq_name else None
    groups = ((cq or {}).get("spec") or {}).get("resourceGroups") or []
    return frozenset(str(r) for g in groups if isinstance(g, dict) for r in g.get("coveredResources") or [])


async def as_applied(store: Any, incoming: dict[Key, Manifest], key: Key) -> Manifest | None:
    """``key`` as it will be after this apply: from the same apply, else from the store."""
    if key in incoming:
        return incoming[key]
    try:
        found: Manifest = await store.get(key.kind, key.namespace, key.name)
    except NotFound:
        return None
    return found


def _pod_specs(obj: Manifest) -> Iterator[Manifest]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    kind = obj.get("kind")
    if kind == "Job":
        templates = [spec.get("template")]
    elif kind == "JobSet":
        templates = [
            ((rj.get("template") or {}).get("spec") or {}).get("template")
            for rj in spec.get("replicatedJobs") or []
            if isinstance(rj, dict)
        ]
    elif kind == "Workload":
        templates = [ps.get("template") for ps in spec.get("podSets") or [] if isinstance(ps, dict)]
    else:
        return
    for template in templates:
        pod_spec = (template or {}).get("spec") if isinstance(template, dict) else None
        if isinstance(pod_spec, dict):
            yield pod_spec


def _default_requests(pod_spec: Manifest, defaults: dict[str, str]) -> None:
    if not defaults:
        return
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            resources = container.get("resources")
            if not isinstance(resources, dict):
                resources = container["resources"] = {}
            requests = resources.get("requests") or {}
            limits = resources.get("limits") or {}
            # A limit without a request is the request (Kubernetes' rule): only a resource
            # the container names neither way gets the default.
            missing = {
                name: value for name, value in defaults.items() if name not in requests and name not in limits
            }
            if missing:
                resources["requests"] = {**requests, **missing}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _over_cap(obj: Manifest, cap: int) -> tuple[str, str] | None:
    """(field path, message) when ``obj`` would run more than ``cap`` pods at once."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    kind = obj.get("kind")
    if kind == "Job":
        path, pods, what = "spec.parallelism", _int(spec.get("parallelism"), 1), "pods"
    elif kind == "JobSet":
        pods = 0
        for rj in spec.get("replicatedJobs") or []:
            if isinstance(rj, dict):
                job_spec = (rj.get("template") or {}).get("spec") or {}
                pods += _int(rj.get("replicas"), 1) * _int(job_spec.get("parallelism"), 1)
        path, what = "spec.replicatedJobs", "pods (replicas x parallelism, summed)"
    elif kind == "Workload":
        pod_sets = [ps for ps in spec.get("podSets") or [] if isinstance(ps, dict)]
        path, pods, what = (
            "spec.podSets",
            sum(_int(ps.get("count"), 1) for ps in pod_sets),
            "pods (counts summed)",
        )
    else:
        return None
    if pods <= cap:
        return None
    return (
        path,
        f"{pods} {what} at once is more than this server runs for one job (limits.maxPodsPerJob: {cap})",
    )
