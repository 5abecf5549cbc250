"""Upstream Kueue's scheduler-performance generator files, built exactly as upstream builds them.

The file (test/performance/scheduler/configs/*/generator.yaml upstream) is a
product: cohort sets x queue sets x workload sets. Upstream's generator
(runner/generator/generator.go) turns it into objects this way, and so do we:

* one ResourceFlavor, ``rf`` unless ``resourceFlavor.name`` says otherwise;
* cohort ``<cohortClass>-<i>`` for i < count (Cohorts are implicit: no Cohort object);
* in it, for queue set q and index j < count, ClusterQueue ``<cqClass>-<q>-<j>-<cohort>``,
  labelled with its class, BestEffortFIFO, an empty namespace selector, one
  resource group with ``cpu`` of the flavor at ``nominalQuota`` / ``borrowingLimit``,
  and preemption ``reclaimWithinCohort`` / ``withinClusterQueue``; a Namespace
  and a LocalQueue of the same name point at it;
* for workload set s of that queue, ``count`` rounds of its ``workloads``
  templates; each creation waits ``creationIntervalMs`` first, so the k-th
  workload of the set (from 0, rounds times templates) is created at
  (k + 1) x interval. Workload sets run concurrently, each from time 0. The
  workload ``<class>-<s>-<round>-<template>`` has one pod set ``main`` of
  ``podCount`` pods (default 1) requesting ``request`` CPU, priority ``priority``,
  and runs ``runtimeMs`` once admitted.

With ``topology`` (upstream's TAS shape) it also builds what upstream's
topology generator creates: a Topology of the levels' node labels and every
combination of level values as a Ready node (``<level name>-<i>`` per level,
the last level's ``capacity`` and 110 pods allocatable, label
``tas-node-group: tas``); the flavor selects those nodes and names the
topology. A template's ``tasConstraint`` at ``tasLevel`` becomes the pod set's
topology request: ``required``, ``preferred``, or ``balanced`` (slices of
``sliceSize`` pods required at that level, as upstream's generator writes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pykueue.api import manifests, quantity
from pykueue.api.manifests import KubeObject
from pykueue.engine.resources import resource_units
from pykueue.engine.topology_requests import SliceLayer, TopologyRequest
from pykueue.errors import InputError
from pykueue.sim import yamlpaths
from pykueue.sim.jobs import Job, PodSetSpec
from pykueue.sim.trace import TraceError

CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
CLEANUP_LABEL = "kueue.x-k8s.io/performance-scheduler-cleanup"
DEFAULT_FLAVOR = "rf"
MS = 1000  # microseconds

_TOP = {"cohorts", "topology", "resourceFlavor"}
_COHORT = {"className", "count", "queuesSets"}
_QUEUES = {
    "className",
    "count",
    "nominalQuota",
    "borrowingLimit",
    "reclaimWithinCohort",
    "withinClusterQueue",
    "workloadsSets",
}
_WL_SET = {"count", "creationIntervalMs", "workloads"}
_TEMPLATE = {
    "className",
    "runtimeMs",
    "priority",
    "request",
    "podCount",
    "tasConstraint",
    "tasLevel",
    "sliceSize",
}
_TOPOLOGY = {"name", "levels"}
_LEVEL = {"name", "count", "nodeLabel", "capacity"}
TAS_NODE_LABEL = "tas-node-group"
_POLICIES = {"Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"}


@dataclass(slots=True)
class Generated:
    """What a generator file describes: the queue objects, the jobs, and the classes of both."""

    objects: list[KubeObject]
    jobs: list[Job]
    cq_classes: dict[str, str]  # ClusterQueue -> its queue set's className
    cohorts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Reader:
    def __init__(self, source: str, lines: dict[str, int]) -> None:
        self.source = source
        self.lines = lines
        self.problems: list[str] = []

    def problem(self, path: str, message: str) -> None:
        line = self.lines.get(path)
        if line is None:
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            line = self.lines.get(parent)
        where = f"{self.source}:{line}" if line else self.source
        self.problems.append(f"{where} {path}: {message}")

    def mapping(self, value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.problem(path, f"expected a mapping, got {type(value).__name__}")
            return {}
        for key in value:
            if key not in allowed:
                self.problem(
                    f"{path}.{key}" if path else key, f"unknown field; known: {', '.join(sorted(allowed))}"
                )
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(path, f"expected a list, got {type(value).__name__}")
            return []
        return value

    def integer(
        self, doc: dict[str, Any], key: str, path: str, minimum: int = 0, default: int | None = None
    ) -> int:
        value = doc.get(key, default)
        if value is None:
            self.problem(f"{path}.{key}", "required")
            return 0
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(f"{path}.{key}", f"expected an integer, got {value!r}")
            return 0
        if value < minimum:
            self.problem(f"{path}.{key}", f"must be at least {minimum} (got {value})")
            return 0
        return value

    def text(self, doc: dict[str, Any], key: str, path: str, required: bool = True) -> str:
        value = doc.get(key)
        if value is None:
            if required:
                self.problem(f"{path}.{key}", "required")
            return ""
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            self.problem(f"{path}.{key}", f"expected a string, got {value!r}")
            return ""
        return str(value)

    def quantity(self, doc: dict[str, Any], key: str, path: str, required: bool) -> str:
        text = self.text(doc, key, path, required)
        if text:
            try:
                if quantity.parse(text) < 0:
                    self.problem(f"{path}.{key}", f"must not be negative (got {text})")
            except quantity.QuantityError as exc:
                self.problem(f"{path}.{key}", str(exc))
                return ""
        return text


def load(path: Path) -> Generated:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceError([f"{path}: cannot read the generator file: {exc.strerror or exc}"]) from exc
    return parse(text, str(path))


def parse(text: str, source: str = "generator.yaml") -> Generated:
    try:
        doc, lines = yamlpaths.load(text, source)
    except ValueError as exc:
        raise TraceError([str(exc)]) from exc
    reader = _Reader(source, lines)
    top = reader.mapping(doc, "", _TOP)
    cohort_sets = reader.items(top.get("cohorts"), "cohorts")
    if not cohort_sets and not reader.problems:
        reader.problem("cohorts", "config must contain at least one cohort")
    flavor = DEFAULT_FLAVOR
    notes: list[str] = []
    rf = top.get("resourceFlavor")
    topology_name = ""
    if rf is not None:
        rf_doc = reader.mapping(rf, "resourceFlavor", {"name", "nodeLabel", "topologyName"})
        flavor = reader.text(rf_doc, "name", "resourceFlavor") or DEFAULT_FLAVOR
        topology_name = reader.text(rf_doc, "topologyName", "resourceFlavor", required=False)
    topology_raw: list[dict[str, Any]] = []
    if top.get("topology") is not None:
        topology_raw = _topology(reader, top["topology"])
        if topology_raw and not topology_name:
            topology_name = str(topology_raw[0]["metadata"]["name"])
    result = Generated(objects=[], jobs=[], cq_classes={}, notes=notes)
    raw: list[dict[str, Any]] = [
        _flavor_manifest(flavor, topology_name if topology_raw else ""),
        *topology_raw,
    ]
    for c_index, cohort_set in enumerate(cohort_sets):
        c_path = f"cohorts[{c_index}]"
        c_doc = reader.mapping(cohort_set, c_path, _COHORT)
        c_class = reader.text(c_doc, "className", c_path)
        c_count = reader.integer(c_doc, "count", c_path)
        q_sets = reader.items(c_doc.get("queuesSets"), f"{c_path}.queuesSets")
        parsed_sets = [
            _queue_set(reader, q_set, f"{c_path}.queuesSets[{q_index}]")
            for q_index, q_set in enumerate(q_sets)
        ]
        if reader.problems:
            continue
        for i in range(c_count):
            cohort = f"{c_class}-{i}"
            result.cohorts.append(cohort)
            for q_index, q_set in enumerate(parsed_sets):
                for j in range(q_set.count):
                    name = f"{q_set.class_name}-{q_index}-{j}-{cohort}"
                    result.cq_classes[name] = q_set.class_name
                    raw.extend(_queue_manifests(name, cohort, flavor, q_set))
                    result.jobs.extend(_jobs(name, q_set))
    if reader.problems:
        raise TraceError(reader.problems)
    try:
        result.objects = [manifests.parse_object(doc, source) for doc in raw]
    except InputError as exc:
        raise TraceError([f"{source}: the generated objects are not valid: {exc}"]) from exc
    result.jobs.sort(key=lambda job: job.submit)  # stable: creation order within an instant
    return result


@dataclass(frozen=True, slots=True)
class _Template:
    class_name: str
    runtime: int
    priority: int
    pod_sets: tuple[PodSetSpec, ...]


@dataclass(frozen=True, slots=True)
class _WorkloadSet:
    count: int
    interval: int
    templates: tuple[_Template, ...]


@dataclass(frozen=True, slots=True)
class _QueueSet:
    class_name: str
    count: int
    nominal: str
    borrowing_limit: str
    reclaim: str
    within: str
    workload_sets: tuple[_WorkloadSet, ...]


def _queue_set(reader: _Reader, value: Any, path: str) -> _QueueSet:
    doc = reader.mapping(value, path, _QUEUES)
    policies = []
    for key in ("reclaimWithinCohort", "withinClusterQueue"):
        policy = reader.text(doc, key, path, required=False)
        if policy and policy not in _POLICIES:
            reader.problem(f"{path}.{key}", f"expected one of {', '.join(sorted(_POLICIES))}, got {policy!r}")
        policies.append(policy)
    sets = []
    for s_index, wl_set in enumerate(reader.items(doc.get("workloadsSets"), f"{path}.workloadsSets")):
        s_path = f"{path}.workloadsSets[{s_index}]"
        s_doc = reader.mapping(wl_set, s_path, _WL_SET)
        templates = []
        for t_index, template in enumerate(reader.items(s_doc.get("workloads"), f"{s_path}.workloads")):
            templates.append(_template(reader, template, f"{s_path}.workloads[{t_index}]"))
        sets.append(
            _WorkloadSet(
                reader.integer(s_doc, "count", s_path),
                reader.integer(s_doc, "creationIntervalMs", s_path, default=0) * MS,
                tuple(templates),
            )
        )
    return _QueueSet(
        class_name=reader.text(doc, "className", path),
        count=reader.integer(doc, "count", path),
        nominal=reader.quantity(doc, "nominalQuota", path, required=True),
        borrowing_limit=reader.quantity(doc, "borrowingLimit", path, required=False),
        reclaim=policies[0],
        within=policies[1],
        workload_sets=tuple(sets),
    )


def _template(reader: _Reader, value: Any, path: str) -> _Template:
    doc = reader.mapping(value, path, _TEMPLATE)
    request = reader.quantity(doc, "request", path, required=True)
    pods = reader.integer(doc, "podCount", path, default=0) or 1
    priority = doc.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        reader.problem(f"{path}.priority", f"expected an integer, got {priority!r}")
        priority = 0
    milli = quantity.parse(request) if request else 0
    return _Template(
        class_name=reader.text(doc, "className", path),
        runtime=reader.integer(doc, "runtimeMs", path) * MS,
        priority=priority,
        pod_sets=(
            PodSetSpec(
                "main", pods, {"cpu": resource_units("cpu", milli)}, topology=_tas_request(reader, doc, path)
            ),
        ),
    )


def _tas_request(reader: _Reader, doc: dict[str, Any], path: str) -> TopologyRequest | None:
    """Upstream's generator: a ``tasLevel`` makes the pod set ask for TAS as ``tasConstraint`` says."""
    level = reader.text(doc, "tasLevel", path, required=False)
    if not level:
        return None
    constraint = reader.text(doc, "tasConstraint", path, required=False)
    if constraint == "required":
        return TopologyRequest(required=level)
    if constraint == "preferred":
        return TopologyRequest(preferred=level)
    if constraint == "balanced":
        size = reader.integer(doc, "sliceSize", path, default=0)
        return TopologyRequest(slices=(SliceLayer(level, size),))
    reader.problem(f"{path}.tasConstraint", f"expected required, preferred or balanced, got {constraint!r}")
    return None


def _flavor_manifest(name: str, topology: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if topology:
        spec = {"nodeLabels": {TAS_NODE_LABEL: "tas"}, "topologyName": topology}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": {CLEANUP_LABEL: "true"}},
        "spec": spec,
    }


def _topology(reader: _Reader, value: Any) -> list[dict[str, Any]]:
    """The Topology and its nodes, as upstream's topology generator makes them."""
    doc = reader.mapping(value, "topology", _TOPOLOGY)
    name = reader.text(doc, "name", "topology")
    levels = []
    for index, item in enumerate(reader.items(doc.get("levels"), "topology.levels")):
        path = f"topology.levels[{index}]"
        level = reader.mapping(item, path, _LEVEL)
        levels.append(
            (
                reader.text(level, "name", path),
                reader.integer(level, "count", path, 1),
                reader.text(level, "nodeLabel", path),
            )
        )
    if len(levels) < 2:
        reader.problem("topology.levels", f"topology must have at least 2 levels, got {len(levels)}")
    raw_levels = doc.get("levels")
    last = raw_levels[-1] if isinstance(raw_levels, list) and raw_levels else {}
    capacity = last.get("capacity") if isinstance(last, dict) else None
    capacity = capacity if isinstance(capacity, dict) else {}
    cpu, memory = str(capacity.get("cpu", "96")), str(capacity.get("memory", "256Gi"))
    if reader.problems:
        return []
    result: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for _, _, label in levels]},
        }
    ]
    combos: list[list[str]] = [[]]
    for level_name, count, _ in levels:
        combos = [[*combo, f"{level_name}-{i}"] for combo in combos for i in range(count)]
    for values in combos:
        labels = {CLEANUP_LABEL: "true", TAS_NODE_LABEL: "tas"}
        labels.update({label: value for (_, _, label), value in zip(levels, values, strict=True)})
        node_name = "node" + "".join(f"-{value[0]}{value.rpartition('-')[2]}" for value in values)
        result.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node_name, "labels": labels},
                "status": {
                    "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return result


def _queue_manifests(name: str, cohort: str, flavor: str, q_set: _QueueSet) -> list[dict[str, Any]]:
    resource: dict[str, Any] = {"name": "cpu", "nominalQuota": q_set.nominal}
    if q_set.borrowing_limit:
        resource["borrowingLimit"] = q_set.borrowing_limit
    preemption = {}
    if q_set.reclaim:
        preemption["reclaimWithinCohort"] = q_set.reclaim
    if q_set.within:
        preemption["withinClusterQueue"] = q_set.within
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {CLASS_LABEL: q_set.class_name, CLEANUP_LABEL: "true"}},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [resource]}]}
            ],
            "preemption": preemption,
        },
    }
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {CLEANUP_LABEL: "true"}},
    }
    local_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": name},
        "spec": {"clusterQueue": name},
    }
    return [cq, namespace, local_queue]


def _jobs(cq: str, q_set: _QueueSet) -> list[Job]:
    jobs = []
    for s_index, wl_set in enumerate(q_set.workload_sets):
        created = 0
        for round_index in range(wl_set.count):
            for t_index, template in enumerate(wl_set.templates):
                created += wl_set.interval
                jobs.append(
                    Job(
                        name=f"{template.class_name}-{s_index}-{round_index}-{t_index}",
                        namespace=cq,
                        queue=cq,
                        submit=created,
                        runtime=template.runtime,
                        pod_sets=template.pod_sets,
                        priority=template.priority,
                        job_class=template.class_name,
                        where=f"{cq} workloadsSets[{s_index}]",
                    )
                )
    return jobs
