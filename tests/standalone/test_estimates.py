"""Estimated start times on a real server: learned from finished jobs, bounded by a Job's deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config


def _describe(server: Server, name: str) -> dict[str, Any]:
    response = server.request("GET", f"/api/v1/describe/workload/default/{name}")
    return response.json() if response.status_code == 200 else {}


def _seconds(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def test_pending_job_gets_an_estimate_from_the_running_jobs_deadline(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="1") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    # Three short jobs finish first: the queue learns from them.
    assert server.apply([job(f"short-{i}", "sleep 2") for i in range(3)]).status_code == 200
    wait_until(
        lambda: sum(j["state"] == "Succeeded" for j in server.jobs().values()) == 3,
        timeout=60,
    )
    running = job("running", "sleep 120")
    running["spec"]["activeDeadlineSeconds"] = 40
    assert server.apply([running]).status_code == 200
    wait_until(lambda: server.jobs().get("default/running", {}).get("state") == "Running", timeout=30)
    started = time.time()
    assert server.apply([job("waiting", "sleep 30")]).status_code == 200

    def estimated() -> dict[str, str] | None:
        found: dict[str, str] | None = _describe(server, "waiting").get("estimatedStart")
        return found if found and found["basis"].startswith("learned") else None

    estimate = wait_until(estimated, timeout=40)
    # The running job ends by its 40 s deadline: the waiting one starts then, not after the
    # learned running time (2-3 s) nor the default hour.
    assert started + 30 <= _seconds(estimate["at"]) <= started + 45
    assert estimate["basis"] == "learned p50 of 3 finished in default/main"
    assert _seconds(estimate["low"]) <= _seconds(estimate["at"]) <= _seconds(estimate["high"])
    listed = server.cli("get", "workloads")
    assert "ESTIMATED START" in listed.stdout
    described = server.cli("describe", "workload", "waiting")
    assert "Estimated: starts" in described.stdout and "learned p50 of 3" in described.stdout
    # Once it is admitted it has no estimate any more.
    server.request("DELETE", "/api/v1/objects/Job/default/running")
    wait_until(lambda: server.jobs().get("default/waiting", {}).get("state") == "Running", timeout=60)
    assert _describe(server, "waiting").get("estimatedStart") is None
