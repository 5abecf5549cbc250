"""Finding 3: a tenant set spec.priority on a Workload and preempted other tenants' jobs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..helpers import Server, job, wait_until
from .common import tenant, two_teams


def _workload(name: str, priority: int | None, priority_class: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "main",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    if priority_class is not None:
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": priority_class,
        }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "research"},
        "spec": spec,
    }


def test_a_tenant_cannot_choose_its_workloads_priority(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research", "--priority-class", "batch")

    for name, priority, klass in (("pushy", 999999, "batch"), ("classless", 999999, None), ("low", -5, None)):
        refused = server.apply([_workload(name, priority, klass)], token=alice)
        assert refused.status_code == 403, refused.text
        assert f"tenant alice may not set spec.priority to {priority}" in refused.json()["problems"][0]
    assert server.api("GET", "/api/v1/objects/Workload", params={"namespace": "research"}) == []

    # Its class's own value, or none at all, is accepted.
    assert server.apply([_workload("fair", 10, "batch")], token=alice).status_code == 200
    assert server.apply([_workload("plain", None, "batch")], token=alice).status_code == 200

    # Re-applying its own Job's Workload with a higher priority is refused; unchanged, it is fine.
    assert (
        server.apply(
            [job("mine", "sleep 5", namespace="research", priority_class="batch")], token=alice
        ).status_code
        == 200
    )

    def own_workload() -> dict[str, Any] | None:
        found = [
            w
            for w in server.api("GET", "/api/v1/objects/Workload", params={"namespace": "research"})
            if w["metadata"]["name"].startswith("job-mine-")
        ]
        return found[0] if found else None

    stored = wait_until(own_workload)
    assert stored["spec"]["priority"] == 10
    raised = copy.deepcopy(stored)
    raised["spec"]["priority"] = 999999
    refused = server.apply([raised], token=alice)
    assert refused.status_code == 403 and "may not set spec.priority to 999999" in refused.text
    assert server.apply([copy.deepcopy(stored)], token=alice).status_code == 200
    current = server.api("GET", f"/api/v1/objects/Workload/research/{stored['metadata']['name']}")
    assert current["spec"]["priority"] == 10

    # An admin may.
    assert server.apply([_workload("chosen", 500, None)]).status_code == 200


def test_a_tenant_cannot_rewrite_the_pod_sets_of_its_admitted_workload(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research")
    submitted = server.apply([job("small", "sleep 300", namespace="research", cpu="1")], token=alice)
    assert submitted.status_code == 200, submitted.text

    def admitted() -> dict[str, Any] | None:
        found = server.api("GET", "/api/v1/objects/Workload", params={"namespace": "research"})
        return found[0] if found and (found[0].get("status") or {}).get("admission") else None

    stored = wait_until(admitted)
    grown = copy.deepcopy(stored)
    grown["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "64"
    refused = server.apply([grown], token=alice)
    assert refused.status_code == 422, refused.text
    assert "spec.podSets: field is immutable while the Workload has quota reserved" in refused.text
    name = stored["metadata"]["name"]
    current = server.api("GET", f"/api/v1/objects/Workload/research/{name}")
    assert current["spec"]["podSets"] == stored["spec"]["podSets"]
