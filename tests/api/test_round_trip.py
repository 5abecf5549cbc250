"""Every kind survives a round trip, and v1beta1 manifests come out as upstream converts them."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pykueue.api import manifests
from pykueue.api.cluster_queue import ClusterQueue
from pykueue.api.workload import Workload

from . import samples
from .samples import V1, V2


@pytest.mark.parametrize("kind", sorted(samples.ALL))
def test_v1beta2_in_equals_out(kind: str) -> None:
    doc = samples.ALL[kind]()
    obj = manifests.parse_object(doc, "x.yaml#1")
    assert obj.kind == kind
    assert manifests.to_manifest(obj) == doc


@pytest.mark.parametrize("kind", sorted(samples.ALL))
def test_round_trip_through_yaml_text(kind: str) -> None:
    obj = manifests.parse_object(samples.ALL[kind]())
    text = manifests.dump_yaml([obj])
    (again,) = manifests.load_text(text, "dump.yaml")
    assert again == obj


def test_minimal_cluster_queue_gets_upstream_defaults() -> None:
    doc = {"apiVersion": V2, "kind": "ClusterQueue", "metadata": {"name": "cq"}}
    out = manifests.to_manifest(manifests.parse_object(doc))
    assert out["spec"] == {
        "queueingStrategy": "BestEffortFIFO",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "Never",
        },
        "stopPolicy": "None",
    }
    assert "status" not in out


def test_workload_defaults_pod_set_name_count_and_active() -> None:
    doc = {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"podSets": [{"template": {"spec": {"containers": [{"name": "c"}]}}}]},
    }
    wl = manifests.parse_object(doc)
    assert isinstance(wl, Workload)
    assert (wl.spec.pod_sets[0].name, wl.spec.pod_sets[0].count, wl.spec.active) == ("main", 1, True)
    assert wl.metadata.namespace == "default"


def test_fair_sharing_weight_defaults_to_one() -> None:
    doc = {"apiVersion": V2, "kind": "Cohort", "metadata": {"name": "c"}, "spec": {"fairSharing": {}}}
    assert manifests.to_manifest(manifests.parse_object(doc))["spec"]["fairSharing"] == {"weight": "1"}


def test_cluster_scoped_objects_lose_a_namespace() -> None:
    doc = samples.with_(samples.resource_flavor(), "metadata.namespace", "ignored")
    assert manifests.parse_object(doc).metadata.namespace == ""


def test_quantities_keep_their_text_and_read_as_milli_units() -> None:
    cq = manifests.parse_object(samples.cluster_queue())
    assert isinstance(cq, ClusterQueue)
    spot_cpu = cq.spec.resource_groups[0].flavors[1].resources[0]
    assert spot_cpu.nominal_quota == "40000m"
    assert spot_cpu.nominal_milli == 40_000
    assert cq.spec.resource_groups[0].flavors[0].resources[0].lending_limit_milli == 5000


def test_numbers_for_quantities_are_accepted_and_written_as_text() -> None:
    doc = samples.with_(
        samples.cluster_queue(), "spec.resourceGroups[1].flavors[0].resources[0].nominalQuota", 8
    )
    out = manifests.to_manifest(manifests.parse_object(doc))
    assert out["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]["nominalQuota"] == "8"


def test_empty_namespace_selector_is_kept_and_absent_stays_absent() -> None:
    cq = manifests.parse_object(samples.cluster_queue())
    assert manifests.to_manifest(cq)["spec"]["namespaceSelector"] == {}
    doc = samples.with_(samples.cluster_queue(), "spec.namespaceSelector", samples.DELETE)
    assert "namespaceSelector" not in manifests.to_manifest(manifests.parse_object(doc))["spec"]


def test_unquoted_yaml_timestamps_are_times() -> None:
    text = yaml.safe_dump(samples.workload()).replace("'2026-01-01T00:00:00Z'", "2026-01-01T00:00:00Z")
    (wl,) = manifests.load_text(text, "w.yaml")
    assert manifests.to_manifest(wl)["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"


# --- v1beta1 -> v1beta2 -------------------------------------------------------------------


def _v1(doc: dict[str, Any]) -> dict[str, Any]:
    return manifests.to_manifest(manifests.parse_object(doc, "old.yaml#1"))


def test_v1beta1_cluster_queue_renames_cohort_and_admission_checks() -> None:
    doc = {
        "apiVersion": V1,
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "cohort": "all",
            "admissionChecks": ["prov", "mk"],
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
        },
        "status": {
            "pendingWorkloadsStatus": {
                "clusterQueuePendingWorkload": [],
                "lastChangeTime": "2026-01-01T00:00:00Z",
            }
        },
    }
    out = _v1(doc)
    assert out["apiVersion"] == V2
    assert out["spec"]["cohortName"] == "all"
    assert "cohort" not in out["spec"]
    assert out["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"}, {"name": "mk"}]}
    assert out["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }
    assert "status" not in out


def test_v1beta1_admission_checks_replace_a_strategy_given_alongside() -> None:
    doc = {
        "apiVersion": V1,
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"admissionChecks": ["a"], "admissionChecksStrategy": {"admissionChecks": [{"name": "b"}]}},
    }
    assert _v1(doc)["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "a"}]}


def test_v1beta1_local_queue_flavor_usage_and_fair_sharing() -> None:
    doc = samples.local_queue()
    doc["apiVersion"] = V1
    doc["status"]["flavorUsage"] = [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]
    doc["status"]["flavors"] = [{"name": "f", "resources": ["cpu"]}]
    out = _v1(doc)
    assert out["status"]["flavorsUsage"] == [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]
    assert "flavors" not in out["status"]
    assert out["status"]["fairSharing"] == samples.local_queue()["status"]["fairSharing"]


def test_v1beta1_cohort_drops_admission_fair_sharing_status() -> None:
    doc = samples.cohort()
    doc["apiVersion"] = V1
    doc["status"] = {
        "fairSharing": {"weightedShare": 5, "admissionFairSharingStatus": {"consumedResources": {}}}
    }
    assert _v1(doc)["status"] == {"fairSharing": {"weightedShare": 5}}


def test_v1beta1_admission_check_drops_retry_delay() -> None:
    doc = samples.admission_check()
    doc["apiVersion"] = V1
    doc["spec"]["retryDelayMinutes"] = 15
    assert _v1(doc) == samples.admission_check()


def test_v1beta1_multikueue_cluster_moves_kubeconfig_under_cluster_source() -> None:
    doc = {
        "apiVersion": V1,
        "kind": "MultiKueueCluster",
        "metadata": {"name": "worker-1"},
        "spec": {"kubeConfig": {"location": "worker-1-secret", "locationType": "Secret"}},
    }
    assert _v1(doc) == samples.multikueue_cluster()


@pytest.mark.parametrize(
    ("source", "group", "kind"),
    [
        ("kueue.x-k8s.io/workloadpriorityclass", "kueue.x-k8s.io", "WorkloadPriorityClass"),
        ("scheduling.k8s.io/priorityclass", "scheduling.k8s.io", "PriorityClass"),
    ],
)
def test_v1beta1_workload_priority_class_source(source: str, group: str, kind: str) -> None:
    doc = samples.workload()
    doc["apiVersion"] = V1
    del doc["spec"]["priorityClassRef"]
    doc["spec"].update(priorityClassSource=source, priorityClassName="high")
    assert _v1(doc)["spec"]["priorityClassRef"] == {"group": group, "kind": kind, "name": "high"}


def test_v1beta1_workload_class_name_without_source_is_dropped_as_upstream_does() -> None:
    doc = samples.workload()
    doc["apiVersion"] = V1
    del doc["spec"]["priorityClassRef"]
    doc["spec"]["priorityClassName"] = "high"
    assert "priorityClassRef" not in _v1(doc)["spec"]


def test_v1beta1_workload_typo_field_and_topology_domains() -> None:
    doc = samples.workload()
    doc["apiVersion"] = V1
    del doc["spec"]["priorityClassRef"]
    doc["status"]["accumulatedPastExexcutionTimeSeconds"] = 30
    doc["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {
        "levels": ["rack", "kubernetes.io/hostname"],
        "domains": [
            {"values": ["r1", "node-a1"], "count": 2},
            {"values": ["r1", "node-b1"], "count": 2},
        ],
    }
    out = _v1(doc)
    assert out["status"]["accumulatedPastExecutionTimeSeconds"] == 30
    assert out["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == {
        "levels": ["rack", "kubernetes.io/hostname"],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [
                    {"universal": "r1"},
                    {"individual": {"prefix": "node-", "suffix": "1", "roots": ["a", "b"]}},
                ],
                "podCounts": {"universal": 2},
            }
        ],
    }
    wl = manifests.parse_object(doc)
    assert isinstance(wl, Workload)
    topo = wl.status.admission.pod_set_assignments[0].topology_assignment  # type: ignore[union-attr]
    assert topo is not None
    assert topo.domains() == [(["r1", "node-a1"], 2), (["r1", "node-b1"], 2)]


@pytest.mark.parametrize("kind", ["ResourceFlavor", "WorkloadPriorityClass", "Topology", "MultiKueueConfig"])
def test_v1beta1_kinds_without_changes_convert_as_is(kind: str) -> None:
    doc = samples.ALL[kind]()
    doc["apiVersion"] = V1
    assert _v1(doc) == samples.ALL[kind]()


def test_v1beta2_field_names_are_unknown_in_v1beta1() -> None:
    from pykueue.errors import ValidationError

    doc = {"apiVersion": V1, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"cohortName": "x"}}
    with pytest.raises(ValidationError) as err:
        manifests.parse_object(doc, "old.yaml#1")
    (problem,) = err.value.problems
    assert problem.path == "spec.cohortName"
    assert "unknown field" in problem.message
