"""Workload rules: upstream's workload webhook and the CEL rules of the Workload CRD."""

from __future__ import annotations

from typing import Any

from . import samples
from .checking import accepted, refused
from .samples import DELETE, with_

PS0 = "spec.podSets[0]"
C0 = f"{PS0}.template.spec.containers[0]"
PSA0 = "status.admission.podSetAssignments[0]"


def pod_set(name: str, count: int = 1) -> dict[str, Any]:
    return {"name": name, "count": count, "template": {"spec": {"containers": [{"name": "c"}]}}}


def pending() -> dict[str, Any]:
    doc = samples.workload()
    del doc["status"]
    return doc


def test_sample_is_valid() -> None:
    accepted(samples.workload())


def test_needs_at_least_one_pod_set() -> None:
    refused(with_(pending(), "spec.podSets", []), "spec.podSets", "at least 1")


def test_at_most_18_pod_sets() -> None:
    refused(
        with_(pending(), "spec.podSets", [pod_set(f"p{i}") for i in range(19)]), "spec.podSets", "at most 18"
    )
    accepted(with_(pending(), "spec.podSets", [pod_set(f"p{i}") for i in range(18)]))


def test_pod_set_names_unique_and_dns_labels() -> None:
    refused(
        with_(pending(), "spec.podSets", [pod_set("a"), pod_set("a")]), "spec.podSets[1].name", "duplicate"
    )
    refused(with_(pending(), f"{PS0}.name", "Main"), f"{PS0}.name", "RFC 1123 label")


def test_min_count_at_most_count_and_positive() -> None:
    refused(
        with_(pending(), f"{PS0}.minCount", 5), PS0, "minCount should be positive and less or equal to count"
    )
    refused(with_(pending(), f"{PS0}.minCount", 0), f"{PS0}.minCount", "greater than or equal to 1")
    accepted(with_(pending(), f"{PS0}.minCount", 4))


def test_count_not_negative() -> None:
    refused(with_(pending(), f"{PS0}.count", -1), f"{PS0}.count", "greater than or equal to 0")


def test_at_most_one_pod_set_with_min_count() -> None:
    sets = [dict(pod_set("a", 2), minCount=1), dict(pod_set("b", 2), minCount=1)]
    refused(with_(pending(), "spec.podSets", sets), "spec.podSets", "at most one podSet can use minCount")


def test_pods_resource_is_reserved() -> None:
    doc = with_(pending(), f"{C0}.resources.requests.pods", "1")
    refused(doc, f"{C0}.resources.requests[pods]", "reserved for internal kueue use")


def test_requests_not_negative() -> None:
    refused(
        with_(pending(), f"{C0}.resources.limits.cpu", "-1"), f"{C0}.resources.limits[cpu]", "greater than or"
    )


def test_priority_class_ref_group_and_kind_agree() -> None:
    ref = {"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "x"}
    refused(
        with_(pending(), "spec.priorityClassRef", ref), "spec.priorityClassRef", "only the PriorityClass kind"
    )
    ref = {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "x"}
    refused(
        with_(pending(), "spec.priorityClassRef", ref),
        "spec.priorityClassRef",
        "only the WorkloadPriorityClass",
    )
    ref = {"group": "example.com", "kind": "PriorityClass", "name": "x"}
    refused(
        with_(pending(), "spec.priorityClassRef", ref), "spec.priorityClassRef.group", "unsupported value"
    )


def test_priority_class_ref_without_priority_is_accepted() -> None:
    # Deliberate deviation: hand-written workloads take their priority from the class.
    accepted(with_(pending(), "spec.priority", DELETE))


def test_maximum_execution_time_positive() -> None:
    refused(
        with_(pending(), "spec.maximumExecutionTimeSeconds", 0),
        "spec.maximumExecutionTimeSeconds",
        "greater than or equal to 1",
    )


def test_quota_reserved_needs_an_admission() -> None:
    refused(with_(samples.workload(), "status.admission", DELETE), "status.admission", "must be set while")


def test_admission_has_one_assignment_per_pod_set() -> None:
    doc = with_(
        samples.workload(), "spec.podSets", [samples.workload()["spec"]["podSets"][0], pod_set("extra")]
    )
    doc = with_(doc, "status.reclaimablePods", DELETE)
    refused(doc, "status.admission.podSetAssignments", "same number of podSets")


def test_admission_names_known_pod_sets() -> None:
    refused(with_(samples.workload(), f"{PSA0}.name", "other"), f"{PSA0}.name", "not a podSet")


def test_resource_usage_is_a_multiple_of_the_count() -> None:
    doc = samples.workload()
    refused(with_(doc, f"{PSA0}.resourceUsage.cpu", "3m"), f"{PSA0}.resourceUsage[cpu]", "multiple of 4")
    refused(with_(doc, f"{PSA0}.resourceUsage.memory", "3"), f"{PSA0}.resourceUsage[memory]", "multiple of 4")
    accepted(with_(doc, f"{PSA0}.resourceUsage.cpu", "3"))  # 3000m / 4 pods = 750m each


def test_admission_without_conditions_is_accepted() -> None:
    # Scenario files give status.admission alone for a workload already holding quota.
    accepted(with_(samples.workload(), "status.conditions", DELETE))


def test_reclaimable_pods_name_known_pod_sets_and_fit_the_count() -> None:
    refused(
        with_(samples.workload(), "status.reclaimablePods[0].name", "x"),
        "status.reclaimablePods[x].name",
        "unsupported value",
    )
    refused(
        with_(samples.workload(), "status.reclaimablePods[0].count", 5),
        "status.reclaimablePods[main].count",
        "4",
    )


def test_admission_check_pod_set_updates() -> None:
    base = "status.admissionChecks[0].podSetUpdates[0]"
    refused(with_(samples.workload(), f"{base}.name", "x"), f"{base}.name", "unsupported value")
    refused(
        with_(samples.workload(), f"{base}.nodeSelector", {"zone": "a b"}), f"{base}.nodeSelector[zone]", ""
    )
    tol = [{"operator": "Equal", "value": "x"}]
    refused(
        with_(samples.workload(), f"{base}.tolerations", tol),
        f"{base}.tolerations[0].operator",
        "must be Exists",
    )


def test_admission_check_state_enum() -> None:
    refused(
        with_(samples.workload(), "status.admissionChecks[0].state", "Done"),
        "status.admissionChecks[0].state",
        "",
    )


def test_conditions_unique_by_type_and_valid_status() -> None:
    cond = samples.workload()["status"]["conditions"][0]
    refused(
        with_(samples.workload(), "status.conditions", [cond, cond]), "status.conditions[1].type", "only once"
    )
    refused(
        with_(samples.workload(), "status.conditions[0].status", "Yes"), "status.conditions[0].status", "True"
    )
    refused(
        with_(samples.workload(), "status.conditions[0].reason", "not ok"), "status.conditions[0].reason", ""
    )


def test_cluster_name_and_nominated_clusters_are_exclusive() -> None:
    doc = with_(samples.workload(), "status.clusterName", "w1")
    doc = with_(doc, "status.nominatedClusterNames", ["w1"])
    refused(doc, "status", "mutually exclusive")


def test_topology_assignment_shape() -> None:
    assignment = {
        "levels": ["rack"],
        "slices": [
            {"domainCount": 2, "valuesPerLevel": [{"universal": "r1"}], "podCounts": {"individual": [2]}}
        ],
    }
    doc = with_(samples.workload(), f"{PSA0}.topologyAssignment", assignment)
    refused(
        doc,
        f"{PSA0}.topologyAssignment.slices[0]",
        "podCounts.individual must have length equal to domainCount",
    )
    assignment["slices"][0]["podCounts"] = {"universal": 2}
    assignment["slices"][0]["valuesPerLevel"] = [{"universal": "r1"}, {"universal": "h"}]
    doc = with_(samples.workload(), f"{PSA0}.topologyAssignment", assignment)
    refused(doc, f"{PSA0}.topologyAssignment.slices[0]", "valuesPerLevel must have the same length")


def test_topology_request_slice_size_goes_with_slice_topology() -> None:
    refused(
        with_(pending(), f"{PS0}.topologyRequest", {"podSetSliceRequiredTopology": "rack"}),
        f"{PS0}.topologyRequest.podSetSliceSize",
        "must be set",
    )
    refused(
        with_(pending(), f"{PS0}.topologyRequest", {"podSetSliceSize": 2}),
        f"{PS0}.topologyRequest.podSetSliceSize",
        "may not be set",
    )
