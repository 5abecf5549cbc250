"""A pod's cgroup carries its container's limits, as the kubelet would set them, and measures it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..helpers import Server, job, wait_until
from .common import job_state, two_teams

# Holds ~200 MB: `tail` keeps the whole of a "line" that never ends.
HOG = "head -c 200000000 /dev/zero | tail > /dev/null"


def test_a_pod_over_its_memory_limit_is_killed_and_one_within_it_runs(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    capped = job("capped", HOG, namespace="research", backoff_limit=0)
    capped["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"memory": "64Mi"}
    roomy = job("roomy", HOG, namespace="research", backoff_limit=0)
    roomy["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"memory": "1Gi"}
    assert server.apply([capped, roomy]).status_code == 200
    wait_until(
        lambda: {job_state(server, f"research/{n}") for n in ("capped", "roomy")} <= {"Succeeded", "Failed"},
        60,
    )
    jobs = server.jobs()
    assert jobs["research/roomy"]["state"] == "Succeeded"
    assert jobs["research/capped"]["state"] == "Failed"
    used = jobs["research/roomy"]["usage"]
    assert used["cpuSeconds"] > 0 and used["memoryPeakBytes"] > 150_000_000
    described = server.cli("describe", "workload", "roomy", "-n", "research").stdout
    assert "CPU-seconds, peak memory" in described
