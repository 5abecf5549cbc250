"""Dynamic Resource Allocation: devices a pod asks for through ResourceClaimTemplates, charged as quota.

    pod template ── resourceClaims[].resourceClaimTemplateName ──▶ ResourceClaimTemplate
        spec.spec.devices.requests[].exactly {deviceClassName, count (default 1)}
            ── deviceClassMappings (Configuration.resources) ──▶ quota resource name
    per pod: count of each mapped resource, summed over the pod's claims

As upstream's ResourceClaimTemplate path (device-count mode): the DeviceClass named by
each request is looked up in ``resources.deviceClassMappings`` and charged ``count``
units of the mapped resource per pod. Only ``ExactCount`` allocation is supported;
``All``, a device class with no mapping, and ``firstAvailable`` requests are refused with a
message naming the job, claim and request, and the job gets no Workload until that is
fixed. Claims named directly (``resourceClaimName``, shared between pods) are not charged,
as upstream.

The charge goes into the Workload's pod set template as pod ``overhead`` (which the
engine adds to each pod's requests, as Kubernetes does): the job's own template is not
touched, and the Workload shows what it is charged for.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping

from pykueue.api import quantity
from pykueue.store.base import Manifest

TemplateLookup = Callable[[str, str], Awaitable[Manifest | None]]
"""``await lookup(namespace, name)``: a ResourceClaimTemplate, or None when it does not exist."""


class DeviceRequestError(ValueError):
    """A device request Kueue cannot charge (no mapping, an unsupported allocation mode)."""


class MissingTemplate(LookupError):
    """A pod refers to a ResourceClaimTemplate that does not exist (yet)."""


def _request_charge(request: Manifest, mappings: Mapping[str, str], where: str) -> tuple[str, int]:
    exactly = request.get("exactly")
    if exactly is None:
        if request.get("firstAvailable"):
            raise DeviceRequestError(f"{where}: firstAvailable device requests are not supported")
        exactly = request  # resource.k8s.io/v1beta1 spelling: the fields on the request itself
    device_class = str(exactly.get("deviceClassName") or "")
    mode = str(exactly.get("allocationMode") or "ExactCount")
    if mode != "ExactCount":
        raise DeviceRequestError(f"{where}: allocationMode {mode} is not supported (only ExactCount)")
    resource = mappings.get(device_class)
    if resource is None:
        raise DeviceRequestError(
            f"{where}: DeviceClass {device_class!r} has no entry in the configuration's resources.deviceClassMappings"
        )
    return resource, int(exactly.get("count") or 1)


async def per_pod(
    spec: Manifest, namespace: str, mappings: Mapping[str, str], lookup: TemplateLookup, where: str
) -> dict[str, int]:
    """The devices one pod of this spec is charged for, by quota resource name."""
    charged: dict[str, int] = {}
    for claim in spec.get("resourceClaims") or []:
        name = claim.get("resourceClaimTemplateName")
        if not name:
            continue
        template = await lookup(namespace, str(name))
        if template is None:
            raise MissingTemplate(f"{where}: ResourceClaimTemplate {namespace}/{name} does not exist")
        requests = (((template.get("spec") or {}).get("spec") or {}).get("devices") or {}).get(
            "requests"
        ) or []
        for request in requests:
            resource, count = _request_charge(
                request, mappings, f"{where} claim {claim.get('name')} request {request.get('name')}"
            )
            charged[resource] = charged.get(resource, 0) + count
    return charged


async def charge(
    pod_sets: list[Manifest], namespace: str, mappings: Mapping[str, str], lookup: TemplateLookup, where: str
) -> list[Manifest]:
    """The pod sets with their device charge added to each template's overhead (copies)."""
    out = []
    for pod_set in pod_sets:
        spec = (pod_set.get("template") or {}).get("spec") or {}
        charged = await per_pod(spec, namespace, mappings, lookup, f"{where} pod set {pod_set.get('name')}")
        if not charged:
            out.append(pod_set)
            continue
        updated = copy.deepcopy(pod_set)
        overhead = dict(updated["template"]["spec"].get("overhead") or {})
        for resource, count in charged.items():
            before = quantity.parse(str(overhead[resource])) if resource in overhead else 0
            overhead[resource] = quantity.format_milli(before + count * 1000)
        updated["template"]["spec"]["overhead"] = overhead
        out.append(updated)
    return out
