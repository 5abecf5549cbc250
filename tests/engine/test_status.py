"""ClusterQueue, Cohort and LocalQueue status documents, as controllers will write them."""

from __future__ import annotations

from typing import Any

from pykueue.api import manifests
from pykueue.engine import loading, scheduler, status
from pykueue.engine.config import EngineConfig, FairSharing
from pykueue.engine.state import State

FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}


def _cq(name: str, nominal: str, cohort: str = "", weight: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _lq(namespace: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def _wl(namespace: str, name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "main",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }


def _state(*docs: dict[str, Any], fair: bool = False) -> State:
    state = State(config=EngineConfig(fair_sharing=FairSharing(enable=fair)))
    for doc in docs:
        loading.apply(state, manifests.parse_object(doc))
    return state


def test_counts_usage_and_borrowing_of_a_cluster_queue() -> None:
    state = _state(
        FLAVOR,
        _cq("a", "4", cohort="org"),
        _cq("b", "4", cohort="org"),
        _lq("team-a", "a"),
        _wl("team-a", "big", "6"),
        _wl("team-a", "waits", "6"),
    )
    scheduler.run_cycle(state)
    result = status.cluster_queue_status(state, "a")
    assert result["reservingWorkloads"] == 1
    assert result["admittedWorkloads"] == 1
    assert result["pendingWorkloads"] == 1
    assert result["flavorsReservation"] == [
        {"name": "default", "resources": [{"name": "cpu", "total": "6", "borrowed": "2"}]}
    ]
    assert result["conditions"][0]["status"] == "True"
    assert result["conditions"][0]["reason"] == "Ready"


def test_a_queue_naming_a_missing_flavor_is_inactive_with_upstream_reason() -> None:
    state = _state(_cq("a", "4"))
    result = status.cluster_queue_status(state, "a")
    condition = result["conditions"][0]
    assert condition["status"] == "False"
    assert condition["reason"] == "FlavorNotFound"
    assert "missing ResourceFlavor(s): default" in condition["message"]


def test_weighted_share_is_reported_under_fair_sharing_and_follows_the_weight() -> None:
    docs = [FLAVOR, _cq("a", "4", cohort="org", weight="2"), _cq("b", "4", cohort="org"), _lq("team-a", "a")]
    state = _state(*docs, _wl("team-a", "big", "6"), fair=True)
    scheduler.run_cycle(state)
    # a borrows 2 CPUs of the 8 its cohort could give it: 250 per mille, halved by weight 2.
    assert status.cluster_queue_status(state, "a")["fairSharing"] == {"weightedShare": 125}
    assert status.cluster_queue_status(state, "b")["fairSharing"] == {"weightedShare": 0}
    assert status.cohort_status(state, "org") == {"fairSharing": {"weightedShare": 0}}


def test_local_queue_status_counts_its_own_workloads_only() -> None:
    state = _state(FLAVOR, _cq("a", "4"), _lq("team-a", "a"), _lq("team-b", "a"), _wl("team-a", "one", "1"))
    state_b = status.local_queue_status(state, "team-b/main")
    assert state_b["pendingWorkloads"] == 0
    assert status.local_queue_status(state, "team-a/main")["pendingWorkloads"] == 1
    scheduler.run_cycle(state)
    after = status.local_queue_status(state, "team-a/main")
    assert after["admittedWorkloads"] == 1
    assert after["flavorsUsage"] == [{"name": "default", "resources": [{"name": "cpu", "total": "1"}]}]
    assert after["conditions"][0]["reason"] == "Ready"


def _inactive(namespace: str, name: str, cpu: str) -> dict[str, Any]:
    doc = _wl(namespace, name, cpu)
    doc["spec"]["active"] = False
    return doc


def test_a_deactivated_workload_is_pending_in_neither_its_local_queue_nor_its_cluster_queue() -> None:
    # As upstream's queue manager: only admissible workloads are pending. The LocalQueue counted
    # the deactivated ones its tenants could not see anywhere else (38 against 36).
    docs = [
        FLAVOR,
        _cq("a", "4"),
        _lq("team-a", "a"),
        _wl("team-a", "waits", "8"),
        _inactive("team-a", "off", "1"),
    ]
    state = _state(*docs)
    scheduler.run_cycle(state)
    assert status.cluster_queue_status(state, "a")["pendingWorkloads"] == 1
    assert status.local_queue_status(state, "team-a/main")["pendingWorkloads"] == 1


def test_a_workload_deactivated_while_admitted_leaves_both_counts() -> None:
    state = _state(FLAVOR, _cq("a", "4"), _lq("team-a", "a"), _wl("team-a", "runs", "1"))
    scheduler.run_cycle(state)
    loading.apply(state, manifests.parse_object(_inactive("team-a", "runs", "1")))
    scheduler.run_cycle(state)
    local, cluster = status.local_queue_status(state, "team-a/main"), status.cluster_queue_status(state, "a")
    assert (local["pendingWorkloads"], local["reservingWorkloads"]) == (0, 0)
    assert (cluster["pendingWorkloads"], cluster["reservingWorkloads"]) == (0, 0)


def test_pending_workloads_of_a_missing_cluster_queue_still_count_in_their_local_queue() -> None:
    # upstream keeps them in the LocalQueue's items while its ClusterQueue does not exist
    state = _state(
        FLAVOR, _lq("team-a", "gone"), _wl("team-a", "waits", "1"), _inactive("team-a", "off", "1")
    )
    assert status.local_queue_status(state, "team-a/main")["pendingWorkloads"] == 1
