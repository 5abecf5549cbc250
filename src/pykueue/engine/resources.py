"""Flavor-resource keys and the small arithmetic the engine does on them.

Every quantity is an ``int`` of milli-units (see ``pykueue.api.quantity``),
keyed by ``(flavor, resource)``. A missing key is zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NewType

FlavorName = NewType("FlavorName", str)
ResourceName = NewType("ResourceName", str)
FlavorResource = tuple[str, str]
Quantities = dict[FlavorResource, int]

CPU = "cpu"
PODS = "pods"


def add_into(target: Quantities, delta: Mapping[FlavorResource, int], sign: int = 1) -> None:
    """Add (or with sign=-1 subtract) ``delta`` into ``target`` in place."""
    for key, value in delta.items():
        target[key] = target.get(key, 0) + sign * value


def total(items: Iterable[Mapping[FlavorResource, int]]) -> Quantities:
    """The sum of several quantity maps."""
    result: Quantities = {}
    for item in items:
        add_into(result, item)
    return result


def resource_units(resource: str, milli: int) -> int:
    """Round a request to what Kueue counts: milli-units for CPU, whole units otherwise.

    Upstream counts CPU in milli-cores and every other resource in whole units
    (rounded up), so ``1.5`` GPUs is accounted as 2. We keep milli-units
    everywhere and round here, once, when requests are read.
    """
    if resource == CPU or milli % 1000 == 0:
        return milli
    return -((-milli) // 1000) * 1000
