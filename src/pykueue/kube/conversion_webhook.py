"""The CRD conversion webhook: kueue.x-k8s.io v1beta1 <-> v1beta2 for the API server.

Objects are stored as v1beta2. A client that reads or writes v1beta1 makes the API
server send a ``ConversionReview`` (``apiextensions.k8s.io/v1``) to ``/convert``:
a list of objects and the ``desiredAPIVersion``. Up-conversion is the API layer's
`pykueue.api.conversion.v1beta1_to_v1beta2`; down-conversion, which only this
webhook needs, is here, mirroring it field by field:

* ClusterQueue ``spec.cohortName`` -> ``spec.cohort``;
* LocalQueue ``status.flavorsUsage`` -> ``status.flavorUsage``;
* MultiKueueCluster ``spec.clusterSource.{kubeConfig,clusterProfileRef}`` -> ``spec.*``;
* Workload ``spec.priorityClassRef`` -> ``spec.priorityClassSource`` + ``priorityClassName``,
  ``status.accumulatedPastExecutionTimeSeconds`` -> the misspelt v1beta1 name, and a
  topology assignment's ``slices`` expanded back into ``domains``;
* fields v1beta1 does not have (ClusterQueue ``concurrentAdmissionPolicy``,
  MultiKueueConfig ``quotaManagement``, Workload ``preemptionGates``) are dropped.

The API server requires that conversion leave ``metadata`` alone except labels and
annotations; nothing here touches it. A document in the wrong version, or one whose
conversion hits a v1beta2-only field in v1beta1, fails the whole review with a message
(the API server then fails the request), never a half-converted list.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

from pykueue.api import conversion

Doc = dict[str, Any]

_SOURCES: Final = {
    "kueue.x-k8s.io": conversion.WORKLOAD_PRIORITY_CLASS_SOURCE,
    "scheduling.k8s.io": conversion.POD_PRIORITY_CLASS_SOURCE,
}


def _child(doc: Doc, *path: str) -> Doc | None:
    node: Any = doc
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _cluster_queue(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is not None:
        if "cohortName" in spec:
            spec["cohort"] = spec.pop("cohortName")
        spec.pop("concurrentAdmissionPolicy", None)


def _local_queue(doc: Doc) -> None:
    status = _child(doc, "status")
    if status is not None and "flavorsUsage" in status:
        status["flavorUsage"] = status.pop("flavorsUsage")


def _multikueue_cluster(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is None:
        return
    source = spec.pop("clusterSource", None)
    if isinstance(source, dict):
        for name in ("kubeConfig", "clusterProfileRef"):
            if name in source:
                spec[name] = source[name]


def _multikueue_config(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is not None:
        spec.pop("quotaManagement", None)


def _workload(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is not None:
        spec.pop("preemptionGates", None)
        ref = spec.pop("priorityClassRef", None)
        if isinstance(ref, dict) and ref.get("group") in _SOURCES:
            spec["priorityClassSource"] = _SOURCES[ref["group"]]
            spec["priorityClassName"] = ref.get("name", "")
    status = _child(doc, "status")
    if status is None:
        return
    status.pop("preemptionGates", None)
    if "accumulatedPastExecutionTimeSeconds" in status:
        status["accumulatedPastExexcutionTimeSeconds"] = status.pop("accumulatedPastExecutionTimeSeconds")
    for psa in (_child(doc, "status", "admission") or {}).get("podSetAssignments") or []:
        if isinstance(psa, dict) and isinstance(psa.get("topologyAssignment"), dict):
            psa["topologyAssignment"] = topology_slices_to_domains(psa["topologyAssignment"])


def topology_slices_to_domains(assignment: Doc) -> Doc:
    """v1beta2 ``{levels, slices}`` -> v1beta1 ``{levels, domains: [{values, count}]}``."""
    levels = assignment.get("levels")
    slices = assignment.get("slices")
    if not isinstance(levels, list) or not isinstance(slices, list):
        return assignment
    domains: list[Doc] = []
    for piece in slices:
        count = int(piece.get("domainCount", 0))
        columns = [_expand(values, count) for values in piece.get("valuesPerLevel") or []]
        counts = piece.get("podCounts") or {}
        per_domain = counts["individual"] if "individual" in counts else [counts.get("universal", 0)] * count
        for index in range(count):
            domains.append({"values": [column[index] for column in columns], "count": per_domain[index]})
    return {"levels": levels, "domains": domains}


def _expand(values: Doc, count: int) -> list[str]:
    if "universal" in values:
        return [str(values["universal"])] * count
    individual = values.get("individual") or {}
    prefix, suffix = individual.get("prefix", ""), individual.get("suffix", "")
    return [f"{prefix}{root}{suffix}" for root in individual.get("roots") or []]


_DOWN: Final[dict[str, Callable[[Doc], None]]] = {
    "ClusterQueue": _cluster_queue,
    "LocalQueue": _local_queue,
    "MultiKueueCluster": _multikueue_cluster,
    "MultiKueueConfig": _multikueue_config,
    "Workload": _workload,
}


def v1beta2_to_v1beta1(doc: Doc) -> Doc:
    """A new v1beta1 document for a v1beta2 one (which is left untouched)."""
    out = copy.deepcopy(doc)
    out["apiVersion"] = conversion.V1BETA1
    down = _DOWN.get(str(doc.get("kind", "")))
    if down is not None:
        down(out)
    return out


class ConversionError(ValueError):
    """An object that cannot be converted; the review fails with this message."""


def convert(doc: Doc, desired: str) -> Doc:
    """`doc` in the `desired` apiVersion (v1beta1 or v1beta2 of kueue.x-k8s.io)."""
    current = doc.get("apiVersion")
    if current == desired:
        return doc
    name = f"{doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"
    if current == conversion.V1BETA1 and desired == conversion.V1BETA2:
        converted, problems = conversion.v1beta1_to_v1beta2(doc)
        if problems:
            raise ConversionError(f"{name}: " + "; ".join(f"{p.path}: {p.message}" for p in problems))
        return converted
    if current == conversion.V1BETA2 and desired == conversion.V1BETA1:
        return v1beta2_to_v1beta1(doc)
    raise ConversionError(f"{name}: cannot convert {current} to {desired}")


def review(body: Doc) -> Doc:
    """Answer one ``ConversionReview`` (apiextensions.k8s.io/v1)."""
    request = body.get("request") or {}
    uid = request.get("uid", "")
    desired = str(request.get("desiredAPIVersion", ""))
    try:
        converted = [convert(obj, desired) for obj in request.get("objects") or []]
    except ConversionError as exc:
        response: Doc = {"uid": uid, "result": {"status": "Failure", "message": str(exc)}}
    else:
        response = {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}
    return {
        "apiVersion": body.get("apiVersion", "apiextensions.k8s.io/v1"),
        "kind": "ConversionReview",
        "response": response,
    }
