"""Reading kueue.x-k8s.io/v1beta1 manifests as v1beta2, the way upstream's conversion does.

Conversion works on the plain document, before it becomes a model: v1beta1 fields
that were renamed or moved are rewritten to their v1beta2 place, fields v1beta2 no
longer has are dropped as upstream drops them, and the result is then read, defaulted
and validated exactly like a document written in v1beta2. Only what differs between
the versions is listed here; every other field is the same in both.

What changes (upstream apis/kueue/v1beta1/*_conversion.go and the generated code):

* ClusterQueue: ``spec.cohort`` -> ``spec.cohortName``; ``spec.admissionChecks``
  (names) -> ``spec.admissionChecksStrategy.admissionChecks`` (rules on all flavors),
  replacing any strategy also given; ``flavorFungibility`` values ``Borrow`` and
  ``Preempt`` -> ``MayStopSearch``; ``status.pendingWorkloadsStatus`` and
  ``status.fairSharing.admissionFairSharingStatus`` are dropped.
* Cohort: ``status.fairSharing.admissionFairSharingStatus`` is dropped.
* LocalQueue: ``status.flavorUsage`` -> ``status.flavorsUsage``; ``status.flavors``
  is dropped; ``status.fairSharing`` (with its admission fair sharing usage) is kept.
* AdmissionCheck: ``spec.retryDelayMinutes`` is dropped.
* MultiKueueCluster: ``spec.kubeConfig`` and ``spec.clusterProfileRef`` move under
  ``spec.clusterSource`` (a kubeConfig with an empty location is dropped).
* Workload: ``spec.priorityClassSource`` + ``spec.priorityClassName`` ->
  ``spec.priorityClassRef`` (a name without a known source is dropped, as upstream
  does); ``status.accumulatedPastExexcutionTimeSeconds`` (sic) ->
  ``status.accumulatedPastExecutionTimeSeconds``; a topology assignment's
  ``domains`` list -> the compact ``slices`` encoding.

A v1beta1 document that uses a v1beta2-only field name (say ``spec.cohortName``) is
refused as an unknown field, as the v1beta1 schema would refuse it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, Final

from pykueue.errors import FieldProblem

V1BETA1: Final = "kueue.x-k8s.io/v1beta1"
V1BETA2: Final = "kueue.x-k8s.io/v1beta2"

WORKLOAD_PRIORITY_CLASS_SOURCE: Final = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE: Final = "scheduling.k8s.io/priorityclass"

Doc = dict[str, Any]

# Field names that exist only in v1beta2, per kind: (path of the parent, field).
_V1BETA2_ONLY: Final[dict[str, list[tuple[tuple[str, ...], str]]]] = {
    "ClusterQueue": [(("spec",), "cohortName"), (("spec",), "concurrentAdmissionPolicy")],
    "LocalQueue": [(("status",), "flavorsUsage")],
    "MultiKueueCluster": [(("spec",), "clusterSource")],
    "MultiKueueConfig": [(("spec",), "quotaManagement")],
    "Workload": [
        (("spec",), "priorityClassRef"),
        (("spec",), "preemptionGates"),
        (("status",), "accumulatedPastExecutionTimeSeconds"),
        (("status",), "preemptionGates"),
    ],
}


def _child(doc: Doc, *path: str) -> Doc | None:
    node: Any = doc
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if isinstance(node, dict) else None


def _cluster_queue(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is not None:
        if "cohort" in spec:
            spec["cohortName"] = spec.pop("cohort")
        checks = spec.pop("admissionChecks", None)
        if isinstance(checks, list) and checks:
            # Upstream writes this after the automatic copy, so it wins over a strategy
            # given alongside it.
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
        fungibility = spec.get("flavorFungibility")
        if isinstance(fungibility, dict):
            if fungibility.get("whenCanBorrow") == "Borrow":
                fungibility["whenCanBorrow"] = "MayStopSearch"
            if fungibility.get("whenCanPreempt") == "Preempt":
                fungibility["whenCanPreempt"] = "MayStopSearch"
    status = _child(doc, "status")
    if status is not None:
        status.pop("pendingWorkloadsStatus", None)
    _drop_admission_fair_sharing(doc)


def _drop_admission_fair_sharing(doc: Doc) -> None:
    fair_sharing = _child(doc, "status", "fairSharing")
    if fair_sharing is not None:
        fair_sharing.pop("admissionFairSharingStatus", None)


def _local_queue(doc: Doc) -> None:
    status = _child(doc, "status")
    if status is not None:
        if "flavorUsage" in status:
            status["flavorsUsage"] = status.pop("flavorUsage")
        status.pop("flavors", None)


def _admission_check(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is not None:
        spec.pop("retryDelayMinutes", None)


def _multikueue_cluster(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is None:
        return
    source: Doc = {}
    kube_config = spec.pop("kubeConfig", None)
    if isinstance(kube_config, dict) and kube_config.get("location", "") != "":
        source["kubeConfig"] = kube_config
    elif kube_config is not None and not isinstance(kube_config, dict):
        source["kubeConfig"] = kube_config  # let validation report the wrong type
    profile = spec.pop("clusterProfileRef", None)
    if profile is not None:
        source["clusterProfileRef"] = profile
    spec["clusterSource"] = source


def _workload(doc: Doc) -> None:
    spec = _child(doc, "spec")
    if spec is not None:
        source = spec.pop("priorityClassSource", None)
        name = spec.pop("priorityClassName", None)
        if source == WORKLOAD_PRIORITY_CLASS_SOURCE:
            spec["priorityClassRef"] = {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": name or "",
            }
        elif source == POD_PRIORITY_CLASS_SOURCE:
            spec["priorityClassRef"] = {
                "group": "scheduling.k8s.io",
                "kind": "PriorityClass",
                "name": name or "",
            }
    status = _child(doc, "status")
    if status is None:
        return
    if "accumulatedPastExexcutionTimeSeconds" in status:
        status["accumulatedPastExecutionTimeSeconds"] = status.pop("accumulatedPastExexcutionTimeSeconds")
    assignments = _child(doc, "status", "admission")
    for psa in (assignments or {}).get("podSetAssignments") or []:
        if isinstance(psa, dict) and isinstance(psa.get("topologyAssignment"), dict):
            psa["topologyAssignment"] = topology_domains_to_slices(psa["topologyAssignment"])


HOSTNAME_LEVEL: Final = "kubernetes.io/hostname"
# The v1beta2 API's limits: domains in one slice, slices in one assignment.
MAX_DOMAINS_PER_SLICE: Final = 100_000
MAX_SLICES: Final = 1_000


def topology_domains_to_slices(assignment: Doc, by_hostname_prefix: bool = True) -> Doc:
    """v1beta1 ``{levels, domains: [{values, count}]}`` -> v1beta2 ``{levels, slices}``.

    ``by_hostname_prefix`` is feature gate TASAssignmentsEncodingByHostnamePrefix (on by
    default, as upstream). Off, all domains go into one slice. On, when the lowest level is
    the hostname, consecutive hosts that share a reusable ``-``-ended name prefix (one
    that two hosts have) form a slice each, and that encoding is written unless the single
    slice serializes shorter (always, past the single slice's domain limit). In a slice, per
    level, a value shared by every domain is written once (``universal``), otherwise the
    common prefix and suffix are factored out of the per-domain ``roots``; pod counts are
    ``universal`` when all equal. Both encodings decode to the same domains.
    """
    levels = assignment.get("levels")
    domains = assignment.get("domains")
    if not isinstance(levels, list) or not isinstance(domains, list) or "slices" in assignment:
        return assignment  # malformed or already v1beta2: validation reports it
    if not all(isinstance(d, dict) and isinstance(d.get("values"), list) for d in domains):
        return assignment
    single: Doc = {"levels": levels, "slices": [_slice(levels, domains)] if domains else []}
    if not by_hostname_prefix:
        return single
    keys = None
    if len(domains) > 1 and levels and levels[-1] == HOSTNAME_LEVEL:
        keys = _hostname_prefix_keys([_value(d, len(levels) - 1) for d in domains])
    runs = _runs(domains, keys)
    by_prefix: Doc = {
        "levels": levels,
        "slices": [
            _slice(levels, run[i : i + MAX_DOMAINS_PER_SLICE])
            for run in runs
            for i in range(0, len(run), MAX_DOMAINS_PER_SLICE)
        ],
    }
    if len(by_prefix["slices"]) <= 1 or len(domains) > MAX_DOMAINS_PER_SLICE:
        return by_prefix
    # As upstream: the shorter of the two as compact JSON; on a tie, the prefix runs.
    return single if _json_size(single) < _json_size(by_prefix) else by_prefix


def _value(domain: Doc, index: int) -> str:
    values = domain["values"]
    return str(values[index]) if index < len(values) else ""


def _slice(levels: list[Any], domains: list[Doc]) -> Doc:
    values_per_level = [_compact_values([_value(d, index) for d in domains]) for index in range(len(levels))]
    counts = [d.get("count") for d in domains]
    pod_counts: Doc = {"universal": counts[0]} if len(set(map(repr, counts))) == 1 else {"individual": counts}
    return {"domainCount": len(domains), "valuesPerLevel": values_per_level, "podCounts": pod_counts}


def _json_size(doc: Doc) -> int:
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())


def _hostname_prefix_keys(hostnames: list[str]) -> list[str] | None:
    """Each host's run key: its longest ``-``-ended prefix that another host has too, or "".

    The deepest prefixes are tried first; when their runs would need more slices than an
    assignment may have, shallower ones (fewer ``-`` parts), down to one part. None when no
    depth fits: the hosts are then one run.
    """
    ends = [[i + 1 for i in range(len(name) - 1) if name[i] == "-"] for name in hostnames]
    seen: dict[str, int] = {}
    for name, cuts in zip(hostnames, ends, strict=True):
        for cut in cuts:
            seen[name[:cut]] = min(seen.get(name[:cut], 0) + 1, 2)
    for depth in range(max((len(c) for c in ends), default=0), 0, -1):
        keys = []
        for name, cuts in zip(hostnames, ends, strict=True):
            usable = (name[:cut] for cut in reversed(cuts[:depth]))
            keys.append(next((p for p in usable if seen[p] >= 2), ""))
        slices = sum(-(-len(run) // MAX_DOMAINS_PER_SLICE) for run in _runs(hostnames, keys))
        if slices <= MAX_SLICES:
            return keys
    return None


def _runs(items: list[Any], keys: list[str] | None) -> list[list[Any]]:
    """Consecutive items of equal key ([a, a, b, a]: three runs); no keys: one run."""
    if not items:
        return []
    if not keys:
        return [items]
    runs, start = [], 0
    for i in range(1, len(items)):
        if keys[i] != keys[start]:
            runs.append(items[start:i])
            start = i
    runs.append(items[start:])
    return runs


def _compact_values(column: list[str]) -> Doc:
    if all(value == column[0] for value in column):
        return {"universal": column[0]}
    shortest = min(len(value) for value in column)
    prefix = 0
    while prefix < shortest and all(value[prefix] == column[0][prefix] for value in column):
        prefix += 1
    suffix = 0
    while suffix < shortest and all(value[-1 - suffix] == column[0][-1 - suffix] for value in column):
        suffix += 1
    # Where they overlap (["ababa", "aba"]) the suffix keeps its length, as upstream's encoding.
    prefix = min(prefix, shortest - suffix)
    individual: Doc = {}
    if prefix:
        individual["prefix"] = column[0][:prefix]
    if suffix:
        individual["suffix"] = column[0][len(column[0]) - suffix :]
    individual["roots"] = [value[prefix : len(value) - suffix] for value in column]
    return {"individual": individual}


_CONVERTERS: Final[dict[str, Callable[[Doc], None]]] = {
    "ClusterQueue": _cluster_queue,
    "Cohort": _drop_admission_fair_sharing,
    "LocalQueue": _local_queue,
    "AdmissionCheck": _admission_check,
    "MultiKueueCluster": _multikueue_cluster,
    "Workload": _workload,
}


def v1beta1_to_v1beta2(doc: Doc) -> tuple[Doc, list[FieldProblem]]:
    """Convert a v1beta1 document (left untouched) to a new v1beta2 one.

    Returns the converted document and the problems that stop conversion (v1beta2-only
    fields used in v1beta1); the rest of validation happens on the v1beta2 result.
    """
    kind = str(doc.get("kind", ""))
    problems = []
    for parent, name in _V1BETA2_ONLY.get(kind, []):
        node = _child(doc, *parent)
        if node is not None and name in node:
            problems.append(
                FieldProblem(
                    ".".join((*parent, name)),
                    f"unknown field in {V1BETA1} (it is the {V1BETA2} name; set apiVersion: {V1BETA2})",
                )
            )
    out = copy.deepcopy(doc)
    out["apiVersion"] = V1BETA2
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        convert(out)
    return out, problems
