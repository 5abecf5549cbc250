"""A job's maximum execution time in standalone mode: its process is stopped when the time is up,
its Workload is deactivated, and the job waiting for its quota runs. With objectRetentionPolicies,
finished Workloads and the jobs Kueue deactivated are deleted afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pykueue.reconcilers.jobframework import MAX_EXEC_TIME_LABEL

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config


def test_a_job_past_its_maximum_execution_time_is_stopped_and_deactivated(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    config = write_config(
        tmp_path, cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    server = start_server(config)
    limited = job("limited", "sleep 300", cpu="2")
    limited["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "2"
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


def test_retention_deletes_finished_workloads_and_the_jobs_kueue_deactivated(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    config = write_config(
        tmp_path, cluster_queue("main", cpu="4") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    raw = yaml.safe_load(config.read_text())
    raw["objectRetentionPolicies"] = {"workloads": {"afterFinished": "1s", "afterDeactivatedByKueue": "1s"}}
    config.write_text(yaml.safe_dump(raw))
    server = start_server(config)
    limited = job("limited", "sleep 300")
    limited["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "1"
    assert server.apply([job("quick", "true"), limited]).status_code == 200

    def workload_names() -> set[str]:
        return {
            w["metadata"]["name"].rsplit("-", 1)[0] for w in server.api("GET", "/api/v1/objects/Workload")
        }

    wait_until(lambda: server.jobs().get("default/quick", {}).get("state") == "Succeeded", timeout=30)
    # The finished job's Workload goes after its second of retention; the job stays.
    wait_until(lambda: "job-quick" not in workload_names(), timeout=30)
    assert server.jobs()["default/quick"]["state"] == "Succeeded"
    # The job Kueue deactivated (its time was up) is deleted, its Workload with it.
    wait_until(lambda: "default/limited" not in server.jobs(), timeout=30)
    wait_until(lambda: "job-limited" not in workload_names(), timeout=30)


def test_a_workload_that_finished_before_a_restart_is_deleted_after_it(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    config = write_config(
        tmp_path, cluster_queue("main", cpu="4") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    server = start_server(config)
    assert server.apply([job("quick", "true")]).status_code == 200
    wait_until(lambda: server.jobs().get("default/quick", {}).get("state") == "Succeeded", timeout=30)
    names = lambda: [w["metadata"]["name"] for w in server.api("GET", "/api/v1/objects/Workload")]  # noqa: E731
    assert len(names()) == 1
    server.kill()
    # The same server, now with a retention period: nothing is watched in, the first list has it.
    assert server.config is not None
    raw = yaml.safe_load(server.config.read_text())
    raw["objectRetentionPolicies"] = {"workloads": {"afterFinished": "1s"}}
    server.config.write_text(yaml.safe_dump(raw))
    server.start()
    wait_until(lambda: names() == [], timeout=30)
    assert server.jobs()["default/quick"]["state"] == "Succeeded"
