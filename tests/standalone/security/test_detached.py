"""Finding 6: a pod's setsid child outlived its job (and its GPU went to the next job); with env -i, a restart."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from ..helpers import Server, job, wait_until
from .common import job_state, processes_with, two_teams


def _marker() -> str:
    return f"1000.{random.randrange(10**8, 10**9)}"  # a unique sleep length: findable in /proc


def _detach(marker: str, prefix: str = "") -> str:
    """A script that leaves ``sleep <marker>`` running in a session of its own, and only then goes on."""
    return (
        f"{prefix}setsid sh -c 'echo $$ > started; exec sleep {marker}' & "
        "while [ ! -s started ]; do sleep 0.05; done; "
    )


def test_a_detached_process_ends_with_its_job_before_its_gpu_is_handed_on(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server, gpus=1)
    marker, out = _marker(), server.shared / "next.txt"
    leaver = job("leaver", _detach(marker) + "echo left", namespace="research", gpus=1)
    assert server.apply([leaver]).status_code == 200
    wait_until(lambda: job_state(server, "research/leaver") == "Succeeded")
    assert processes_with(marker) == [], "the detached child outlived its job"

    # The next job on the same GPU finds nobody of the first job's left.
    check = f"ps -eo args | grep -c '^sleep {marker}' > {out}; true"
    assert server.apply([job("next", check, namespace="research", gpus=1)]).status_code == 200
    wait_until(lambda: job_state(server, "research/next") == "Succeeded")
    assert out.read_text().strip() == "0"


def test_a_process_that_drops_its_environment_dies_with_the_server_it_outlived(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    marker = _marker()
    hider = job("hider", _detach(marker, prefix="env -i ") + "sleep 600", namespace="research")
    assert server.apply([hider]).status_code == 200
    hidden = wait_until(lambda: processes_with(marker), timeout=30)
    server.kill()
    assert processes_with(marker) == hidden, "kill -9 of the server leaves its pods behind, as a crash does"
    server.start()
    # The restarted job starts a new one; the one left behind is gone.
    wait_until(lambda: not set(hidden) & set(processes_with(marker)), timeout=30)
    wait_until(lambda: job_state(server, "research/hider") == "Running")  # started again, knowingly
    assert server.jobs()["research/hider"]["interruptions"] == 1


def test_without_cgroups_the_fallback_still_stops_a_setsid_child_and_says_what_it_cannot(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server, isolation={"cgroups": False})
    assert "no writable cgroup hierarchy" in server.log
    assert "(env -i) can outlive its job" in server.log
    marker = _marker()
    leaver = job("leaver", _detach(marker) + "echo left", namespace="research")
    assert server.apply([leaver]).status_code == 200
    wait_until(lambda: job_state(server, "research/leaver") == "Succeeded")
    wait_until(lambda: not processes_with(marker), timeout=10)
