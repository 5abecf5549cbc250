"""A job's maximum execution time in standalone mode: its process is stopped when the time is up,
its Workload is deactivated, and the job waiting for its quota runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config


def test_a_job_past_its_maximum_execution_time_is_stopped_and_deactivated(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    config = write_config(
        tmp_path, cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    server = start_server(config)
    limited = job("limited", "sleep 300", cpu="2")
    limited["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "2"
    behind = job("behind", "sleep 300", cpu="2")
    assert server.apply([limited]).status_code == 200
    wait_until(lambda: server.jobs().get("default/limited", {}).get("active") == 1, timeout=30)
    assert server.apply([behind]).status_code == 200

    def workload(name: str) -> dict[str, Any]:
        return next(
            (
                w
                for w in server.api("GET", "/api/v1/objects/Workload")
                if w["metadata"]["name"].startswith(f"job-{name}-")
            ),
            {},
        )

    wait_until(lambda: workload("limited").get("spec", {}).get("active") is False, timeout=30)
    assert workload("limited")["spec"]["maximumExecutionTimeSeconds"] == 2
    # The process is stopped, and the quota goes to the job behind it.
    wait_until(lambda: server.jobs()["default/limited"]["active"] == 0, timeout=30)
    wait_until(lambda: server.jobs().get("default/behind", {}).get("active") == 1, timeout=30)
    evicted = next(c for c in workload("limited")["status"]["conditions"] if c["type"] == "Evicted")
    assert evicted["status"] == "True"
    assert evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded", evicted
    described = server.cli("describe", "workload", "limited")
    assert "State:     Inactive" in described.stdout, described.stdout
