"""`pykueue stop|resume workload|clusterqueue`: what stops, what waits, and why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config


def test_stopping_a_clusterqueue_holds_new_work_until_resumed(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    assert server.cli("stop", "clusterqueue", "main").returncode == 0
    assert server.apply([job("held", "true")]).status_code == 200
    # Until the engine has read the new Workload its explanation is "Unknown" (with a reason).
    wait_until(lambda: (server.explanation("default", "held") or {}).get("state", "Unknown") != "Unknown")
    explanation = server.api("GET", "/api/v1/describe/workload/default/held")["explanation"]
    assert explanation["state"] == "Pending"
    assert any(
        r["category"] == "stopped" and "ClusterQueue main is inactive" in r["message"]
        for r in explanation["reasons"]
    )
    assert server.jobs()["default/held"]["state"] == "Queued"
    assert server.cli("resume", "clusterqueue", "main").returncode == 0
    wait_until(lambda: server.jobs()["default/held"]["state"] == "Succeeded")


def test_stopping_a_running_workload_stops_its_process_and_resuming_runs_it_again(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    log = tmp_path / "runs.log"
    script = f"echo start-${{PYKUEUE_PREEMPTED:-0}} >> {log}; trap 'echo term >> {log}; exit 0' TERM; " + (
        'if [ "${PYKUEUE_PREEMPTED:-0}" = 1 ]; then exit 0; fi; sleep 60 & wait'
    )
    assert server.apply([job("long", script)]).status_code == 200
    wait_until(lambda: log.exists() and "start-0" in log.read_text())
    stopped = server.cli("stop", "workload", "long")
    assert stopped.returncode == 0, stopped.stderr
    wait_until(lambda: "term" in log.read_text())
    wait_until(lambda: server.jobs()["default/long"]["state"] == "Queued")
    explanation = server.api("GET", "/api/v1/describe/workload/default/long")["explanation"]
    assert explanation["state"] == "Inactive"
    wait_until(lambda: server.api("GET", "/api/v1/clusterqueues")[0]["admitted"] == 0, timeout=30)
    cq = server.api("GET", "/api/v1/clusterqueues")[0]
    assert cq["admitted"] == 0, "a stopped workload gives its quota back"
    assert server.cli("resume", "workload", "long").returncode == 0
    wait_until(lambda: server.jobs()["default/long"]["state"] == "Succeeded")
    assert log.read_text().split() == ["start-0", "term", "start-1"]


def test_deleting_a_running_job_stops_it_and_frees_its_quota(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="1") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    log = tmp_path / "runs.log"
    first = f"echo first >> {log}; trap 'echo term >> {log}; exit 0' TERM; sleep 60 & wait"
    assert server.apply([job("first", first)]).status_code == 200
    wait_until(lambda: log.exists() and "first" in log.read_text())
    assert server.apply([job("second", f"echo second >> {log}")]).status_code == 200
    wait_until(lambda: (server.explanation("default", "second") or {}).get("reasons"))
    assert server.jobs()["default/second"]["state"] == "Queued"  # 1 CPU: it waits for the first
    deleted = server.cli("delete", "job", "first")
    assert deleted.returncode == 0 and "Job/default/first deleted" in deleted.stdout
    wait_until(lambda: server.jobs().get("default/second", {}).get("state") == "Succeeded")
    assert log.read_text().split() == ["first", "term", "second"]
    assert "default/first" not in server.jobs()
    assert [w["job"] for w in server.api("GET", "/api/v1/workloads")] == ["second"]
