"""The dashboard's document, built from an engine state: the cohort tree, borrowing, and the tenant's cut."""

from __future__ import annotations

import copy
from typing import Any

from pykueue.api import access, manifests
from pykueue.engine import loading, scheduler
from pykueue.engine.state import State
from pykueue.views import dashboard_data

KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVOR = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
ADMIN = access.Identity("root", access.ADMIN)
ALICE = access.Identity("alice", access.TENANT, namespaces=("research",))


def _cohort(name: str, parent: str = "") -> dict[str, Any]:
    spec = {"parentName": parent} if parent else {}
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _cq(name: str, cohort: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }


def _lq(namespace: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def _wl(namespace: str, name: str, cpu: str) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "queueName": "main",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


def _world() -> tuple[State, list[dict[str, Any]]]:
    """org > (research-side > research-cq, product-cq); research borrows 2 CPUs of product's idle 4."""
    workloads = [_wl("research", "big", "6"), _wl("research", "next", "6"), _wl("product", "theirs", "9")]
    docs = [
        FLAVOR,
        _cohort("org"),
        _cohort("research-side", parent="org"),
        _cq("research-cq", "research-side", "4"),
        _cq("product-cq", "org", "4"),
        _lq("research", "research-cq"),
        _lq("product", "product-cq"),
        *workloads,
    ]
    state = State()
    for doc in docs:
        loading.apply(state, manifests.parse_object(copy.deepcopy(doc)))
    for _ in range(3):
        scheduler.run_cycle(state)
    state.explain_waiting()
    return state, workloads


def test_the_cohort_tree_sums_its_queues_and_a_borrowing_queue_says_how_much() -> None:
    state, workloads = _world()
    history = dashboard_data.UsageHistory()
    history.sample(state, 1_800_000_000.0)
    document = dashboard_data.build(state, workloads, ADMIN, history, 1_800_000_000.0)

    cohorts = {c["name"]: c for c in document["cohorts"]}
    assert cohorts["org"]["parent"] == "" and cohorts["org"]["cohorts"] == ["research-side"]
    assert cohorts["org"]["clusterQueues"] == ["product-cq"]
    assert cohorts["research-side"]["clusterQueues"] == ["research-cq"]
    assert cohorts["research-side"]["usage"] == {"default/cpu": {"used": 6.0, "nominal": 4.0}}
    assert cohorts["org"]["usage"] == {"default/cpu": {"used": 6.0, "nominal": 8.0}}

    research = next(q for q in document["clusterQueues"] if q["name"] == "research-cq")
    assert research["usage"][0] | {"usedText": "", "nominalText": ""} == {
        "flavor": "default",
        "resource": "cpu",
        "used": 6.0,
        "nominal": 4.0,
        "borrowed": 2.0,
        "borrowingLimit": None,
        "usedText": "",
        "nominalText": "",
    }
    rows = {w["name"]: w for w in document["workloads"]}
    # (Its manifest here has no status: the engine's admission was never written back.)
    assert rows["big"]["cause"] is None and rows["big"]["position"] is None
    assert rows["next"]["cause"] == "quota" and rows["next"]["position"] == 1
    assert rows["theirs"]["cause"] == "capacity"
    assert all(rows[n]["estimatedStart"] is None for n in ("next", "theirs"))
    samples = document["history"]["samples"]
    assert samples[0]["clusterQueues"]["research-cq"]["used"] == {"default/cpu": 6.0}


def test_a_tenant_sees_its_namespaces_the_queues_it_uses_and_the_cohorts_above_them_only() -> None:
    state, workloads = _world()
    history = dashboard_data.UsageHistory()
    history.sample(state, 1_800_000_000.0)
    document = dashboard_data.build(state, workloads, ALICE, history, 1_800_000_000.0)
    assert {w["namespace"] for w in document["workloads"]} == {"research"}
    assert [q["name"] for q in document["clusterQueues"]] == ["research-cq"]
    assert [(q["namespace"], q["name"]) for q in document["localQueues"]] == [("research", "main")]
    assert [c["name"] for c in document["cohorts"]] == ["org", "research-side"]
    # The cohorts above alice's queue count only what alice may see: product's quota is not summed in.
    assert {c["name"]: c["usage"]["default/cpu"]["nominal"] for c in document["cohorts"]} == {
        "org": 4.0,
        "research-side": 4.0,
    }
    assert set(document["history"]["samples"][0]["clusterQueues"]) == {"research-cq"}


def test_the_history_keeps_one_sample_per_interval_when_sampled_on_demand() -> None:
    state, _ = _world()
    history = dashboard_data.UsageHistory()
    start = 1_800_000_000.0
    for offset in (0.0, 1.0, dashboard_data.HISTORY_INTERVAL - 0.1, dashboard_data.HISTORY_INTERVAL):
        history.sample_if_due(state, start + offset)
    assert len(history.samples) == 2


def test_an_aged_workload_shows_its_aged_priority_and_the_policy_in_words() -> None:
    state, workloads = _world()
    research = copy.deepcopy(_cq("research-cq", "research-side", "4"))
    research["metadata"]["annotations"] = {"pykueue.io/aging": '{"rate": "1/10m", "cap": 5}'}
    loading.apply(state, manifests.parse_object(research))
    created = 1_767_225_600  # the workloads' creationTimestamp, 2026-01-01T00:00:00Z
    state.advance_clock((created + 35 * 60) * 10**6)  # 35 minutes of wait: 3 points
    scheduler.run_cycle(state)
    document = dashboard_data.build(
        state, workloads, ADMIN, dashboard_data.UsageHistory(), created + 35 * 60.0
    )
    rows = {w["name"]: w for w in document["workloads"]}
    assert (rows["next"]["priority"], rows["next"]["aged"]) == (3, 3)
    assert rows["next"]["aging"] == "priority 3 = 0 + 3 aged waiting (1 per 600s of wait, at most 5)"
    # product-cq has no policy: nothing aged, nothing said.
    assert (rows["theirs"]["priority"], rows["theirs"]["aged"], rows["theirs"]["aging"]) == (0, 0, "")
