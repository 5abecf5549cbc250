"""Workload rules: upstream's workload webhook and the CEL rules on the Workload CRD.

Split from `validation` because a Workload has more rules than every other kind
together: pod sets and their counts, the admission it holds, reclaimable pods,
admission check updates, topology assignments, and what may not change while it
holds quota.

Left out on purpose: upstream's CEL rule "priority should not be nil when
priorityClassRef is set". Upstream's job controllers always fill ``priority`` in
when they create a Workload; hand-written Workloads (scenario files) rely on the
class to give the priority, so we resolve it from the class instead of refusing.
"""

from __future__ import annotations

import math

from pykueue.api import quantity, semantic
from pykueue.api.checks import (
    IMMUTABLE,
    NEGATIVE,
    Problems,
    check_annotations,
    check_labels,
    check_tolerations,
    key_path,
    unique_names,
)
from pykueue.api.core import Container, PodSpec
from pykueue.api.meta import milli, shorten
from pykueue.api.workload import (
    ADMITTED,
    Admission,
    PodSet,
    PodSetTopologyRequest,
    TopologyAssignment,
    Workload,
)
from pykueue.errors import FieldProblem

RESERVED_RESOURCE = "pods"


def validate_workload(wl: Workload, single_variable_pod_set: bool = True) -> list[FieldProblem]:
    out = Problems()
    spec = wl.spec
    if not spec.pod_sets:
        out.add("spec.podSets", "must have at least 1 item")
    unique_names(spec.pod_sets, "spec.podSets", out)
    with_min_count = 0
    for i, pod_set in enumerate(spec.pod_sets):
        _pod_set(pod_set, f"spec.podSets[{i}]", out)
        if pod_set.min_count is not None:
            with_min_count += 1
    if with_min_count > 1 and single_variable_pod_set:
        out.add("spec.podSets", f"invalid value {with_min_count}: at most one podSet can use minCount")
    ref = spec.priority_class_ref
    if ref is not None:
        if ref.group == "scheduling.k8s.io" and ref.kind != "PriorityClass":
            out.add(
                "spec.priorityClassRef",
                "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
            )
        if ref.group == "kueue.x-k8s.io" and ref.kind != "WorkloadPriorityClass":
            out.add(
                "spec.priorityClassRef",
                "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
            )
    _status(wl, out)
    return out.items


def _pod_set(pod_set: PodSet, path: str, out: Problems) -> None:
    if pod_set.min_count is not None and pod_set.min_count > pod_set.count:
        out.add(path, "minCount should be positive and less or equal to count")
    template = pod_set.template
    check_labels(template.metadata.labels, f"{path}.template.metadata.labels", out)
    check_annotations(template.metadata.annotations, f"{path}.template.metadata.annotations", out)
    _pod_spec(template.spec, f"{path}.template.spec", out)
    if pod_set.topology_request is not None:
        _topology_request(pod_set.topology_request, f"{path}.topologyRequest", out)


def _pod_spec(spec: PodSpec, path: str, out: Problems) -> None:
    containers: list[tuple[str, list[Container]]] = [
        ("initContainers", spec.init_containers),
        ("containers", spec.containers),
    ]
    for field, items in containers:
        for i, container in enumerate(items):
            base = f"{path}.{field}[{i}].resources"
            _resource_list(container.resources.requests, f"{base}.requests", out)
            _resource_list(container.resources.limits, f"{base}.limits", out)
    if spec.resources is not None:
        _resource_list(spec.resources.requests, f"{path}.resources.requests", out)
        _resource_list(spec.resources.limits, f"{path}.resources.limits", out)
    check_tolerations(spec.tolerations, f"{path}.tolerations", out)


def _resource_list(resources: dict[str, str], path: str, out: Problems) -> None:
    for name, value in resources.items():
        if name == RESERVED_RESOURCE:
            out.add(key_path(path, name), "the key is reserved for internal kueue use")
        if milli(value) < 0:
            out.add(key_path(path, name), f"invalid value {shorten(value)}: {NEGATIVE}")


def check_pod_spec(spec: PodSpec, path: str, out: Problems) -> None:
    """The rules the API server applies to a Job's pod template: the pod set rules, and requests
    within limits (a pod that breaks it could never be created)."""
    _pod_spec(spec, path, out)
    for field, items in (("initContainers", spec.init_containers), ("containers", spec.containers)):
        for i, container in enumerate(items):
            base = f"{path}.{field}[{i}].resources"
            _requests_within_limits(container.resources.requests, container.resources.limits, base, out)


def _requests_within_limits(
    requests: dict[str, str], limits: dict[str, str], path: str, out: Problems
) -> None:
    for name, value in requests.items():
        limit = limits.get(name)
        if limit is not None and milli(value) >= 0 and milli(limit) >= 0 and milli(value) > milli(limit):
            out.add(
                key_path(f"{path}.requests", name),
                f"must be less than or equal to {name} limit of {shorten(limit)}",
            )


def _resource_value(resource: str, value: str) -> int:
    # Upstream compares CPU in milli-cores and every other resource in whole units.
    if resource == "cpu":
        return milli(value)
    return math.ceil(quantity.parse_exact(value))


def _topology_request(request: PodSetTopologyRequest, path: str, out: Problems) -> None:
    if request.pod_set_slice_required_topology is not None and request.pod_set_slice_size is None:
        out.add(f"{path}.podSetSliceSize", "must be set when podSetSliceRequiredTopology is specified")
    if request.pod_set_slice_required_topology is None and request.pod_set_slice_size is not None:
        out.add(f"{path}.podSetSliceSize", "may not be set when podSetSliceRequiredTopology is not specified")


def _topology_assignment(assignment: TopologyAssignment, path: str, out: Problems) -> None:
    for i, part in enumerate(assignment.slices):
        here = f"{path}.slices[{i}]"
        if len(part.values_per_level) != len(assignment.levels):
            out.add(
                here,
                "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
            )
        counts = part.pod_counts
        if (counts.universal is None) == (not counts.individual):
            out.add(f"{here}.podCounts", "exactly one of the fields in [universal individual] must be set")
        if counts.individual and len(counts.individual) != part.domain_count:
            out.add(here, "podCounts.individual must have length equal to domainCount")
        for j, level in enumerate(part.values_per_level):
            if (level.universal is None) == (level.individual is None):
                out.add(
                    f"{here}.valuesPerLevel[{j}]",
                    "exactly one of the fields in [universal individual] must be set",
                )
            if level.individual is not None and len(level.individual.roots) != part.domain_count:
                out.add(
                    here,
                    "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of "
                    "this TopologyAssignmentSlice",
                )


def _status(wl: Workload, out: Problems) -> None:
    status = wl.status
    names = [ps.name for ps in wl.spec.pod_sets]
    admission = status.admission
    if wl.has_quota_reservation() and admission is None:
        out.add("status.admission", "must be set while the QuotaReserved condition is true")
    if admission is not None:
        base = "status.admission.podSetAssignments"
        unique_names(admission.pod_set_assignments, base, out)
        if wl.has_quota_reservation() and len(admission.pod_set_assignments) != len(wl.spec.pod_sets):
            out.add(base, "podSetAssignments must have the same number of podSets as the spec")
        for i, psa in enumerate(admission.pod_set_assignments):
            here = f"{base}[{i}]"
            if psa.name not in names:
                out.add(f"{here}.name", f"not found: {shorten(psa.name)} is not a podSet of this workload")
            count = psa.count or 0
            if count > 0:
                for resource, value in psa.resource_usage.items():
                    # Usage is the per-pod request times the count, so it must divide evenly.
                    if _resource_value(resource, value) % count:
                        out.add(
                            key_path(f"{here}.resourceUsage", resource),
                            f"invalid value {shorten(value)}: is not a multiple of {count}",
                        )
            if psa.topology_assignment is not None:
                _topology_assignment(psa.topology_assignment, f"{here}.topologyAssignment", out)
    counts = {ps.name: ps.count for ps in wl.spec.pod_sets}
    unique_names(status.reclaimable_pods, "status.reclaimablePods", out)
    for rp in status.reclaimable_pods:
        here = key_path("status.reclaimablePods", rp.name)
        if rp.name not in counts:
            out.add(
                f"{here}.name", f"unsupported value {shorten(rp.name)}: supported values: {', '.join(names)}"
            )
        elif rp.count > counts[rp.name]:
            out.add(
                f"{here}.count", f"invalid value {rp.count}: should be less or equal to {counts[rp.name]}"
            )
    unique_names(status.admission_checks, "status.admissionChecks", out)
    for i, check in enumerate(status.admission_checks):
        for j, update in enumerate(check.pod_set_updates):
            here = f"status.admissionChecks[{i}].podSetUpdates[{j}]"
            if update.name not in counts:
                out.add(
                    f"{here}.name",
                    f"unsupported value {shorten(update.name)}: supported values: {', '.join(names)}",
                )
            check_tolerations(update.tolerations, f"{here}.tolerations", out)
            check_annotations(update.annotations, f"{here}.annotations", out)
            check_labels(update.node_selector, f"{here}.nodeSelector", out)
            check_labels(update.labels, f"{here}.labels", out)
    if status.cluster_name is not None and status.nominated_cluster_names:
        out.add("status", "clusterName and nominatedClusterNames are mutually exclusive")


def validate_workload_update(old: Workload, new: Workload) -> list[FieldProblem]:
    """What may not change: pod sets and queue while quota is held, the admission itself, ..."""
    out = Problems()
    old_reserved, new_reserved = old.has_quota_reservation(), new.has_quota_reservation()
    if old_reserved:
        if len(old.spec.pod_sets) != len(new.spec.pod_sets):
            out.add("spec.podSets", IMMUTABLE)
        else:
            for i, (before, after) in enumerate(zip(old.spec.pod_sets, new.spec.pod_sets, strict=True)):
                # by value, as upstream's semantic equality: `cpu: 1` may come back as "1000m"
                if before != after and not semantic.equal(_wire(before), _wire(after)):
                    out.add(f"spec.podSets[{i}]", IMMUTABLE)
        old_ref, new_ref = old.spec.priority_class_ref, new.spec.priority_class_ref
        if (old_ref is None) != (new_ref is None):
            out.add("spec", "priorityClassRef is immutable while workload quota reserved")
        elif old_ref is not None and new_ref is not None:
            if old_ref.group != new_ref.group:
                out.add("spec", "priorityClassRef.group is immutable while workload quota reserved")
            if old_ref.kind != new_ref.kind:
                out.add("spec", "priorityClassRef.kind is immutable while workload quota reserved")
            if new_ref.group == "scheduling.k8s.io" and old_ref.name != new_ref.name:
                out.add(
                    "spec",
                    "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload "
                    "quota reserved",
                )
    if old_reserved and new_reserved:
        if old.spec.queue_name != new.spec.queue_name:
            out.add("spec", "queueName is immutable while workload quota reserved")
        _reclaimable_update(old, new, out)
    if old.condition_is_true(ADMITTED) and new.condition_is_true(ADMITTED):
        before_max = old.spec.maximum_execution_time_seconds or 0
        if before_max != (new.spec.maximum_execution_time_seconds or 0):
            out.add("spec", "maximumExecutionTimeSeconds is immutable while workload quota reserved")
    old_adm, new_adm = old.status.admission, new.status.admission
    if (
        old_adm is not None
        and new_adm is not None
        and _without_topology(old_adm) != _without_topology(new_adm)
    ):
        out.add("status.admission", IMMUTABLE)
    new_checks = {c.name: c for c in new.status.admission_checks}
    for i, before_check in enumerate(old.status.admission_checks):
        after_check = new_checks.get(before_check.name)
        if after_check is None or not (before_check.state == after_check.state == "Ready"):
            continue
        if before_check.pod_set_updates != after_check.pod_set_updates:
            out.add(f"status.admissionChecks[{i}].podSetUpdates", IMMUTABLE)
    # As the CRD's rule: a clusterName cannot change, but it may be cleared (an eviction does).
    if (
        old.status.cluster_name is not None
        and new.status.cluster_name is not None
        and new.status.cluster_name != old.status.cluster_name
    ):
        out.add("status", "clusterName is immutable once set")
    setting = new.status.cluster_name
    if (
        old.status.cluster_name is None
        and setting is not None
        and setting not in old.status.nominated_cluster_names
    ):
        out.add("status.clusterName", "when setting clusterName it must be one of the nominatedClusterNames")
    return out.items


def _without_topology(admission: Admission) -> Admission:
    # Topology assignments may be filled in after admission (delayed topology requests),
    # so they are left out when comparing an admission with its earlier self.
    assignments = [
        psa.model_copy(update={"topology_assignment": None, "delayed_topology_request": None})
        for psa in admission.pod_set_assignments
    ]
    return admission.model_copy(update={"pod_set_assignments": assignments})


def _reclaimable_update(old: Workload, new: Workload, out: Problems) -> None:
    before = {rp.name: rp.count for rp in old.status.reclaimable_pods}
    after = {rp.name: rp.count for rp in new.status.reclaimable_pods}
    for name, count in after.items():
        if name in before and count < before[name]:
            out.add(
                f"{key_path('status.reclaimablePods', name)}.count",
                f"invalid value {count}: cannot be less than {before[name]}",
            )
    for name in before:
        if name not in after:
            out.add(key_path("status.reclaimablePods", name), "cannot be removed")


def _wire(model: PodSet) -> object:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
