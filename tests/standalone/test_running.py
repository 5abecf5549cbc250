"""Jobs run as real processes within their quota, with GPUs never shared, through API and CLI."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .helpers import (
    BIN,
    Server,
    cluster_queue,
    flavor_and_queue,
    intervals,
    job,
    max_overlap,
    wait_until,
    write_config,
)

RECORD = 'f={out}/$PYKUEUE_JOB.txt; echo "start $(date +%s.%N) $CUDA_VISIBLE_DEVICES" > $f; {work}; echo "end $(date +%s.%N)" >> $f'


def all_done(server: Server, count: int) -> bool:
    jobs = server.jobs()
    return len(jobs) == count and all(j["state"] in ("Succeeded", "Failed") for j in jobs.values())


def test_quota_bounds_how_many_jobs_run_at_once(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    config = write_config(
        tmp_path, cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    server = start_server(config)
    out = tmp_path / "runs"
    out.mkdir()
    script = RECORD.format(out=out, work="sleep 0.6")
    response = server.apply([job(f"sleeper-{i}", script, cpu="1") for i in range(6)])
    assert response.status_code == 200, response.text
    wait_until(lambda: all_done(server, 6), timeout=60)
    assert {j["state"] for j in server.jobs().values()} == {"Succeeded"}
    spans = intervals(out)
    assert len(spans) == 6
    # 2 CPUs of quota, 1 CPU per job: never more than 2 at once, and the quota was used.
    assert max_overlap([(s, e) for s, e, _ in spans.values()]) == 2

    def released() -> bool:
        cq = server.api("GET", "/api/v1/clusterqueues")[0]
        return bool(cq["admitted"] == 0 and all(u["used"] == "0" for u in cq["usage"]))

    # A job is Succeeded a moment before its Workload's quota is released: poll, bounded.
    wait_until(released, timeout=30)
    cq = server.api("GET", "/api/v1/clusterqueues")[0]
    assert cq["admitted"] == 0 and all(u["used"] == "0" for u in cq["usage"])


def test_gpus_are_pinned_and_never_given_to_two_running_jobs(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="16", gpus=4) + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues, gpus=4))
    out = tmp_path / "runs"
    out.mkdir()
    script = RECORD.format(out=out, work="sleep 0.4")
    wanted = {f"gpu-{i}": 1 + i % 2 for i in range(10)}
    response = server.apply([job(name, script, gpus=count) for name, count in wanted.items()])
    assert response.status_code == 200, response.text
    wait_until(lambda: all_done(server, len(wanted)), timeout=90)
    spans = intervals(out)
    assert set(spans) == set(wanted)
    for name, (_, _, devices) in spans.items():
        got = devices.split(",")
        assert len(got) == wanted[name] and set(got) <= {"0", "1", "2", "3"}, (name, devices)
    for (a, (s1, e1, d1)), (b, (s2, e2, d2)) in itertools.combinations(spans.items(), 2):
        if s1 < e2 and s2 < e1:  # ran at the same time
            assert not set(d1.split(",")) & set(d2.split(",")), f"{a} [{d1}] and {b} [{d2}] shared a GPU"


def test_cli_submit_get_describe_logs(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    queues = cluster_queue("main", cpu="2", gpus=2) + "---\n" + flavor_and_queue("a100", "main", "team-a")
    server = start_server(write_config(tmp_path, queues, gpus=2))
    submitted = server.cli(
        "submit",
        "--queue",
        "main",
        "-n",
        "team-a",
        "--name",
        "hello",
        "--gpus",
        "1",
        "--cpu",
        "1",
        "--",
        "sh",
        "-c",
        'echo "hello from $PYKUEUE_JOB on GPU $CUDA_VISIBLE_DEVICES"; env | grep -c PYKUEUE_PREEMPTED; true',
    )
    assert submitted.returncode == 0, submitted.stderr
    assert "Job team-a/hello created" in submitted.stdout
    wait_until(lambda: server.jobs().get("team-a/hello", {}).get("state") == "Succeeded", timeout=30)
    logs = server.cli("logs", "hello", "-n", "team-a")
    assert logs.returncode == 0
    assert "hello from hello on GPU 0" in logs.stdout or "hello from hello on GPU 1" in logs.stdout
    assert "\n0\n" in logs.stdout  # no PYKUEUE_PREEMPTED on a first run
    listed = server.cli("get", "jobs")
    assert "hello" in listed.stdout and "Succeeded" in listed.stdout
    described = server.cli("describe", "workload", "hello", "-n", "team-a")
    assert described.returncode == 0, described.stderr
    assert "State:     Finished" in described.stdout
    assert "image" not in described.stdout  # no image given, no warning
    queues_out = server.cli("get", "clusterqueues")
    assert "main" in queues_out.stdout and "a100/nvidia.com/gpu 0/2" in queues_out.stdout
    # An output format a command does not have is refused, not answered with a table.
    as_yaml = server.cli("get", "jobs", "-o", "yaml")
    assert as_yaml.returncode == 2 and as_yaml.stdout == ""
    assert "invalid choice: 'yaml'" in as_yaml.stderr, as_yaml.stderr
    # Output into a pipe its reader already closed (`describe ... | head`) ends quietly.
    closed = _into_closed_pipe(server, "describe", "workload", "hello", "-n", "team-a")
    assert closed.returncode == 141 and "Traceback" not in closed.stderr, closed.stderr


def _into_closed_pipe(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    read, write = os.pipe()
    os.close(read)  # the reader has gone: every write fails with EPIPE
    env = {**server.env(), "PYKUEUE_SOCKET": str(server.socket)}
    try:
        return subprocess.run(
            [str(BIN / "pykueue"), *args],
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)


def test_failures_follow_backoff_limit(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    config = write_config(
        tmp_path, cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    # Retries wait for the pod back-off (tested in security/test_backoff.py); keep it short here.
    config.write_text(config.read_text() + "executor: {podFailureBackoffSeconds: 0.2}\n")
    server = start_server(config)
    counter = tmp_path / "attempts"
    flaky = f"echo x >> {counter}; [ $(wc -l < {counter}) -ge 3 ]"  # fails twice, then succeeds
    response = server.apply([job("flaky", flaky, backoff_limit=2), job("broken", "exit 3", backoff_limit=1)])
    assert response.status_code == 200, response.text
    wait_until(lambda: all_done(server, 2), timeout=60)
    jobs = server.jobs()
    assert jobs["default/flaky"]["state"] == "Succeeded" and jobs["default/flaky"]["failed"] == 2
    assert jobs["default/broken"]["state"] == "Failed" and jobs["default/broken"]["failed"] == 2

    # The job's end is recorded by the executor; the Workload's Finished condition reaches
    # the engine through the store's watch a moment later.
    def broken_workload() -> dict[str, Any]:
        return {w["job"]: w for w in server.api("GET", "/api/v1/workloads")}["broken"]

    wait_until(lambda: broken_workload()["state"] != "Admitted", timeout=10)
    assert broken_workload()["state"] == "Failed"
    described = server.api("GET", "/api/v1/describe/workload/default/broken")
    assert "backoffLimit 1" in described["explanation"]["engineMessage"]
    wait_until(
        lambda: all(u["used"] == "0" for u in server.api("GET", "/api/v1/clusterqueues")[0]["usage"]),
        timeout=30,
    )
    cq = server.api("GET", "/api/v1/clusterqueues")[0]
    assert all(u["used"] == "0" for u in cq["usage"])  # finished and failed jobs gave their quota back


def test_a_crashing_command_shows_its_exit_code_in_describe(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    """Issue 44, item 2: while a crashing command waits out its back-off, describe says how it
    crashed (its exit code), not only once the job has failed for good."""
    config = write_config(
        tmp_path, cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    config.write_text(config.read_text() + "executor: {podFailureBackoffSeconds: 600}\n")
    server = start_server(config)
    assert server.apply([job("crashing", "exit 3", backoff_limit=5)]).status_code == 200
    wait_until(lambda: server.jobs()["default/crashing"]["failed"] == 1, timeout=60)
    described = server.cli("describe", "workload", "crashing")
    assert described.returncode == 0, described.stderr
    assert "Crashed:   pod 0 exited with 3 (1 failure(s) so far" in described.stdout, described.stdout
