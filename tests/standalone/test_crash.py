"""kill -9 `pykueue up` in the middle of admissions, start it again: nothing lost, nothing twice at once."""

from __future__ import annotations

import collections
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from .helpers import (
    Server,
    cluster_queue,
    flavor_and_queue,
    job,
    marked_processes,
    wait_until,
    write_config,
)

JOBS = 20
# flock -n fails at once if another run of the same job still holds its lock: the double run is recorded.
SCRIPT = (
    "flock -n {locks}/$PYKUEUE_JOB sh -c '"
    'echo "start $(date +%s.%N) ${{PYKUEUE_PREEMPTED:-0}}" >> {out}/$PYKUEUE_JOB.txt; sleep 1.5; '
    'echo "end $(date +%s.%N)" >> {out}/$PYKUEUE_JOB.txt'
    "' || echo $PYKUEUE_JOB >> {out}/DOUBLE"
)


def _count(out: Path, word: str) -> int:
    return sum(path.read_text().count(word) for path in out.glob("*.txt"))


def test_kill_9_and_restart_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="3") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    out, locks = tmp_path / "out", tmp_path / "locks"
    out.mkdir()
    locks.mkdir()
    script = SCRIPT.format(out=out, locks=locks)
    assert server.apply([job(f"crash-{i:02d}", script) for i in range(JOBS)]).status_code == 200

    # First crash: while the first jobs run (their processes outlive the server).
    wait_until(lambda: _count(out, "start") >= 3, timeout=60)
    server.kill()
    assert marked_processes(server.db), "pods outlived the killed server"
    server.start()

    # Second crash: later, with jobs finished, running and queued.
    wait_until(lambda: _count(out, "end") >= 8, timeout=90)
    server.kill()
    server.start()

    wait_until(lambda: sum(j["state"] == "Succeeded" for j in server.jobs().values()) == JOBS, timeout=120)
    assert not (out / "DOUBLE").exists(), (out / "DOUBLE").read_text()
    ends = collections.Counter(
        p.stem for p in out.glob("*.txt") for line in p.read_text().splitlines() if line.startswith("end")
    )
    assert set(ends) == {f"crash-{i:02d}" for i in range(JOBS)}, "every job completed"
    restarted = [
        line.split()[2]
        for p in out.glob("*.txt")
        for line in p.read_text().splitlines()[1:]
        if line.startswith("start")
    ]
    assert restarted and set(restarted) == {"1"}, "a job started again after a crash knows it"
    # No quota leaked: everything finished, nothing reserved (released a moment after the last success).
    wait_until(lambda: server.api("GET", "/api/v1/clusterqueues")[0]["admitted"] == 0, timeout=30)
    cq = server.api("GET", "/api/v1/clusterqueues")[0]
    assert cq["admitted"] == 0 and cq["pending"] == 0
    assert all(u["used"] == "0" for u in cq["usage"])
    assert {w["state"] for w in server.api("GET", "/api/v1/workloads")} == {"Finished"}


def test_a_second_server_on_the_same_data_is_refused(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server()
    second = Server(server.root, None)
    result = second.cli("up", "--data", str(server.data), "--port", str(second.port), "--quiet")
    shutil.rmtree(second.shared, ignore_errors=True)
    assert result.returncode == 1
    assert "is in use by pykueue up" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_restart_says_which_leftover_processes_it_killed(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    assert server.apply([job("long", "sleep 300")]).status_code == 200
    wait_until(lambda: server.jobs()["default/long"]["state"] == "Running")
    server.kill()
    assert marked_processes(server.db), "the pod outlived the killed server"
    server.start()
    said = [e["message"] for e in server.api("GET", "/api/v1/events") if "left running" in e["message"]]
    assert len(said) == 1 and said[0].startswith("killed "), said
    assert said[0] in server.log  # among the lines `up` prints at start, also with --quiet
    # A clean stop leaves nothing running: the next start has nothing to say.
    server.process.terminate()
    server.process.wait(timeout=60)
    server.start()
    assert not [e for e in server.api("GET", "/api/v1/events") if "left running" in e["message"]]


def test_a_pod_started_just_before_a_crash_knows_it_was_interrupted(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    """The server died after starting a pod and before recording it as active: the restart still
    counts the interruption (it found the pod's process), so the next start says PYKUEUE_PREEMPTED=1.

    The crash cannot be timed into that window for real; the stored status is put back to what it
    was before the server recorded the pod, the one part that is staged.
    """
    queues = cluster_queue("main", cpu="2") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    out = tmp_path / "starts.txt"
    script = f'echo "start ${{PYKUEUE_PREEMPTED:-0}}" >> {out}; sleep 600'
    assert server.apply([job("racer", script)]).status_code == 200
    wait_until(lambda: out.exists() and "start 0" in out.read_text(), timeout=60)
    wait_until(lambda: server.jobs()["default/racer"]["active"] == 1, timeout=30)
    server.kill()
    assert marked_processes(server.db), "the pod outlived the killed server"
    with sqlite3.connect(server.db) as db:
        (body,) = db.execute(
            "SELECT body FROM objects WHERE kind = 'Job' AND namespace = 'default' AND name = 'racer'"
        ).fetchone()
        stored = json.loads(body)
        stored["status"] = {k: v for k, v in stored["status"].items() if k not in ("active", "pykueue")}
        db.execute(
            "UPDATE objects SET body = ? WHERE kind = 'Job' AND namespace = 'default' AND name = 'racer'",
            (json.dumps(stored),),
        )
    server.start()
    wait_until(lambda: out.read_text().count("start") == 2, timeout=60)
    assert out.read_text().splitlines() == ["start 0", "start 1"]
