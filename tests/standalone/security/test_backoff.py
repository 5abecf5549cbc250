"""Finding 8f: a failed pod started again at once, with no back-off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..helpers import Server, job, wait_until
from .common import job_state, two_teams


def test_failed_pods_start_again_after_a_doubling_back_off(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server, executor={"podFailureBackoffSeconds": 1})
    starts = server.shared / "starts.txt"
    failing = job("flaky", f"date +%s.%N >> {starts}; exit 1", namespace="research", backoff_limit=2)
    assert server.apply([failing]).status_code == 200

    def waiting() -> str:
        return str(server.jobs()["research/flaky"]["waiting"])

    wait_until(lambda: "starts again in" in waiting(), timeout=30)
    wait_until(lambda: job_state(server, "research/flaky") == "Failed", timeout=60)
    times = [float(line) for line in starts.read_text().split()]
    assert len(times) == 3
    first_gap, second_gap = times[1] - times[0], times[2] - times[1]
    assert first_gap >= 0.95, first_gap  # 1 s after the first failure
    assert second_gap >= 1.95, second_gap  # 2 s after the second
