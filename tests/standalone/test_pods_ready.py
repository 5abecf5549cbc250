"""waitForPodsReady in standalone mode: readiness probes decide, a gang that never gets ready gives way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config


def _probe(manifest: dict[str, Any], command: list[str], period: int = 1) -> dict[str, Any]:
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"] = {
        "exec": {"command": command},
        "periodSeconds": period,
        "failureThreshold": 1,
    }
    return manifest


def test_a_job_that_never_gets_ready_is_requeued_then_deactivated_and_a_ready_one_stays(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    config = write_config(
        tmp_path, cluster_queue("main", cpu="4") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    raw = yaml.safe_load(config.read_text())
    raw["waitForPodsReady"] = {
        "timeout": "10s",  # long enough for the ready job to start and pass its probe on a busy machine
        "requeuingStrategy": {"backoffBaseSeconds": 1, "backoffLimitCount": 1},
    }
    config.write_text(yaml.safe_dump(raw))
    server = start_server(config)
    never = _probe(job("never", "sleep 300"), ["test", "-f", "no-such-file"])
    fine = _probe(job("fine", "touch ready; sleep 300"), ["test", "-f", "ready"])
    assert server.apply([never, fine]).status_code == 200

    def workload(name: str) -> dict[str, Any]:
        # {} until the job reconciler has made it (the first poll may come first).
        return next(
            (
                w
                for w in server.api("GET", "/api/v1/objects/Workload")
                if w["metadata"]["name"].startswith(f"job-{name}-")
            ),
            {},
        )

    def condition(name: str, kind: str) -> dict[str, Any]:
        return next(
            (c for c in workload(name).get("status", {}).get("conditions", []) if c["type"] == kind), {}
        )

    wait_until(lambda: condition("fine", "PodsReady").get("status") == "True", timeout=30)
    assert condition("fine", "PodsReady")["reason"] == "Started"
    assert server.jobs()["default/fine"]["active"] == 1

    evicted = wait_until(
        lambda: (c := condition("never", "Evicted")).get("reason") == "PodsReadyTimeout" and c, timeout=60
    )
    assert "Exceeded the PodsReady timeout" in evicted["message"]
    wait_until(lambda: workload("never").get("spec", {}).get("active") is False, timeout=90)
    described = server.cli("describe", "workload", "never")
    assert "State:     Inactive" in described.stdout, described.stdout
    wait_until(lambda: server.jobs()["default/never"]["active"] == 0, timeout=30)
    assert server.jobs()["default/never"]["preemptions"] >= 2  # stopped at each timeout
    assert condition("fine", "PodsReady")["status"] == "True"  # the ready job kept running
