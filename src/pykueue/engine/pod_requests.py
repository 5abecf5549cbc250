"""What one pod of a pod set asks for, and whether a Kubernetes cluster would accept it.

Kueue computes a pod's requests the way kubelet and kube-scheduler do, after
the same adjustments the API server makes (upstream's `AdjustResources` and
`resourcehelpers.PodRequests`):

    1. LimitRange defaults: a container without a limit (request) gets the
       ``default`` (``defaultRequest``) of the namespace's ``type: Container``
       limits; pod-level resources, when the pod has them, those of ``type: Pod``;
    2. a limit without a request is also the request;
    3. requests: the sum of the containers and the sidecars (init containers with
       ``restartPolicy: Always``), at least the largest init container plus the sidecars
       started before it;
    4. pod-level resources (``spec.resources``, KEP 2837): for the resources they
       name (cpu, memory, hugepages-*), the pod-level request replaces the sum;
    5. the pod overhead is added.

Validation is upstream's too, with its messages: a request above its limit
(containers, init containers, pod level) makes the workload invalid ("resources
validation failed: ..."); otherwise a request outside the LimitRanges' min/max,
per container and for the whole pod ("resources didn't satisfy LimitRange
constraints: ..."). Several LimitRanges in a namespace count as one: the lowest
max, the highest min, the first default.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pykueue.api import quantity
from pykueue.api.core import PodSpec, ResourceRequirements
from pykueue.engine import specs
from pykueue.engine.resources import resource_units

REQUEST_ABOVE_LIMIT = "requests must not exceed its limits"
ABOVE_MAX = "requests must not be above the limitRange max"
BELOW_MIN = "requests must not be below the limitRange min"
INVALID_RESOURCES = "resources validation failed"
OUTSIDE_LIMIT_RANGE = "resources didn't satisfy LimitRange constraints"

Resources = dict[str, int]  # milli-units


@dataclass(slots=True)
class Limits:
    """The namespace's LimitRanges of one type, summarized as upstream does."""

    max: Resources = field(default_factory=dict)
    min: Resources = field(default_factory=dict)
    default: Resources = field(default_factory=dict)
    default_request: Resources = field(default_factory=dict)


def summarize(items: Iterable[specs.LimitRangeItem]) -> dict[str, Limits]:
    """Container and Pod limits of every LimitRange: lowest max, highest min, first default."""
    result: dict[str, Limits] = {}
    for item in items:
        limits = result.setdefault(item.kind, Limits())
        for res, value in item.max.items():
            limits.max[res] = min(value, limits.max.get(res, value))
        for res, value in item.min.items():
            limits.min[res] = max(value, limits.min.get(res, value))
        for res, value in item.default.items():
            limits.default.setdefault(res, value)
        for res, value in item.default_request.items():
            limits.default_request.setdefault(res, value)
    return result


def supported_at_pod_level(resource: str) -> bool:
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


@dataclass(slots=True)
class PodRequests:
    """One pod template's per-pod requests, and upstream's findings about it."""

    requests: Resources  # engine units (milli for cpu, whole units rounded up otherwise)
    invalid: list[str]  # requests above limits
    outside_limit_range: list[str]


def _parse(values: Mapping[str, str]) -> Resources:
    return {res: quantity.parse(text) for res, text in values.items()}


def _adjusted(res: ResourceRequirements | None, defaults: Limits | None) -> tuple[Resources, Resources]:
    """(requests, limits) after LimitRange defaults, a limit standing in for a missing request."""
    if res is None:
        return {}, {}
    requests, limits = _parse(res.requests), _parse(res.limits)
    if defaults is not None:
        for name, value in defaults.default.items():
            limits.setdefault(name, value)
        for name, value in defaults.default_request.items():
            requests.setdefault(name, value)
    for name, value in limits.items():
        requests.setdefault(name, value)
    return requests, limits


def _greater(values: Resources, bounds: Resources) -> list[str]:
    """Resources of ``values`` above ``bounds`` (compared as upstream does, in its units)."""
    return sorted(
        name
        for name, value in values.items()
        if name in bounds and resource_units(name, value) > resource_units(name, bounds[name])
    )


def _invalid(path: str, names: list[str], detail: str) -> str:
    """A field error as Kubernetes prints it: ``path: Invalid value: ["cpu"]: detail``."""
    value = json.dumps(names, separators=(",", ":"))  # Go's encoding: no spaces
    return f"{path}: Invalid value: {value}: {detail}"


def compute(
    spec: PodSpec, path: str, limit_items: list[specs.LimitRangeItem], pod_level: bool = True
) -> PodRequests:
    """The requests of one pod of ``spec``; ``path`` names the pod spec in messages."""
    summary = summarize(limit_items)
    container_defaults = summary.get("Container")
    pod_limits = summary.get("Pod")
    invalid: list[str] = []
    outside: list[str] = []
    checked: list[tuple[str, Resources, Resources]] = []
    adjusted: dict[str, list[tuple[Resources, bool]]] = {"initContainers": [], "containers": []}
    for kind, containers in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for index, container in enumerate(containers):
            requests, limits = _adjusted(container.resources, container_defaults)
            checked.append((f"{path}.{kind}[{index}]", requests, limits))
            adjusted[kind].append((requests, container.restart_policy == "Always"))
    total = _containers_total(adjusted["initContainers"], [r for r, _ in adjusted["containers"]])
    for where, requests, limits in checked:
        above = _greater(requests, limits)
        if above:
            invalid.append(_invalid(where, above, REQUEST_ABOVE_LIMIT))
    pod_resources = spec.resources if pod_level else None
    if pod_resources is not None:
        requests, limits = _adjusted(pod_resources, pod_limits)
        above = _greater(requests, limits)
        if above:
            invalid.append(_invalid(f"{path}.resources", above, REQUEST_ABOVE_LIMIT))
        # Pod-level requests replace the containers' sum for the resources they name.
        total.update({name: value for name, value in requests.items() if supported_at_pod_level(name)})
    for name, value in _parse(spec.overhead).items():
        total[name] = total.get(name, 0) + value
    if container_defaults is not None:
        for where, requests, limits in checked:
            largest = {n: max(requests.get(n, 0), limits.get(n, 0)) for n in {*requests, *limits}}
            smallest = {n: min(v for v in (requests.get(n), limits.get(n)) if v is not None) for n in largest}
            above = _greater(largest, container_defaults.max)
            if above:
                outside.append(_invalid(where, above, ABOVE_MAX))
            below = _greater(container_defaults.min, smallest)
            if below:
                outside.append(_invalid(where, below, BELOW_MIN))
    if pod_limits is not None:
        above = _greater(total, pod_limits.max)
        if above:
            outside.append(_invalid(path, above, ABOVE_MAX))
        below = _greater(pod_limits.min, total)
        if below:
            outside.append(_invalid(path, below, BELOW_MIN))
    return PodRequests({n: resource_units(n, v) for n, v in total.items()}, invalid, outside)


def _containers_total(init: list[tuple[Resources, bool]], containers: list[Resources]) -> Resources:
    """A pod's requests from its containers, as kube-scheduler sums them.

    The containers run together: their sum. A sidecar (an init container that restarts,
    ``restartPolicy: Always``) starts before them and keeps running beside them, so it adds
    to that sum; it also runs beside every init container after it. An ordinary init
    container runs alone (with the sidecars started before it), so the pod needs at least
    the largest of those.
    """
    total: Resources = {}
    for requests in containers:
        _add(total, requests)
    sidecars: Resources = {}
    largest_init: Resources = {}
    for requests, sidecar in init:
        if sidecar:
            _add(total, requests)
            _add(sidecars, requests)
            during = dict(sidecars)
        else:
            during = dict(requests)
            _add(during, sidecars)
        for name, value in during.items():
            largest_init[name] = max(largest_init.get(name, 0), value)
    for name, value in largest_init.items():
        total[name] = max(total.get(name, 0), value)
    return total


def _add(into: Resources, values: Resources) -> None:
    for name, value in values.items():
        into[name] = into.get(name, 0) + value


def aggregate(errors: list[str]) -> str:
    """Kubernetes' error aggregate: one message as is, several in brackets, duplicates once."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def problem(pods: list[PodRequests]) -> str:
    """The workload's first failed validation, in upstream's words ("" when valid)."""
    invalid = [error for pod in pods for error in pod.invalid]
    if invalid:
        return f"{INVALID_RESOURCES}: {aggregate(invalid)}"
    outside = [error for pod in pods for error in pod.outside_limit_range]
    if outside:
        return f"{OUTSIDE_LIMIT_RANGE}: {aggregate(outside)}"
    return ""
