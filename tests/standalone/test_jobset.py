"""A JobSet runs its replicated jobs on this machine as one gang, with a distributed trainer's environment.

Its pods really rendezvous: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank
connects and sends its RANK, and nobody finishes before the whole world has met.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .helpers import EXAMPLES, Server, cluster_queue, flavor_and_queue, job, jobset, wait_until, write_config

RENDEZVOUS = textwrap.dedent(
    """\
    import json, os, socket, sys, time
    names = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "JOB_COMPLETION_INDEX",
             "JOBSET_NAME", "REPLICATED_JOB_NAME", "REPLICATED_JOB_REPLICAS", "JOB_INDEX", "JOB_GLOBAL_INDEX",
             "JOBSET_RESTART_ATTEMPT", "PYKUEUE_POD_NAME", "CUDA_VISIBLE_DEVICES", "FROM_ANNOTATION")
    env = {k: os.environ.get(k, "") for k in names}
    out, fail_once = sys.argv[1], sys.argv[2]
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    if fail_once != "-" and rank == world - 1 and not os.path.exists(fail_once):
        open(fail_once, "w").close()
        sys.exit(7)  # the last rank dies once: the whole JobSet must start again
    address = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
    if rank == 0:
        server = socket.create_server(address)
        server.settimeout(60)
        peers, conns = [], []
        for _ in range(world - 1):
            conn, _ = server.accept()
            peers.append(int(conn.recv(16)))
            conns.append(conn)
        for conn in conns:
            conn.sendall(b"go")
        env["PEERS"] = sorted(peers)
    else:
        for _ in range(600):
            try:
                conn = socket.create_connection(address, timeout=1)
                conn.sendall(str(rank).encode())
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit(3)
        conn.settimeout(120)
        if conn.recv(2) != b"go":
            sys.exit(4)
    with open(os.path.join(out, f"rank-{rank}-{time.monotonic_ns()}.json"), "w") as f:
        json.dump(env, f)
    """
)


def _ranks(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]


def _shared_out(server: Server) -> Path:
    out = server.shared / "out"
    out.mkdir()
    out.chmod(0o777)
    return out


def _gpu_usage(server: Server) -> str:
    rows = server.api("GET", "/api/v1/clusterqueues")
    usage = rows[0]["usage"]
    return next(str(u["used"]) for u in usage if u["resource"] == "nvidia.com/gpu")


def _workload(server: Server, name: str) -> dict[str, Any]:
    response = server.request("GET", f"/api/v1/describe/workload/default/{name}")
    assert response.status_code == 200, response.text
    described: dict[str, Any] = response.json()
    return described


def _machine(tmp_path: Path, start_server: Callable[..., Server], gpus: int, quota: int) -> Server:
    queues = (
        cluster_queue("main", cpu="8", gpus=quota) + "---\n" + flavor_and_queue("a100", "main", "default")
    )
    config = write_config(tmp_path, queues, gpus=gpus)
    config.write_text(config.read_text() + "executor: {podFailureBackoffSeconds: 0.2}\n")
    return start_server(config)


def test_a_jobset_runs_its_replicated_jobs_as_one_gang_that_rendezvous(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = _machine(tmp_path, start_server, gpus=6, quota=6)
    out = _shared_out(server)
    script = server.shared / "rendezvous.py"
    script.write_text(RENDEZVOUS)
    command = f"{sys.executable} {script} {out} {server.shared / 'failed-once'}"
    manifest = jobset("train", [("driver", 1, 1, command, 1), ("workers", 2, 2, command, 1)], max_restarts=1)
    # A JobSet's usual way to read its own labels: the downward API; the executor answers it.
    for rj in manifest["spec"]["replicatedJobs"]:
        container = rj["template"]["spec"]["template"]["spec"]["containers"][0]
        path = "metadata.annotations['jobset.sigs.k8s.io/job-index']"
        container["env"] = [{"name": "FROM_ANNOTATION", "valueFrom": {"fieldRef": {"fieldPath": path}}}]
    response = server.apply([manifest])
    assert response.status_code == 200, response.text

    wait_until(lambda: server.jobs()["default/train"]["state"] in ("Succeeded", "Failed"), timeout=180)
    row = server.jobs()["default/train"]
    assert row["kind"] == "JobSet" and row["state"] == "Succeeded", server.log
    assert row["restarts"] == 1 and row["failed"] == 1  # the last rank died once; the rest were stopped

    # One Workload, one pod set per replicated job: replicas x parallelism pods each.
    described = _workload(server, "train")
    assignments = described["admission"]["podSetAssignments"]
    assert {a["name"]: a["count"] for a in assignments} == {"driver": 1, "workers": 4}
    assert described["workload"]["state"] == "Finished"

    ranks = {int(r["RANK"]): r for r in _ranks(out)}  # the ranks of the run after the restart
    assert sorted(ranks) == [0, 1, 2, 3, 4]
    assert {r["WORLD_SIZE"] for r in ranks.values()} == {"5"}
    assert {r["MASTER_ADDR"] for r in ranks.values()} == {"127.0.0.1"}
    assert len({r["MASTER_PORT"] for r in ranks.values()}) == 1
    assert ranks[0]["PEERS"] == [1, 2, 3, 4]
    assert {r["JOBSET_RESTART_ATTEMPT"] for r in ranks.values()} == {"1"}
    # Ranks in declaration order: driver's pod, then workers job 0 pods 0-1, job 1 pods 0-1.
    placed = {
        rank: (r["REPLICATED_JOB_NAME"], r["JOB_INDEX"], r["JOB_COMPLETION_INDEX"], r["JOB_GLOBAL_INDEX"])
        for rank, r in ranks.items()
    }
    assert placed == {
        0: ("driver", "0", "0", "0"),
        1: ("workers", "0", "0", "1"),
        2: ("workers", "0", "1", "1"),
        3: ("workers", "1", "0", "2"),
        4: ("workers", "1", "1", "2"),
    }
    assert all(r["FROM_ANNOTATION"] == r["JOB_INDEX"] for r in ranks.values())
    assert ranks[3]["PYKUEUE_POD_NAME"] == "train-workers-1-0" and ranks[0]["JOBSET_NAME"] == "train"
    assert all(r["LOCAL_RANK"] == r["RANK"] for r in ranks.values())
    devices = [r["CUDA_VISIBLE_DEVICES"] for r in ranks.values()]
    assert len(set(devices)) == 5  # one GPU each, none shared

    # Finished: its quota is back once the engine has read the Finished condition (its next pass).
    wait_until(lambda: _gpu_usage(server) == "0", timeout=10)
    logs = server.cli("logs", "train")
    assert logs.returncode == 0, logs.stderr
    assert "start of pod train-workers-1-1" in logs.stdout and "start of pod train-driver-0-0" in logs.stdout
    listed = server.cli("get", "jobs")
    assert any(line.split()[1:3] == ["JobSet", "train"] for line in listed.stdout.splitlines()), listed.stdout


def test_a_jobset_waits_for_its_whole_gang_and_stops_as_one(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = _machine(tmp_path, start_server, gpus=4, quota=4)
    out = _shared_out(server)
    assert server.apply([job("holder", "sleep 600", cpu="1", gpus=2)]).status_code == 200
    wait_until(lambda: server.jobs()["default/holder"]["state"] == "Running", timeout=60)
    # 3 GPUs wanted, 2 free: the JobSet must wait whole, none of its pods started.
    record = f'echo "$PYKUEUE_POD_NAME $PYKUEUE_PREEMPTED" >> {out}/started; exec sleep 600'
    manifest = jobset("pair", [("leader", 1, 1, record, 1), ("workers", 1, 2, record, 1)])
    assert server.apply([manifest]).status_code == 200

    def pending_reason() -> str:
        explanation = server.explanation("default", "pair")
        if explanation is None or explanation["state"] != "Pending" or not explanation["reasons"]:
            return ""
        return " ".join(f"[{r['category']}] {r['message']}" for r in explanation["reasons"])

    reason = wait_until(pending_reason, timeout=60)
    assert "[quota]" in reason and "nvidia.com/gpu" in reason, reason
    assert server.jobs()["default/pair"]["state"] == "Queued"
    assert not (out / "started").exists()

    # The holder goes: the whole JobSet is admitted and all three pods start together.
    assert server.request("DELETE", "/api/v1/objects/Job/default/holder").status_code == 200
    wait_until(lambda: server.jobs()["default/pair"]["active"] == 3, timeout=60)
    wait_until(lambda: len((out / "started").read_text().splitlines()) == 3, timeout=30)
    assert _gpu_usage(server) == "3"
    pods = _workload(server, "pair")["pods"]
    assert sorted(p["name"] for p in pods) == ["pair-leader-0-0", "pair-workers-0-0", "pair-workers-0-1"]
    described = server.cli("describe", "workload", "pair")
    assert "JobSet:" in described.stdout and "Pod pair-workers-0-1:" in described.stdout, described.stdout

    # Stopped as one: every pod goes, the quota is released at once.
    stopped = server.cli("stop", "workload", "pair")
    assert stopped.returncode == 0, stopped.stderr
    wait_until(lambda: server.jobs()["default/pair"]["active"] == 0, timeout=60)
    row = server.jobs()["default/pair"]
    assert row["state"] == "Queued" and row["preemptions"] == 1 and row["failed"] == 0
    assert _gpu_usage(server) == "0"
    assert server.api("GET", "/api/v1/node")["devicesHeld"] == {}

    # Resumed, it starts whole again and knows it was stopped.
    assert server.cli("resume", "workload", "pair").returncode == 0
    wait_until(lambda: len((out / "started").read_text().splitlines()) == 6, timeout=60)
    again = (out / "started").read_text().splitlines()[3:]
    assert sorted(line.split()[0] for line in again) == [
        "pair-leader-0-0",
        "pair-workers-0-0",
        "pair-workers-0-1",
    ]
    assert {line.split()[1] for line in again} == {"1"}
    deleted = server.cli("delete", "jobset", "pair")
    assert deleted.returncode == 0 and "JobSet/default/pair deleted" in deleted.stdout, deleted.stderr
    wait_until(lambda: _gpu_usage(server) == "0", timeout=60)


def test_success_and_failure_policies(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = _machine(tmp_path, start_server, gpus=0, quota=0)
    # successPolicy Any of the workers: one worker Job finishing completes the JobSet,
    # and the leader, still running, is stopped.
    any_worker = jobset(
        "any",
        [
            ("leader", 1, 1, "exec sleep 600", 0),
            ("workers", 2, 1, 'test "$JOB_INDEX" = 1 && exit 0; exec sleep 600', 0),
        ],
        success={"operator": "Any", "targetReplicatedJobs": ["workers"]},
    )
    # All (the default), no restarts allowed: the first failure fails the JobSet.
    failing = jobset("fails", [("a", 1, 1, "exec sleep 600", 0), ("b", 1, 1, "sleep 0.5; exit 3", 0)])
    # All: done once every Job of every replicated job has succeeded.
    everyone = jobset("all", [("a", 1, 2, "sleep 0.3", 0), ("b", 2, 1, "sleep 0.6", 0)])
    assert server.apply([any_worker, failing, everyone]).status_code == 200

    def finished(name: str) -> bool:
        return bool(server.jobs()[f"default/{name}"]["state"] in ("Succeeded", "Failed"))

    wait_until(lambda: all(finished(n) for n in ("any", "fails", "all")), timeout=120)
    jobs = server.jobs()
    assert jobs["default/any"]["state"] == "Succeeded" and jobs["default/any"]["succeeded"] == 1
    assert jobs["default/fails"]["state"] == "Failed" and jobs["default/fails"]["restarts"] == 0
    assert jobs["default/all"]["state"] == "Succeeded" and jobs["default/all"]["succeeded"] == 4
    wait_until(
        lambda: all(server.jobs()[f"default/{n}"]["active"] == 0 for n in ("any", "fails", "all")), timeout=60
    )

    stored = server.api("GET", "/api/v1/objects/JobSet/default/any")
    condition = next(c for c in stored["status"]["conditions"] if c["type"] == "Completed")
    assert "workers-1 succeeded" in condition["message"]
    statuses = {s["name"]: s for s in stored["status"]["replicatedJobsStatus"]}
    assert statuses["workers"]["succeeded"] == 1 and statuses["leader"]["succeeded"] == 0
    failed = server.api("GET", "/api/v1/objects/JobSet/default/fails")["status"]["conditions"]
    assert [c["reason"] for c in failed if c["type"] == "Failed"] == ["ReachedMaxRestarts"]
    for name in ("any", "fails", "all"):
        state = _workload(server, name)["workload"]["state"]
        assert state == ("Failed" if name == "fails" else "Finished"), (name, state)
    cq = server.api("GET", "/api/v1/clusterqueues")[0]
    assert cq["admitted"] == 0 and all(u["used"] == "0" for u in cq["usage"])


def test_a_malformed_jobset_is_refused_with_its_field_named(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = _machine(tmp_path, start_server, gpus=0, quota=0)
    bad_target = jobset(
        "bad", [("workers", 1, 1, "true", 0)], success={"operator": "All", "targetReplicatedJobs": ["nope"]}
    )
    response = server.apply([bad_target])
    assert response.status_code == 422, response.text
    assert any(
        "JobSet/default/bad spec.successPolicy.targetReplicatedJobs[0]" in p and "'nope'" in p
        for p in response.json()["problems"]
    ), response.text

    work_queue = jobset("queue", [("workers", 1, 2, "true", 0)])
    work_queue["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = 5
    no_queue = jobset("lost", [("workers", 1, 1, "true", 0)], queue="missing")
    empty = jobset("empty", [("workers", 0, 1, "true", 0)])
    response = server.apply([work_queue, no_queue, empty])
    assert response.status_code == 422, response.text
    problems = response.json()["problems"]
    assert any("spec.replicatedJobs[0].template.spec.completions" in p and "gang" in p for p in problems), (
        problems
    )
    assert any(
        "JobSet/default/lost" in p and "LocalQueue default/missing does not exist" in p for p in problems
    )
    assert any("JobSet/default/empty spec.replicatedJobs: runs no pod" in p for p in problems), problems
    assert server.api("GET", "/api/v1/objects/JobSet") == []  # nothing half-applied


def test_a_jobsets_gpus_come_from_one_domain(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    # Domains {0, 2} and {1, 3}; with one device of one held, the other domain is the only one
    # with room for the JobSet's two 1-GPU pods (of two replicated jobs): they must share it.
    queues = cluster_queue("main", cpu="8", gpus=4) + "---\n" + flavor_and_queue("a100", "main", "default")
    config = write_config(tmp_path, queues, gpus=4)
    settings = yaml.safe_load(config.read_text())
    settings["node"]["gpuDomains"] = [["0", "2"], ["1", "3"]]
    config.write_text(yaml.safe_dump(settings))
    server = start_server(config)
    out = _shared_out(server)
    record = f'echo "$CUDA_VISIBLE_DEVICES" > {out}/$PYKUEUE_POD_NAME; exec sleep 600'
    assert server.apply([job("one", f"{record}", cpu="1", gpus=1)]).status_code == 200
    wait_until(lambda: (out / "one-0").exists() and (out / "one-0").read_text().strip(), timeout=60)
    held = (out / "one-0").read_text().strip()
    assert server.apply([jobset("pair", [("a", 1, 1, record, 1), ("b", 1, 1, record, 1)])]).status_code == 200
    wait_until(lambda: (out / "pair-a-0-0").exists() and (out / "pair-b-0-0").exists(), timeout=60)
    wait_until(lambda: (out / "pair-a-0-0").read_text().strip() and (out / "pair-b-0-0").read_text().strip())
    got = {(out / name).read_text().strip() for name in ("pair-a-0-0", "pair-b-0-0")}
    assert got == ({"1", "3"} if held in ("0", "2") else {"0", "2"}), (held, got)


def test_a_jobset_killed_with_its_server_starts_again_whole(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = _machine(tmp_path, start_server, gpus=2, quota=2)
    out = _shared_out(server)
    record = f'echo "$PYKUEUE_POD_NAME ${{PYKUEUE_PREEMPTED:-0}}" >> {out}/started; sleep 5'
    assert (
        server.apply([jobset("survivor", [("a", 1, 1, record, 1), ("b", 1, 1, record, 1)])]).status_code
        == 200
    )
    wait_until(lambda: server.jobs()["default/survivor"]["active"] == 2, timeout=60)  # its status says so
    server.kill()  # kill -9: the pods outlive it, the next server kills them and starts them again
    server.start()
    wait_until(lambda: server.jobs()["default/survivor"]["state"] == "Succeeded", timeout=90)
    lines = (out / "started").read_text().splitlines()
    assert sorted(lines[2:]) == ["survivor-a-0-0 1", "survivor-b-0-0 1"]
    row = server.jobs()["default/survivor"]
    assert row["interruptions"] == 1 and row["restarts"] == 0 and row["failed"] == 0
    wait_until(lambda: _gpu_usage(server) == "0", timeout=30)


def test_the_example_jobset_trains_on_the_demo_queues(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server(write_config(tmp_path, (EXAMPLES / "queues.yaml").read_text(), gpus=4))
    applied = server.cli("apply", "-f", str(EXAMPLES / "jobset-ddp.yaml"))
    assert applied.returncode == 0 and "JobSet research/ddp created" in applied.stdout, applied.stderr
    wait_until(lambda: server.jobs().get("research/ddp", {}).get("state") == "Succeeded", timeout=90)
    logs = server.cli("logs", "ddp", "-n", "research").stdout
    assert "rank 0 of 2: met ranks ['1']" in logs and "rank 1 of 2 (workers): joined" in logs, logs
