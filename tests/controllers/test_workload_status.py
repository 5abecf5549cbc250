"""The Workload status the controller writes: only what the engine decided, nothing for nothing."""

from __future__ import annotations

from pykueue.api.workload import Workload as ApiWorkload
from pykueue.engine import intake
from pykueue.engine.topology_assignments import Domain, TopologyAssignment
from pykueue.engine.workloads import Admission, Condition, PodSet, PodSetAssignment, Workload
from pykueue.reconcilers import workload_status


def _workload() -> Workload:
    return Workload(namespace="ns", name="w", queue_name="lq", pod_sets=[])


def test_a_workload_nothing_happened_to_needs_no_write() -> None:
    # A just-created Workload has no status; the desired one must equal it, or every
    # creation would cost a status write that says nothing.
    assert workload_status.desired_status(_workload(), None) == {}
    assert workload_status.desired_status(_workload(), {}) == {}


def test_conditions_of_other_writers_are_kept_beside_the_engines() -> None:
    wl = _workload()
    wl.conditions["QuotaReserved"] = Condition("QuotaReserved", "False", "Pending", "waiting", 0)
    stored = {"conditions": [{"type": "PodsReady", "status": "False", "reason": "Waiting"}]}
    desired = workload_status.desired_status(wl, stored)
    assert [c["type"] for c in desired["conditions"]] == ["PodsReady", "QuotaReserved"]
    assert desired["conditions"][1]["reason"] == "Pending"


def test_an_emptied_condition_list_is_written_as_empty() -> None:
    # The engine dropped its conditions (a finished re-queue, say): the stored ones go.
    stored = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}]}
    assert workload_status.desired_status(_workload(), stored) == {"conditions": []}


def _preempted_workload() -> Workload:
    wl = _workload()
    for kind, status, reason in (
        ("QuotaReserved", "False", "Pending"),
        ("Admitted", "False", "NoReservation"),
        ("Evicted", "True", "Preempted"),
        ("Preempted", "True", "InClusterQueue"),
        ("Requeued", "True", "Preempted"),
    ):
        wl.conditions[kind] = Condition(kind, status, reason, "Preempted to accommodate ns/high", 0)
    return wl


def test_an_admission_taken_back_before_it_was_written_is_not_written_as_an_eviction() -> None:
    # Admitted in one pass, preempted in a later one, while its admission still waited for
    # a write slot: the API never showed it admitted, so it shows no eviction either.
    desired = workload_status.desired_status(_preempted_workload(), {})
    assert [c["type"] for c in desired["conditions"]] == ["QuotaReserved", "Admitted"]
    assert "admission" not in desired


def test_an_admission_that_was_written_is_evicted_in_the_open() -> None:
    stored = {"admission": {"clusterQueue": "cq", "podSetAssignments": []}}
    desired = workload_status.desired_status(_preempted_workload(), stored)
    assert "admission" not in desired
    types = {c["type"]: c["status"] for c in desired["conditions"]}
    assert types == {
        "QuotaReserved": "False",
        "Admitted": "False",
        "Evicted": "True",
        "Preempted": "True",
        "Requeued": "True",
    }


def test_an_earlier_written_eviction_stays_as_it_was_stored() -> None:
    earlier = {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by ns/first"}
    desired = workload_status.desired_status(_preempted_workload(), {"conditions": [earlier]})
    assert [c for c in desired["conditions"] if c["type"] == "Evicted"] == [earlier]
    assert not [c for c in desired["conditions"] if c["type"] in ("Preempted", "Requeued")]


def test_a_topology_assignment_is_written_in_v1beta2_form_and_read_back() -> None:
    wl = Workload(namespace="ns", name="w", queue_name="lq", pod_sets=[PodSet("main", 3, {"cpu": 1000})])
    topology = TopologyAssignment(("kubernetes.io/hostname",), (Domain(("x1",), 2), Domain(("x2",), 1)))
    wl.admission = Admission("cq", [PodSetAssignment("main", {"cpu": "tas"}, {"cpu": 3000}, 3, topology)])
    status = workload_status.desired_status(wl, {"unhealthyNodes": [{"name": "x9"}]})
    written = status["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert "slices" in written and "domains" not in written
    assert "unhealthyNodes" not in status  # cleared: the engine placed the failed node's pods again
    manifest = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 3}]},
        "status": status,
    }
    read = intake.workload(ApiWorkload.model_validate(manifest), {}, [])
    assert read.admission is not None and read.admission.pod_sets[0].topology == topology


def test_a_delayed_topology_request_is_written_and_read_back() -> None:
    # Quota first, topology after the ProvisioningRequest: the state must survive a restart.
    wl = Workload(namespace="ns", name="w", queue_name="lq", pod_sets=[PodSet("main", 1, {"cpu": 1000})])
    wl.admission = Admission(
        "cq", [PodSetAssignment("main", {"cpu": "tas"}, {"cpu": 1000}, 1, None, "Pending")]
    )
    status = workload_status.desired_status(wl, None)
    written = status["admission"]["podSetAssignments"][0]
    assert written["delayedTopologyRequest"] == "Pending" and "topologyAssignment" not in written
    manifest = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
        "status": status,
    }
    read = intake.workload(ApiWorkload.model_validate(manifest), {}, [])
    assert read.admission is not None and read.admission.pod_sets[0].topology_pending


def test_a_pending_workload_says_what_it_asks_for_per_pod_set() -> None:
    # Upstream's scheduler writes status.resourceRequests with the pending QuotaReserved
    # condition: the pod set's count times one pod's requests.
    wl = Workload(
        namespace="ns",
        name="w",
        queue_name="lq",
        pod_sets=[PodSet(name="main", count=3, requests={"cpu": 500, "memory": 2**20 * 1000})],
    )
    assert "resourceRequests" not in workload_status.desired_status(wl, None)  # not considered yet
    wl.conditions["QuotaReserved"] = Condition("QuotaReserved", "False", "Pending", "waiting", 0)
    desired = workload_status.desired_status(wl, None)
    assert desired["resourceRequests"] == [{"name": "main", "resources": {"cpu": "1500m", "memory": "3Mi"}}]
    ApiWorkload.model_validate({"metadata": {"name": "w"}, "status": desired})  # upstream's shape
