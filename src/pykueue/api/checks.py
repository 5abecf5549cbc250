"""Small reusable checks that the per-kind rules of `validation` are built from.

Each helper mirrors one apimachinery or Kueue validation function (labels, label
selectors, tolerations, taints, conditions, fair-sharing weight, object metadata) and
appends what it finds to a `Problems` collector, under upstream's field path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pykueue.api import quantity
from pykueue.api.core import Taint, Toleration
from pykueue.api.fair_sharing import FairSharing
from pykueue.api.meta import (
    Condition,
    LabelSelector,
    ObjectMeta,
    dns_label_errors,
    dns_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
    shorten,
)
from pykueue.errors import FieldProblem

IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"


class Problems:
    """Collects FieldProblems; paths are written as upstream prints them."""

    def __init__(self) -> None:
        self.items: list[FieldProblem] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldProblem(path, message))

    def extend(self, path: str, messages: Iterable[str]) -> None:
        for message in messages:
            self.add(path, message)


def key_path(base: str, key: str) -> str:
    """A map entry's path, quoted as upstream does: ``metadata.labels[team]``."""
    return f"{base}[{key}]"


def check_labels(labels: dict[str, str], path: str, out: Problems) -> None:
    """metav1 ValidateLabels: keys are qualified names, values valid label values."""
    for key, value in labels.items():
        out.extend(path, (f"key {shorten(key)}: {m}" for m in qualified_name_errors(key)))
        out.extend(key_path(path, key), (f"value {shorten(value)}: {m}" for m in label_value_errors(value)))


def check_annotations(annotations: dict[str, str], path: str, out: Problems) -> None:
    for key in annotations:
        out.extend(path, (f"key {shorten(key)}: {m}" for m in qualified_name_errors(key.lower())))
    if sum(len(k) + len(v) for k, v in annotations.items()) > 256 * 1024:
        out.add(path, "annotations may not be larger than 256 KiB in total")


def check_label_selector(selector: LabelSelector | None, path: str, out: Problems) -> None:
    """metav1 ValidateLabelSelector."""
    if selector is None:
        return
    check_labels(selector.match_labels, f"{path}.matchLabels", out)
    for i, req in enumerate(selector.match_expressions):
        here = f"{path}.matchExpressions[{i}]"
        out.extend(f"{here}.key", qualified_name_errors(req.key))
        if req.operator in ("In", "NotIn") and not req.values:
            out.add(f"{here}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            out.add(f"{here}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        for j, value in enumerate(req.values):
            out.extend(f"{here}.values[{j}]", label_value_errors(value))


def check_tolerations(tolerations: list[Toleration], path: str, out: Problems) -> None:
    """The CEL rules on Kueue's toleration lists, plus the webhook's key check."""
    for i, tol in enumerate(tolerations):
        here = f"{path}[{i}]"
        if tol.key:
            out.extend(f"{here}.key", qualified_name_errors(tol.key))
        elif tol.operator != "Exists":
            out.add(
                f"{here}.operator",
                "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
            )
        if tol.toleration_seconds is not None and tol.effect != "NoExecute":
            out.add(f"{here}.effect", "effect must be 'NoExecute' when 'tolerationSeconds' is set")
        if tol.operator == "Exists" and tol.value:
            out.add(f"{here}.value", "a value must be empty when 'operator' is 'Exists'")


def check_taints(taints: list[Taint], path: str, out: Problems) -> None:
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        here = f"{path}[{i}]"
        out.extend(f"{here}.key", qualified_name_errors(taint.key))
        out.extend(f"{here}.value", label_value_errors(taint.value))
        if (taint.key, taint.effect) in seen:
            out.add(
                here,
                f"duplicate taint {taint.key}:{taint.effect}: taints must be unique by key and effect pair",
            )
        seen.add((taint.key, taint.effect))


def check_conditions(conditions: list[Condition], path: str, out: Problems) -> None:
    """metav1 ValidateConditions (type, reason format) and the list-map key uniqueness."""
    seen: set[str] = set()
    for i, cond in enumerate(conditions):
        here = f"{path}[{i}]"
        out.extend(f"{here}.type", qualified_name_errors(cond.type))
        if cond.type in seen:
            out.add(
                f"{here}.type", f"duplicate value {shorten(cond.type)}: a condition type may appear only once"
            )
        seen.add(cond.type)
        if cond.reason and not _is_reason(cond.reason):
            out.add(
                f"{here}.reason",
                "a condition reason must start with a letter and consist of letters, digits, ',', ':' or '_'",
            )
        if len(cond.message) > 32768:
            out.add(f"{here}.message", "must have at most 32768 bytes")


def _is_reason(text: str) -> bool:
    return len(text) <= 1024 and re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", text) is not None


def unique_names(items: Iterable[Any], path: str, out: Problems, what: str = "name") -> None:
    """A list with ``listType=map`` keyed by name may not repeat a name."""
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = getattr(item, what)
        if name in seen:
            out.add(f"{path}[{i}].{what}", f"duplicate value {shorten(name)}")
        seen.add(name)


def check_fair_sharing(fair_sharing: FairSharing | None, path: str, out: Problems) -> None:
    if fair_sharing is None or fair_sharing.weight is None:
        return
    weight = quantity.parse_exact(fair_sharing.weight)
    if weight < 0:
        out.add(path, f"invalid value {shorten(fair_sharing.weight)}: {NEGATIVE}")
    elif 0 < weight <= quantity.parse_exact("1n"):
        out.add(path, f"invalid value {shorten(fair_sharing.weight)}: when not 0, weight must be > 10e-9")


def check_metadata(
    meta: ObjectMeta, kind: str, namespaced: bool, out: Problems, check_names: bool = True
) -> None:
    if not meta.name and meta.generate_name:
        # The API server names the object: generateName plus five random characters.
        if check_names:
            problems = dns_subdomain_errors(meta.generate_name.rstrip("-.") + "-abcde")
            out.extend(
                "metadata.generateName",
                (f"invalid value {shorten(meta.generate_name)}: {m}" for m in problems),
            )
    elif not meta.name:
        out.add("metadata.name", "name or generateName is required")
    elif check_names:
        rule = dns_label_errors if kind == "Namespace" else dns_subdomain_errors
        out.extend("metadata.name", (f"invalid value {shorten(meta.name)}: {m}" for m in rule(meta.name)))
    if namespaced and meta.namespace and check_names:
        out.extend(
            "metadata.namespace",
            (f"invalid value {shorten(meta.namespace)}: {m}" for m in dns_label_errors(meta.namespace)),
        )
    check_labels(meta.labels, "metadata.labels", out)
    check_annotations(meta.annotations, "metadata.annotations", out)
