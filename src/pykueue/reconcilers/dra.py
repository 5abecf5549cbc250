"""Dynamic Resource Allocation: devices a pod asks for through ResourceClaimTemplates, charged as quota.

    pod template ── resourceClaims[].resourceClaimTemplateName ──▶ ResourceClaimTemplate
        spec.spec.devices.requests[].exactly {deviceClassName, count (default 1)}
            ── deviceClassMappings (Configuration.resources) ──▶ quota resource name
    per pod: count of each mapped resource, summed over the pod's claims

As upstream's ResourceClaimTemplate path (device-count mode): the DeviceClass named by
each request is looked up in ``resources.deviceClassMappings`` and charged ``count``
units of the mapped resource per pod. What cannot be charged so is refused with a
message naming the Workload's field, as upstream's are: ``firstAvailable``,
``adminAccess``, ``allocationMode: All``, a DeviceClass with no mapping, and, beyond
upstream's device-count path, a class mapped with ``sources`` (counter- or
capacity-based quota, which needs the devices' ResourceSlices and CEL selectors) and a
request with ``capacity.requests`` (consumable capacity). The job still gets its
Workload, marked Misconfigured with that message (`pykueue.engine.intake.DEVICE_PROBLEM_ANNOTATION`), as
upstream's workload controller marks it; it is built anew once the charge changes (a
mapping added and the controller restarted). A template that does not exist yet holds
the Workload back until it does. A claim named directly (``resourceClaimName``, shared
between pods) is refused too, as upstream refuses it.

The charge goes into the Workload's pod set template as pod ``overhead`` (which the
engine adds to each pod's requests, as Kubernetes does): the job's own template is not
touched, and the Workload shows what it is charged for.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping

from pykueue.api import quantity
from pykueue.api.configuration import DeviceClassMapping
from pykueue.store.base import Manifest

TemplateLookup = Callable[[str, str], Awaitable[Manifest | None]]
"""``await lookup(namespace, name)``: a ResourceClaimTemplate, or None when it does not exist."""

# What each kind of deviceClassMappings source would charge, for the message that refuses it.
SOURCE_KINDS = {
    "counter": "counter-based quota (partitionable devices)",
    "capacity": "capacity-based quota (consumable capacity)",
}


class DeviceRequestError(ValueError):
    """A device request Kueue cannot charge (no mapping, an unsupported allocation mode or field)."""


class MissingTemplate(LookupError):
    """A pod refers to a ResourceClaimTemplate that does not exist (yet)."""


def device_classes(mappings: Iterable[DeviceClassMapping]) -> dict[str, str]:
    """DeviceClass name -> the quota resource its devices are charged as."""
    return {dc: mapping.name for mapping in mappings for dc in mapping.device_class_names}


def unsupported_sources(mappings: Iterable[DeviceClassMapping]) -> dict[str, str]:
    """DeviceClass name -> the configuration field of a source pykueue cannot charge.

    Upstream charges a mapping with ``sources`` by the counters or capacity the devices of
    its ResourceSlices publish, chosen by CEL device selectors; pykueue reads neither, so a
    request of such a class is refused (its Workload is Misconfigured) rather than charged
    as a device count, which would be a different quota than the admin wrote.
    """
    out: dict[str, str] = {}
    for i, mapping in enumerate(mappings):
        for j, source in enumerate(mapping.sources):
            kind = next((k for k in SOURCE_KINDS if k in source), next(iter(source), "?"))
            what = SOURCE_KINDS.get(kind, "an unknown source kind")
            field = f"resources.deviceClassMappings[{i}].sources[{j}].{kind}"
            for dc in mapping.device_class_names:
                out.setdefault(dc, f"{field} ({what})")
    return out


def _request_charge(
    request: Manifest, mappings: Mapping[str, str], sources: Mapping[str, str], where: str
) -> tuple[str, int]:
    """(quota resource, devices per pod) of one device request; `DeviceRequestError` naming
    the field (below ``where``) when it cannot be charged."""
    exactly = request.get("exactly")
    path = f"{where}.exactly"
    if exactly is None:
        if request.get("firstAvailable"):
            raise DeviceRequestError(
                f"{where}.firstAvailable: FirstAvailable device selection is not supported"
            )
        exactly, path = request, where  # resource.k8s.io/v1beta1 spelling: the fields on the request itself
    if exactly.get("adminAccess"):
        raise DeviceRequestError(f"{path}.adminAccess: AdminAccess is not supported")
    mode = str(exactly.get("allocationMode") or "ExactCount")
    if mode != "ExactCount":
        raise DeviceRequestError(
            f"{path}.allocationMode: AllocationMode {mode!r} is not supported (only ExactCount)"
        )
    device_class = str(exactly.get("deviceClassName") or "")
    resource = mappings.get(device_class)
    if resource is None:
        raise DeviceRequestError(
            f"{path}.deviceClassName: DeviceClass {device_class} is not mapped in DRA configuration "
            "(resources.deviceClassMappings)"
        )
    if device_class in sources:
        raise DeviceRequestError(
            f"{path}.deviceClassName: DeviceClass {device_class} is mapped with {sources[device_class]}, "
            "which pykueue does not support"
        )
    if (exactly.get("capacity") or {}).get("requests"):
        raise DeviceRequestError(
            f"{path}.capacity.requests: consumable capacity requests are not supported by pykueue "
            "(they would be charged as whole devices)"
        )
    return resource, int(exactly.get("count") or 1)


async def per_pod(
    spec: Manifest,
    namespace: str,
    mappings: Mapping[str, str],
    lookup: TemplateLookup,
    where: str,
    sources: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """The devices one pod of this spec is charged for, by quota resource name.

    ``where`` is the path of ``spec`` in the Workload; a refusal names the claim's field
    below it and the template, as upstream's messages do.
    """
    charged: dict[str, int] = {}
    for j, claim in enumerate(spec.get("resourceClaims") or []):
        if claim.get("resourceClaimName"):
            # A claim shared between pods: upstream refuses it too (nothing says which pods pay).
            raise DeviceRequestError(
                f"{where}.resourceClaims[{j}].resourceClaimName: a ResourceClaim named directly is not "
                "supported (only ResourceClaimTemplates are charged)"
            )
        name = claim.get("resourceClaimTemplateName")
        if not name:
            continue
        template = await lookup(namespace, str(name))
        if template is None:
            raise MissingTemplate(f"{where}: ResourceClaimTemplate {namespace}/{name} does not exist")
        requests = (((template.get("spec") or {}).get("spec") or {}).get("devices") or {}).get(
            "requests"
        ) or []
        for k, request in enumerate(requests):
            try:
                resource, count = _request_charge(
                    request, mappings, sources or {}, f"spec.devices.requests[{k}]"
                )
            except DeviceRequestError as exc:
                raise DeviceRequestError(
                    f"{where}.resourceClaims[{j}]: ResourceClaimTemplate {name}: {exc}"
                ) from None
            charged[resource] = charged.get(resource, 0) + count
    return charged


async def charge(
    pod_sets: list[Manifest],
    namespace: str,
    mappings: Mapping[str, str],
    lookup: TemplateLookup,
    where: str,
    sources: Mapping[str, str] | None = None,
) -> list[Manifest]:
    """The pod sets with their device charge added to each template's overhead (copies).

    A `DeviceRequestError` names the Workload's field (``spec.podSets[0].template.spec...``);
    ``where`` (the job) only prefixes a `MissingTemplate`, which is logged, not shown.
    """
    out = []
    for index, pod_set in enumerate(pod_sets):
        spec = (pod_set.get("template") or {}).get("spec") or {}
        try:
            charged = await per_pod(
                spec, namespace, mappings, lookup, f"spec.podSets[{index}].template.spec", sources
            )
        except MissingTemplate as exc:
            raise MissingTemplate(f"{where}: {exc}") from None
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
