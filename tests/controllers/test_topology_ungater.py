"""The topology ungater's decisions: which gated pod goes to which domain, and the pod it writes."""

from __future__ import annotations

from typing import Any

import pytest

from pykueue.engine.topology_assignments import Domain, TopologyAssignment
from pykueue.reconcilers import admission, jobframework, topology_ungater
from pykueue.reconcilers.admission import AdmissionController
from pykueue.store.base import WatchEvent
from pykueue.store.memory import MemoryStore

HOST = "kubernetes.io/hostname"
GATE = {"name": jobframework.TOPOLOGY_GATE}


def _pod(name: str, *, gated: bool = True, host: str = "", phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    if gated:
        spec["schedulingGates"] = [GATE]
    if host:
        spec["nodeSelector"] = {HOST: host}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
        "status": {"phase": phase},
    }


def _hosts(**counts: int) -> TopologyAssignment:
    return TopologyAssignment((HOST,), tuple(Domain((h,), c) for h, c in counts.items()))


def _plan(assignment: TopologyAssignment, pods: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(p["metadata"]["name"], labels[HOST]) for p, labels in topology_ungater.plan(assignment, pods)]


def test_gated_pods_fill_the_domains_in_the_assignments_order_by_name() -> None:
    pods = [_pod("p3"), _pod("p1"), _pod("p2")]
    assert _plan(_hosts(x1=2, x2=1), pods) == [("p1", "x1"), ("p2", "x1"), ("p3", "x2")]


def test_pods_already_let_go_keep_their_domain_full() -> None:
    pods = [_pod("a", gated=False, host="x1"), _pod("b", gated=False, host="x1"), _pod("c"), _pod("d")]
    assert _plan(_hosts(x1=2, x2=2), pods) == [("c", "x2"), ("d", "x2")]


def test_more_gated_pods_than_room_leaves_the_rest_gated() -> None:
    pods = [_pod("a", gated=False, host="x2"), _pod("b"), _pod("c")]
    assert _plan(_hosts(x1=1, x2=1), pods) == [("b", "x1")]


def test_a_terminated_pod_gives_its_place_to_its_replacement() -> None:
    pods = [_pod("old", gated=False, host="x1", phase="Failed"), _pod("new")]
    assert _plan(_hosts(x1=1), pods) == [("new", "x1")]
    deleting = _pod("going", gated=False, host="x1")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert _plan(_hosts(x1=1), [deleting, _pod("new")]) == [("new", "x1")]


def test_every_level_of_a_domain_goes_into_the_selector() -> None:
    assignment = TopologyAssignment(("block", "rack"), (Domain(("b1", "r2"), 1),))
    [(_, labels)] = topology_ungater.plan(assignment, [_pod("p")])
    assert labels == {"block": "b1", "rack": "r2"}


def test_ungated_adds_the_selector_removes_only_the_topology_gate() -> None:
    pod = _pod("p")
    pod["spec"]["nodeSelector"] = {"pool": "a"}
    pod["spec"]["schedulingGates"].append({"name": "other"})
    result = topology_ungater.ungated(pod, {HOST: "x1"})
    assert result["spec"]["nodeSelector"] == {"pool": "a", HOST: "x1"}
    assert result["spec"]["schedulingGates"] == [{"name": "other"}]
    assert pod["spec"]["schedulingGates"] == [GATE, {"name": "other"}]  # the input is not changed
    assert "schedulingGates" not in topology_ungater.ungated(_pod("q"), {HOST: "x1"})["spec"]


def test_ungated_refuses_a_selector_contradicting_the_domain() -> None:
    with pytest.raises(ValueError, match=r"kubernetes\.io/hostname=x9"):
        topology_ungater.ungated(_pod("p", host="x9"), {HOST: "x1"})


def test_assignments_of_reads_the_v1beta2_slices_and_names_a_bad_one() -> None:
    workload = {
        "metadata": {"name": "wl"},
        "status": {
            "admission": {
                "podSetAssignments": [
                    {"name": "plain"},
                    {"name": "main", "topologyAssignment": _hosts(x1=2, x2=1).to_v1beta2()},
                ]
            }
        },
    }
    assert topology_ungater.assignments_of(workload) == {"main": _hosts(x1=2, x2=1)}
    workload["status"]["admission"]["podSetAssignments"][1]["topologyAssignment"] = {"levels": []}
    with pytest.raises(ValueError, match=r"Workload wl: .*podSetAssignments\[1\]\.topologyAssignment"):
        topology_ungater.assignments_of(workload)


def test_an_admission_with_a_topology_assignment_gates_the_template_and_restore_removes_it() -> None:
    assignment = {"name": "main", "flavors": {"cpu": "tas"}, "topologyAssignment": {"levels": [HOST]}}
    flavors = {"tas": {"spec": {"nodeLabels": {"pool": "a"}}}}
    info = jobframework.PodSetInfo.from_assignment(assignment, flavors, 3, workload="wl")
    original: dict[str, Any] = {"spec": {"containers": [{"name": "main"}]}}
    pod_set = {"name": "main", "count": 3, "template": original}
    template: dict[str, Any] = {"spec": {"containers": [{"name": "main"}]}}
    jobframework.merge_into_template(template, info)
    assert template["spec"]["schedulingGates"] == [GATE]
    assert template["spec"]["nodeSelector"] == {"pool": "a"}
    assert template["metadata"]["annotations"] == {jobframework.WORKLOAD_ANNOTATION: "wl"}
    assert template["metadata"]["labels"] == {
        jobframework.POD_SET_LABEL: "main",
        jobframework.TAS_LABEL: "true",
    }
    assert jobframework.restore_template(template, jobframework.PodSetInfo.from_pod_set(pod_set))
    assert "schedulingGates" not in template["spec"]
    plain = jobframework.PodSetInfo.from_assignment({"name": "main", "flavors": {"cpu": "tas"}}, flavors, 3)
    assert plain.scheduling_gates == () and not plain.labels


def _bound(name: str, version: int, *, phase: str = "Running", labels: dict[str, str] | None = None) -> Any:
    pod = _pod(name, gated=False, phase=phase)
    pod["metadata"].update(resourceVersion=str(version), labels=labels or {})
    pod["spec"]["nodeName"] = "x1"
    pod["spec"]["containers"] = [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]
    return pod


def test_the_admission_controller_hands_the_engine_only_pod_changes_that_move_capacity() -> None:
    controller = AdmissionController(MemoryStore(), kinds=admission.with_topology_kinds())
    assert controller.kinds[-4:] == ("Topology", "Node", "Pod", "Workload")
    pods = controller.state.cluster.pods

    controller.handle(WatchEvent("ADDED", _bound("a", 1), "1"))
    assert pods["ns/a"][0] == "x1"
    version = controller.state.cluster.version
    restarted = _bound("a", 2)
    restarted["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    controller.handle(WatchEvent("MODIFIED", restarted, "2"))
    assert controller.state.cluster.version == version  # a status change only: the engine not touched
    controller.handle(WatchEvent("MODIFIED", _bound("a", 3, phase="Succeeded"), "3"))
    assert "ns/a" not in pods

    controller.handle(WatchEvent("ADDED", _bound("t", 4, labels={jobframework.TAS_LABEL: "true"}), "4"))
    assert "ns/t" not in pods

    # Pods are keyed by namespace: a deleted pod frees its node, a namesake elsewhere stays.
    elsewhere = _bound("b", 5)
    elsewhere["metadata"]["namespace"] = "other"
    controller.handle(WatchEvent("ADDED", _bound("b", 6), "6"))
    controller.handle(WatchEvent("ADDED", elsewhere, "5"))
    controller.handle(WatchEvent("DELETED", _bound("b", 7), "7"))
    assert set(pods) == {"other/b"}
