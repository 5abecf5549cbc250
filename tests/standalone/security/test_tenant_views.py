"""Finding 8c and 8d: tenants saw other tenants' jobs in /events and /node; restarts were not shown."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..helpers import Server, job, wait_until
from .common import job_state, tenant, two_teams


def test_a_tenant_sees_only_its_own_namespaces_in_events_and_devices(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research", "--priority-class", "batch")
    assert server.apply([job("secret-plan", "sleep 60", namespace="product", gpus=1)]).status_code == 200
    assert (
        server.apply([job("mine", "sleep 60", namespace="research", gpus=1)], token=alice).status_code == 200
    )
    wait_until(
        lambda: (
            job_state(server, "product/secret-plan") == "Running"
            and job_state(server, "research/mine") == "Running"
        )
    )

    everything = " ".join(e["message"] for e in server.api("GET", "/api/v1/events"))
    assert "product/secret-plan" in everything and "research/mine" in everything
    seen = " ".join(e["message"] for e in server.api("GET", "/api/v1/events", token=alice))
    assert "research/mine" in seen and "secret-plan" not in seen

    held = server.api("GET", "/api/v1/node", token=alice)["devicesHeld"]
    assert sorted(held.values()) == sorted(["Job/research/mine#0", "a job of another namespace"])
    assert "Job/product/secret-plan#0" in server.api("GET", "/api/v1/node")["devicesHeld"].values()


def test_a_restart_of_the_server_shows_as_an_interruption(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    assert server.apply([job("long", "sleep 120", namespace="research")]).status_code == 200
    wait_until(lambda: job_state(server, "research/long") == "Running")
    server.kill()
    server.start()
    wait_until(lambda: job_state(server, "research/long") == "Running")
    listed = server.cli("get", "jobs", "-n", "research").stdout.splitlines()
    header, row = listed[0].split(), next(line.split() for line in listed if " long " in f" {line} ")
    assert header[-1] == "INTERRUPTED" and row[-1] == "1"
    described = server.cli("describe", "workload", "long", "-n", "research").stdout
    assert "interrupted by server restarts 1 time(s)" in described
