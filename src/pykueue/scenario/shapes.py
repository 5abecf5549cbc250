"""The shapes of a scenario's `expect` blocks, and the topology keys pykueue refuses.

A scenario file is an executable specification: a key the runner does not know
must never be skipped quietly, or an expectation would pass without being
checked. Every mapping of an `expect` block is checked against the keys
FORMAT.md defines, and every error names the file and the path inside it.

Topology-aware scheduling is implemented (docs/topology.md), a pod set's
``delayedTopologyRequest`` (topology assigned after a ProvisioningRequest) included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pykueue.api.conversion import topology_domains_to_slices
from pykueue.errors import ScenarioError

CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")
UNSUPPORTED = "not supported by this runner yet"


def _refuse(where: str, key: str) -> ScenarioError:
    return ScenarioError(f"{where}: {key}: {UNSUPPORTED}")


def _get(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc


def topology_domains_as_slices(doc: Any) -> Any:
    """A Workload's input topology assignments may be written as FORMAT.md writes expected ones
    (``levels`` and ``domains``) under either API version; v1beta2 stores them as slices."""
    if not isinstance(doc, Mapping) or doc.get("kind") != "Workload":
        return doc
    assignments = _get(doc, "status", "admission", "podSetAssignments")
    if not isinstance(assignments, list) or not any(
        isinstance(a, Mapping) and isinstance(a.get("topologyAssignment"), Mapping) for a in assignments
    ):
        return doc
    copied = dict(doc)
    status = dict(copied["status"])
    admission = dict(status["admission"])
    admission["podSetAssignments"] = [
        {**a, "topologyAssignment": topology_domains_to_slices(dict(a["topologyAssignment"]))}
        if isinstance(a, Mapping) and isinstance(a.get("topologyAssignment"), Mapping)
        else a
        for a in assignments
    ]
    status["admission"] = admission
    copied["status"] = status
    return copied


# ------------------------------------------------------------------ expect

EXPECT_KEYS = frozenset(
    {
        "admitted",
        "preempted",
        "pending",
        "inadmissible",
        "finished",
        "conditions",
        "clusterQueueUsage",
        "contains",
        "admissionChecks",
        "requeueState",
        "deactivated",
    }
)
CONTAINS_KEYS = frozenset({"admitted", "notAdmitted", "preempted", "pending", "finished"})


def _mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: must be a mapping")
    return value


def _keys(value: Mapping[Any, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key(s): {', '.join(unknown)} (expected {', '.join(sorted(allowed))})"
        )


def _names(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"{where}: must be a list of namespace/name")


def check_expect(expect: Any, where: str) -> None:
    """Raise on any key or shape of an `expect` block that FORMAT.md does not define."""
    expect = _mapping(expect, where)
    _keys(expect, EXPECT_KEYS, where)
    if "admitted" in expect:
        _admitted(expect["admitted"], f"{where}.admitted")
    for key in ("preempted", "finished", "deactivated"):
        if key in expect:
            _names(expect[key], f"{where}.{key}")
    for key in ("pending", "inadmissible"):
        for cq, keys in _mapping(expect.get(key), f"{where}.{key}").items():
            _names(keys, f"{where}.{key}.{cq}")
    for wl, conds in _mapping(expect.get("conditions"), f"{where}.conditions").items():
        for kind, spec in _mapping(conds, f"{where}.conditions[{wl}]").items():
            if isinstance(spec, Mapping):
                _keys(spec, frozenset({"status", "reason", "message"}), f"{where}.conditions[{wl}].{kind}")
    for cq, flavors in _mapping(expect.get("clusterQueueUsage"), f"{where}.clusterQueueUsage").items():
        for flavor, usage in _mapping(flavors, f"{where}.clusterQueueUsage.{cq}").items():
            _mapping(usage, f"{where}.clusterQueueUsage.{cq}.{flavor}")
    for wl, checks in _mapping(expect.get("admissionChecks"), f"{where}.admissionChecks").items():
        for name, state in _mapping(checks, f"{where}.admissionChecks[{wl}]").items():
            if state not in CHECK_STATES:
                raise ScenarioError(
                    f"{where}.admissionChecks[{wl}].{name}: {state!r} is not one of {', '.join(CHECK_STATES)}"
                )
    for wl, state in _mapping(expect.get("requeueState"), f"{where}.requeueState").items():
        here = f"{where}.requeueState[{wl}]"
        _keys(_mapping(state, here), frozenset({"count", "requeueAt"}), here)
    contains = _mapping(expect.get("contains"), f"{where}.contains")
    _keys(contains, CONTAINS_KEYS, f"{where}.contains")
    if "admitted" in contains:
        _admitted(contains["admitted"], f"{where}.contains.admitted")
    for key in ("notAdmitted", "preempted", "pending", "finished"):
        if key in contains:
            _names(contains[key], f"{where}.contains.{key}")


def _admitted(value: Any, where: str) -> None:
    for wl, desc in _mapping(value, where).items():
        here = f"{where}[{wl}]"
        desc = _mapping(desc, here)
        _keys(desc, frozenset({"clusterQueue", "podSets"}), here)
        for name, pod_set in _mapping(desc.get("podSets"), f"{here}.podSets").items():
            at = f"{here}.podSets.{name}"
            pod_set = _mapping(pod_set, at)
            _keys(
                pod_set,
                frozenset(
                    {"count", "flavors", "resourceUsage", "topologyAssignment", "delayedTopologyRequest"}
                ),
                at,
            )
            if "topologyAssignment" in pod_set:
                _topology(pod_set["topologyAssignment"], f"{at}.topologyAssignment")


def _topology(value: Any, where: str) -> None:
    value = _mapping(value, where)
    _keys(value, frozenset({"levels", "domains"}), where)
    levels = value.get("levels")
    if not isinstance(levels, list) or not all(isinstance(level, str) for level in levels):
        raise ScenarioError(f"{where}.levels: must be a list of node labels")
    domains = value.get("domains")
    if not isinstance(domains, list):
        raise ScenarioError(f"{where}.domains: must be a list of {{values, count}}")
    for i, domain in enumerate(domains):
        here = f"{where}.domains[{i}]"
        domain = _mapping(domain, here)
        _keys(domain, frozenset({"values", "count"}), here)
        if not isinstance(domain.get("values"), list) or len(domain["values"]) != len(levels):
            raise ScenarioError(f"{here}.values: must be a list with one value per level")
        if not isinstance(domain.get("count"), int) or domain["count"] < 1:
            raise ScenarioError(f"{here}.count: must be a positive integer")
