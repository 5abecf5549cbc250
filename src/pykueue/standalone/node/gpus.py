"""Which GPUs a pod asks for, and from which flavor's pool they come.

A pod asking ``nvidia.com/gpu: N`` gets N devices of the pool of the flavor its
pod set was admitted with; the executor takes them from a `machine.DeviceTable`.
A gang's pods start together, so their needs are summed per flavor first.
"""

from __future__ import annotations

from pykueue.standalone.node.job_spec import PodSlot
from pykueue.standalone.node.machine import GPU_RESOURCE
from pykueue.store.base import Manifest


def gpu_count(container: Manifest) -> int:
    resources = container.get("resources") or {}
    value = (resources.get("requests") or {}).get(GPU_RESOURCE) or (resources.get("limits") or {}).get(
        GPU_RESOURCE
    )
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def admitted_flavors(workload: Manifest | None, pod_set: str | None = None) -> dict[str, str]:
    """resource -> flavor of a pod set's admission (the first when unnamed): where its GPUs come from."""
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    assignments = admission.get("podSetAssignments") or [{}]
    chosen = next((a for a in assignments if a.get("name") == pod_set), assignments[0])
    return dict(chosen.get("flavors") or {})


def gang_needs(slots: list[PodSlot], workload: Manifest | None) -> tuple[dict[str, int], dict[int, str]]:
    """GPUs the pods ``slots`` need at once, by the flavor their pod set was admitted with
    ("" when it names none), and each GPU pod's flavor."""
    needs: dict[str, int] = {}
    flavor_of: dict[int, str] = {}
    for slot in slots:
        gpus = gpu_count(slot.container)
        if gpus:
            flavor = admitted_flavors(workload, slot.pod_set).get(GPU_RESOURCE) or ""
            flavor_of[slot.index] = flavor
            needs[flavor] = needs.get(flavor, 0) + gpus
    return needs, flavor_of
