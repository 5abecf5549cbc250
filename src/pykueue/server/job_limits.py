"""What ``apply`` does to a job's pods under the config's ``limits`` (`pykueue.server.limits`).

    defaults   a container (or init container) of a Job, JobSet or Workload pod template that
               names neither a request nor a limit for a resource of ``defaultRequests`` gets
               that request written into the stored object, as a LimitRange's defaultRequest
               would: without it a pod asks for nothing, so uses no quota however many run
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
from pykueue.errors import FieldProblem, ValidationError
from pykueue.server.limits import Limits

Manifest = dict[str, Any]


def apply_limits(documents: list[Any], limits: Limits) -> None:
    """Fill in default requests, then refuse every job over the pod cap (all at once)."""
    problems: list[FieldProblem] = []
    for doc in documents:
        for pod_spec in _pod_specs(doc.manifest):
            _default_requests(pod_spec, limits.default_requests)
        problem = _over_cap(doc.manifest, limits.max_pods_per_job)
        if problem is not None:
            path, message = problem
            problems.append(FieldProblem(path, message, manifests.object_ref(doc.manifest), doc.source))
    if problems:
        raise ValidationError(problems)


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
