"""When a node counts as failed under a TAS workload, and what is written then."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from pykueue.engine.topology_assignments import Domain, TopologyAssignment
from pykueue.reconcilers import jobframework, node_failures
from pykueue.store.base import Key, WatchEvent
from pykueue.store.memory import MemoryStore

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _node(name: str, ready: str | None, since: datetime = NOW) -> dict[str, Any]:
    conditions = (
        [] if ready is None else [{"type": "Ready", "status": ready, "lastTransitionTime": since.isoformat()}]
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {node_failures.HOSTNAME: name}},
        "status": {"conditions": conditions},
    }


def test_a_node_fails_after_the_delay_of_not_ready_at_once_without_a_ready_condition() -> None:
    assert node_failures.failed_at(_node("x", "True")) is None
    assert node_failures.failed_at(_node("x", "False", NOW)) == NOW + timedelta(seconds=30)
    assert node_failures.failed_at(_node("x", "Unknown", NOW), timedelta(seconds=5)) == NOW + timedelta(
        seconds=5
    )
    assert node_failures.failed_at(_node("x", None)) == datetime.min


def _workload(hosts: list[str]) -> dict[str, Any]:
    assignment = TopologyAssignment((node_failures.HOSTNAME,), tuple(Domain((h,), 1) for h in hosts))
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {
            "podSets": [{"name": "main", "count": len(hosts), "template": {"spec": {"containers": []}}}]
        },
        "status": {
            "conditions": [{"type": "Admitted", "status": "True"}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "topologyAssignment": assignment.to_v1beta2()}],
            },
        },
    }


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {jobframework.WORKLOAD_ANNOTATION: "wl"},
        },
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": "Running"},
    }


def test_a_not_ready_node_is_written_into_its_workloads_once_due_and_its_pods_fail() -> None:
    async def scenario() -> tuple[int, int, dict[str, Any], dict[str, Any], dict[str, Any]]:
        store = MemoryStore(now=lambda: NOW)
        cache: dict[Key, Any] = {}
        for obj in (_workload(["x1", "x2"]), _pod("p1", "x1"), _pod("p2", "x2"), _node("x1", "False", NOW)):
            stored = await store.create(obj)
            cache[Key.of(stored)] = stored
        clock = [NOW]
        failures = node_failures.NodeFailures(store, cache, lambda: clock[0])
        failures.handle(WatchEvent("MODIFIED", _node("x1", "False", NOW), "1"))
        early = await failures.reconcile()
        clock[0] = NOW + timedelta(seconds=31)
        due = await failures.reconcile()
        workload = await store.get("Workload", "ns", "wl")
        return early, due, workload, await store.get("Pod", "ns", "p1"), await store.get("Pod", "ns", "p2")

    early, due, workload, p1, p2 = asyncio.run(scenario())
    assert early == 0
    assert due == 2  # the workload and its pod on x1
    assert workload["status"]["unhealthyNodes"] == [{"name": "x1"}]
    assert p1["status"]["phase"] == "Failed"
    assert p2["status"]["phase"] == "Running"


def test_a_node_ready_again_is_forgotten() -> None:
    failures = node_failures.NodeFailures(MemoryStore(), {}, lambda: NOW)
    failures.handle(WatchEvent("MODIFIED", _node("x1", "False"), "1"))
    assert "x1" in failures.failing
    failures.handle(WatchEvent("MODIFIED", _node("x1", "True"), "2"))
    assert failures.failing == {}
