"""The dashboard's flavor rows, workload outcomes, and one object's YAML cut to the caller (issue 44, item 5)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
import yaml

from pykueue.api import access, manifests
from pykueue.engine import loading
from pykueue.store.base import Manifest
from pykueue.views import dashboard_data, dashboard_objects

from .test_dashboard_data import ADMIN, ALICE, FLAVOR, KUEUE, _world

GPU = {
    "apiVersion": KUEUE,
    "kind": "ResourceFlavor",
    "metadata": {"name": "a100-80gb-sxm4-nvidia-hgx-reserved"},
    "spec": {
        "nodeLabels": {"nvidia.com/gpu.product": "A100-SXM4-80GB"},
        "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    },
}


def _stored(state_docs: list[dict[str, Any]]) -> dashboard_objects.Lookup:
    """A store of the given manifests, looked up as the routes do."""
    by_key = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in state_docs}

    async def lookup(kind: str, namespace: str, name: str) -> Manifest | None:
        return by_key.get((kind, namespace, name))

    return lookup


def _condition(kind: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


def test_a_workload_outcome_names_success_failure_preemption_and_eviction() -> None:
    def of(state: str, *conditions: dict[str, Any]) -> tuple[str, str]:
        return dashboard_data.outcome({"status": {"conditions": list(conditions)}}, state)

    assert of("Finished", _condition("Finished", "Succeeded", "done")) == ("Succeeded", "done")
    assert of("Failed", _condition("Finished", "Failed", "exit code 1")) == ("Failed", "exit code 1")
    assert of("Pending", _condition("Evicted", "Preempted", "by a")) == ("Preempted", "by a")
    assert of("Pending", _condition("Preempted", "InCohortReclamation", "x")) == ("Preempted", "x")
    assert of("Pending", _condition("Evicted", "PodsReadyTimeout", "slow")) == ("Evicted", "slow")
    assert of("Admitted", {"type": "Evicted", "status": "False", "reason": "Preempted"}) == ("", "")
    assert of("Pending") == ("", "")


def test_the_document_lists_flavors_with_their_nodes_and_each_queue_s_quota() -> None:
    state, workloads = _world()
    loading.apply(state, manifests.parse_object(copy.deepcopy(GPU)))
    document = dashboard_data.build(state, workloads, ADMIN, dashboard_data.UsageHistory(), 0.0)
    flavors = {f["name"]: f for f in document["flavors"]}
    assert flavors["default"]["clusterQueues"] == ["product-cq", "research-cq"]
    used = {u["clusterQueue"]: (u["used"], u["nominal"]) for u in flavors["default"]["usage"]}
    assert used == {"product-cq": (0.0, 4.0), "research-cq": (6.0, 4.0)}
    # An admin sees a flavor no queue uses yet, with what its nodes carry.
    gpu = flavors[GPU["metadata"]["name"]]
    assert gpu["nodeLabels"] == {"nvidia.com/gpu.product": "A100-SXM4-80GB"}
    assert gpu["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert gpu["clusterQueues"] == [] and gpu["defined"]
    # A tenant sees the flavors of its ClusterQueues, and only its queues' use of them.
    seen = dashboard_data.build(state, workloads, ALICE, dashboard_data.UsageHistory(), 0.0)
    assert [(f["name"], f["clusterQueues"]) for f in seen["flavors"]] == [("default", ["research-cq"])]


def _answer(identity: access.Identity, kind: str, path: str) -> dict[str, Any]:
    state, workloads = _world()
    docs = [
        FLAVOR,
        GPU,
        *workloads,
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "product-cq"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "research-cq"}},
        {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": "product"}},
    ]
    loading.apply(state, manifests.parse_object(copy.deepcopy(GPU)))
    return asyncio.run(dashboard_objects.answer(state, identity, kind, path, _stored(docs)))


def test_an_object_page_shows_the_stored_manifest_as_yaml() -> None:
    shown = _answer(ALICE, "Workload", "research/next")
    assert (shown["kind"], shown["namespace"], shown["name"]) == ("Workload", "research", "next")
    parsed = yaml.safe_load(shown["yaml"])
    assert parsed["metadata"] == {
        "name": "next",
        "namespace": "research",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    assert list(parsed) == ["apiVersion", "kind", "metadata", "spec"], "the stored order, not sorted"
    assert yaml.safe_load(_answer(ALICE, "ClusterQueue", "research-cq")["yaml"])["kind"] == "ClusterQueue"
    assert _answer(ALICE, "Cohort", "org")["name"] == "org"
    assert _answer(ALICE, "ResourceFlavor", "default")["name"] == "default"
    assert _answer(ADMIN, "LocalQueue", "product/main")["namespace"] == "product"


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Workload", "product/theirs"),  # another team's workload
        ("LocalQueue", "product/main"),  # another team's LocalQueue
        ("ClusterQueue", "product-cq"),  # a ClusterQueue none of alice's LocalQueues points at
        ("ResourceFlavor", "a100-80gb-sxm4-nvidia-hgx-reserved"),  # no queue of alice's names it
        ("Workload", "research/no-such"),  # absent: the same answer as hidden
        ("Secret", "research/x"),  # not a kind the dashboard shows
        ("Workload", "next"),  # a namespaced kind without its namespace
        ("ClusterQueue", "a/b"),  # a cluster-scoped kind with one
    ],
)
def test_a_tenant_gets_no_object_outside_its_cut(kind: str, path: str) -> None:
    with pytest.raises(dashboard_objects.Refused):
        _answer(ALICE, kind, path)


def test_an_admin_sees_every_object() -> None:
    assert _answer(ADMIN, "Workload", "product/theirs")["name"] == "theirs"
    assert _answer(ADMIN, "ClusterQueue", "product-cq")["name"] == "product-cq"


def test_the_list_keeps_the_most_recently_finished_workloads_only() -> None:
    """Finished ones follow the live ones, newest finish first, at most `FINISHED_SHOWN` of them."""
    state, workloads = _world()
    finished = []
    for index in range(dashboard_data.FINISHED_SHOWN + 5):
        wl = copy.deepcopy(workloads[0])
        wl["metadata"]["name"] = f"done-{index:02d}"
        # Created in one order, finished in the other: the finish time decides.
        wl["metadata"]["creationTimestamp"] = f"2026-01-01T00:{index:02d}:00Z"
        finish = {"type": "Finished", "status": "True", "reason": "Succeeded"}
        finish["lastTransitionTime"] = f"2026-01-02T00:{59 - index:02d}:00Z"
        wl["status"] = {"conditions": [finish]}
        finished.append(wl)
    document = dashboard_data.build(state, workloads + finished, ADMIN, dashboard_data.UsageHistory(), 0.0)
    names = [w["name"] for w in document["workloads"]]
    assert set(names[:3]) == {"big", "next", "theirs"}  # the live ones first
    shown = names[3:]
    assert len(shown) == dashboard_data.FINISHED_SHOWN
    assert shown[:2] == ["done-00", "done-01"] and "done-54" not in shown
    assert all(w["outcome"] == "Succeeded" for w in document["workloads"][3:])
