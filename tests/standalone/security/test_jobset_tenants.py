"""A tenant's JobSet: its pods run as the tenant's user, only in its namespaces, with its priority classes."""

from __future__ import annotations

import pwd
from collections.abc import Callable
from pathlib import Path

from ..helpers import Server, jobset, wait_until
from .common import job_state, tenant, two_teams


def test_a_tenants_jobset_runs_as_the_tenant_and_stays_in_its_namespaces(
    tmp_path: Path, start_server: Callable[..., Server], user_prefix: str
) -> None:
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research", "--priority-class", "batch")

    mine = jobset(
        "mine",
        [("a", 1, 1, "echo uid=$(id -u)", 0), ("b", 1, 2, "echo uid=$(id -u)", 0)],
        namespace="research",
    )
    mine["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "batch"
    response = server.apply([mine], token=alice)
    assert response.status_code == 200, response.text
    wait_until(lambda: job_state(server, "research/mine") == "Succeeded", timeout=60)
    alice_uid = pwd.getpwnam(f"{user_prefix}alice").pw_uid
    output = server.cli("logs", "mine", "-n", "research", token=alice).stdout
    assert output.count(f"uid={alice_uid}") == 3, output  # every pod of every replicated job

    elsewhere = jobset("elsewhere", [("a", 1, 1, "true", 0)], namespace="product")
    response = server.apply([elsewhere], token=alice)
    assert response.status_code == 403 and "JobSet/product/elsewhere" in response.text, response.text

    pushy = jobset("pushy", [("a", 1, 1, "true", 0)], namespace="research")
    pushy["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["priorityClassName"] = "urgent"
    response = server.apply([pushy], token=alice)
    assert response.status_code == 403 and "priority class urgent" in response.text, response.text
    assert [j["metadata"]["name"] for j in server.api("GET", "/api/v1/objects/JobSet")] == ["mine"]
