"""Equality of Kubernetes objects as Kubernetes means it (apimachinery's ``equality.Semantic``).

Two manifests that differ only in how a quantity is written (``cpu: 1``, ``cpu: "1"``,
``cpu: 1000m``) describe the same pods: Go decodes them to the same ``Quantity``, and
upstream compares pod sets, templates and requests with semantic equality, which compares
quantities by value. Our manifests are plain JSON, where those are three different values; so
every comparison of pod sets, templates or resource lists goes through `equal`.

As apimachinery's semantic equality, a missing field, ``null`` and an empty list or map are
the same (Go decodes all of them to the zero value).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Final

from pykueue.api import quantity

# The fields of the core API whose values are ResourceLists (name -> Quantity): a container's
# and a pod's ``resources.requests``/``limits``, a pod's ``overhead``, a claim's
# ``capacity``, a LimitRange's bounds.
QUANTITY_MAPS: Final = frozenset(
    {"requests", "limits", "overhead", "capacity", "max", "min", "default", "defaultRequest"}
)


def equal(a: object, b: object) -> bool:
    """Whether two manifests (or parts of them) are semantically equal."""
    return _equal(a, b, resource_list=False)


def same_resources(a: Mapping[str, object] | None, b: Mapping[str, object] | None) -> bool:
    """Whether two ResourceLists ask for the same amounts (``{"cpu": 1}`` and ``{"cpu": "1000m"}`` do)."""
    return _equal(a, b, resource_list=True)


def canonical_resources(resources: Mapping[str, object] | None) -> dict[str, object]:
    """A ResourceList with every quantity in its canonical text, for hashing (``1000m`` -> ``1``)."""
    out: dict[str, object] = {}
    for name, value in (resources or {}).items():
        readable = _value(value) is not None and isinstance(value, str | int | float)
        out[name] = quantity.canonical(value) if readable else value  # type: ignore[arg-type]
    return out


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, Mapping | list | tuple) and not value)


def _scalar(value: object) -> bool:
    return not isinstance(value, Mapping | list | tuple)


def _equal(a: object, b: object, resource_list: bool) -> bool:
    if _empty(a) and _empty(b):
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in set(a) | set(b):
            left, right = a.get(key), b.get(key)
            if resource_list and _scalar(left) and _scalar(right):
                same = _same_quantity(left, right)
            else:
                same = _equal(left, right, isinstance(key, str) and key in QUANTITY_MAPS)
            if not same:
                return False
        return True
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y, False) for x, y in zip(a, b, strict=True))
    return a == b


def _same_quantity(a: object, b: object) -> bool:
    left, right = _value(a), _value(b)
    if left is None or right is None:
        return a == b  # not quantities (a typo the validation names elsewhere): as written
    return left == right


def _value(text: object) -> Fraction | None:
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        return None
    try:
        return quantity.parse_exact(text)
    except (quantity.QuantityError, ValueError, ZeroDivisionError, OverflowError):
        return None
