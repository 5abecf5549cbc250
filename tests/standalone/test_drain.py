"""1,000 queued jobs with short commands: every one runs exactly once.

How fast they drain is a benchmark (`make bench`, benchmarks/standalone_bench.py), not a test:
a timing limit here failed whenever the machine was busy.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path

import yaml

from .helpers import Server, cluster_queue, flavor_and_queue, job, wait_until, write_config

JOBS = 1000


def test_a_thousand_jobs_drain_with_no_lost_or_duplicated_run(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    # 20 CPUs of quota, 100m per job: up to 200 short jobs admitted at once.
    queues = cluster_queue("main", cpu="20") + "---\n" + flavor_and_queue("a100", "main", "default")
    server = start_server(write_config(tmp_path, queues))
    runs = tmp_path / "runs.txt"
    jobs = [job(f"quick-{i:04d}", f"echo $PYKUEUE_JOB >> {runs}", cpu="100m") for i in range(JOBS)]
    listing = {"apiVersion": "v1", "kind": "List", "items": jobs}
    response = server.apply(yaml.safe_dump(listing))
    assert response.status_code == 200, response.text[:2000]
    assert len(response.json()["results"]) == JOBS

    def drained() -> bool:
        # The queue's counters are cheap to read; listing 1,000 jobs every poll would slow the server.
        cq = server.api("GET", "/api/v1/clusterqueues")[0]
        return cq["pending"] == 0 and cq["admitted"] == 0 and len(runs.read_text().split()) >= JOBS

    wait_until(lambda: runs.exists() and drained(), timeout=900, interval=0.5)
    lines = runs.read_text().split()
    counts = collections.Counter(lines)
    assert len(counts) == JOBS, "every job ran"
    assert max(counts.values()) == 1, [name for name, n in counts.items() if n > 1][:10]
    assert {j["state"] for j in server.jobs().values()} == {"Succeeded"}
    workloads = server.api("GET", "/api/v1/workloads")
    assert len(workloads) == JOBS and {w["state"] for w in workloads} == {"Finished"}
    cq = server.api("GET", "/api/v1/clusterqueues")[0]
    assert cq["admitted"] == 0 and cq["pending"] == 0
