"""A Job with parallelism N runs as one gang of N local pods with a distributed trainer's environment.

The pods really rendezvous: rank 0 listens on MASTER_ADDR:MASTER_PORT and every other rank
connects and reports its RANK, as torch.distributed's TCP store does.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import yaml

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config

RENDEZVOUS = textwrap.dedent(
    """\
    import json, os, socket, sys, time
    started = time.time()
    env = {k: os.environ.get(k, "") for k in
           ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
            "CUDA_VISIBLE_DEVICES")}
    out, fail_once = sys.argv[1], sys.argv[2]
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    if fail_once != "-" and rank == world - 1 and not os.path.exists(fail_once):
        open(fail_once, "w").close()
        sys.exit(7)  # this rank dies once: the gang must start again whole
    address = (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
    if rank == 0:
        server = socket.create_server(address)
        server.settimeout(60)
        peers, conns = [], []
        for _ in range(world - 1):
            conn, _ = server.accept()
            peers.append(int(conn.recv(16)))
            conns.append(conn)
        for conn in conns:  # everyone is here: let them go on
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
        if conn.recv(2) != b"go":  # a rank finishes only once the whole gang met
            sys.exit(4)
    env["STARTED"] = started
    with open(os.path.join(out, f"rank-{rank}-{time.monotonic_ns()}.json"), "w") as f:
        json.dump(env, f)
    """
)


def _ranks(out: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]


def test_a_parallel_job_runs_as_a_gang_that_rendezvous(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    queues = cluster_queue("main", cpu="8", gpus=4) + "---\n" + flavor_and_queue("a100", "main", "default")
    config = write_config(tmp_path, queues, gpus=4)
    config.write_text(config.read_text() + "executor: {podFailureBackoffSeconds: 0.2}\n")
    server = start_server(config)
    shared = server.shared
    script, out = shared / "rendezvous.py", shared / "out"
    script.write_text(RENDEZVOUS)
    out.mkdir()
    out.chmod(0o777)
    flag = shared / "failed-once"
    command = f"{sys.executable} {script} {out} {flag}"
    response = server.apply([job("ddp", command, cpu="1", gpus=1, parallelism=3)])
    assert response.status_code == 200, response.text
    wait_until(lambda: server.jobs()["default/ddp"]["state"] in ("Succeeded", "Failed"), timeout=120)
    record = server.jobs()["default/ddp"]
    assert record["state"] == "Succeeded", server.log
    assert record["failed"] == 1  # the dead rank, once; the survivors were stopped, not failed
    ranks = _ranks(out)
    assert sorted(int(str(r["RANK"])) for r in ranks) == [
        0,
        1,
        2,
    ]  # each rank finished once, after the restart
    assert {r["WORLD_SIZE"] for r in ranks} == {"3"} and {r["LOCAL_WORLD_SIZE"] for r in ranks} == {"3"}
    assert {r["MASTER_ADDR"] for r in ranks} == {"127.0.0.1"} and len({r["MASTER_PORT"] for r in ranks}) == 1
    assert all(r["LOCAL_RANK"] == r["RANK"] for r in ranks)
    assert next(r for r in ranks if r["RANK"] == "0")["PEERS"] == [1, 2]
    devices = [str(r["CUDA_VISIBLE_DEVICES"]) for r in ranks]
    assert len(set(devices)) == 3 and all(
        d in {"0", "1", "2", "3"} for d in devices
    )  # one GPU each, none shared


def test_a_gang_starts_only_when_all_its_devices_are_free(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    # Quota allows both jobs at once (8 GPUs), the machine has 4: the 3-pod gang must not start
    # 1 or 2 ranks beside the 2-GPU holder, it waits until 3 devices are free together.
    queues = cluster_queue("main", cpu="8", gpus=8) + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues, gpus=4))
    shared = server.shared
    script, out = shared / "rendezvous.py", shared / "out"
    script.write_text(RENDEZVOUS)
    out.mkdir()
    out.chmod(0o777)
    holder = shared / "holder-done"
    response = server.apply([job("holder", f"sleep 2; date +%s.%N > {holder}", cpu="1", gpus=2)])
    assert response.status_code == 200, response.text
    wait_until(lambda: server.jobs()["default/holder"]["state"] == "Running", timeout=60)
    response = server.apply(
        [job("ddp", f"{sys.executable} {script} {out} -", cpu="1", gpus=1, parallelism=3)]
    )
    assert response.status_code == 200, response.text
    wait_until(lambda: server.jobs()["default/ddp"]["state"] == "Succeeded", timeout=120)
    ranks = _ranks(out)
    assert len(ranks) == 3
    # No rank started while the holder had its 2 of the 4 devices (2 were free all along).
    assert min(float(str(r["STARTED"])) for r in ranks) >= float(holder.read_text())


def test_a_jobs_gpus_come_from_one_declared_domain(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    # Domains {0, 2} and {1, 3}: with 0 held, the next two free devices in order (1, 2) would
    # straddle both; a 2-GPU pod must get 1 and 3, the domain that is still whole.
    queues = cluster_queue("main", cpu="8", gpus=4) + "---\n" + flavor_and_queue("a100", "main", "default")
    config = write_config(tmp_path, queues, gpus=4)
    settings = yaml.safe_load(config.read_text())
    settings["node"]["gpuDomains"] = [["0", "2"], ["1", "3"]]
    config.write_text(yaml.safe_dump(settings))
    server = start_server(config)
    out = server.shared / "out"
    out.mkdir()
    out.chmod(0o777)
    record = f'echo "$CUDA_VISIBLE_DEVICES" > {out}/'
    assert server.apply([job("one", f"{record}one; sleep 600", cpu="1", gpus=1)]).status_code == 200
    wait_until(lambda: (out / "one").exists(), timeout=60)
    assert server.apply([job("two", f"{record}two; sleep 600", cpu="1", gpus=2)]).status_code == 200
    wait_until(lambda: (out / "two").exists() and (out / "two").read_text().strip(), timeout=60)
    assert (out / "one").read_text().strip() == "0"
    assert (out / "two").read_text().strip() == "1,3"
