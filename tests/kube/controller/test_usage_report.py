"""`pykueue report usage --kubeconfig`: usage and cost derived from the Workloads in a real cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from .conftest import ControllerThread, Kueue, condition, is_true, job_manifest, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue

PYKUEUE = str(Path(sys.executable).parent / "pykueue")


def _report(cluster: KubeCluster, until: str, *args: str) -> dict[str, Any]:
    since = (datetime.fromisoformat(until.replace("Z", "+00:00")) - timedelta(hours=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    command = [PYKUEUE, "report", *args, "--since", since, "--until", until, "--format", "json"]
    done = subprocess.run(
        [*command, "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _at(workload: dict[str, Any] | None, kind: str) -> float:
    cond = condition(workload, kind)
    assert cond is not None, (kind, workload)
    return datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00")).timestamp()


def test_usage_and_cost_come_from_the_workloads(
    kwok_cluster: KubeCluster,
    kueue: Kueue,
    controller: ControllerThread,
    fake_nodes: NodeFactory,
    kube_namespace: str,
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    flavor = _flavor(f"{ns}-flavor")
    flavor["metadata"]["annotations"] = {"pykueue.io/price": "cpu=0.50,memory=0.01"}
    kueue.apply(flavor)
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    short = kueue.create_job(ns, job_manifest("short", "queue", cpu="2", memory="1Gi", run_duration="3s"))
    wait(lambda: is_true(kueue.workload_of(short), "Finished"), 60, "the short job to finish")
    long = kueue.create_job(ns, job_manifest("long", "queue", cpu="1", memory="1Gi", run_duration="600s"))
    wait(lambda: is_true(kueue.workload_of(long), "Admitted"), 60, "the long job admitted")
    finished = kueue.workload_of(short)
    held = _at(finished, "Finished") - _at(finished, "QuotaReserved")
    assert 2 <= held <= 10, "the short job holds its quota for about its run time"
    long_since = _at(kueue.workload_of(long), "QuotaReserved")

    time.sleep(1.1)  # conditions carry whole seconds: let the long run's start fall inside the window
    now = datetime.now(UTC).replace(microsecond=0)
    until, end = now.strftime("%Y-%m-%dT%H:%M:%SZ"), now.timestamp()  # one window for every report
    rows = {r["group"]: r for r in _report(kwok_cluster, until, "usage", "--by", "clusterqueue")["rows"]}
    row = rows[f"{ns}-cq"]
    assert row["runs"] == 2 and row["preemptedRuns"] == 0
    # 2 CPUs for the short run's reservation, 1 CPU for the long one's up to now (still running)
    cpu = row["resourceHours"]["cpu"]
    assert abs(cpu * 3600 - (2 * held + end - long_since)) < 1e-3
    memory = row["resourceHours"]["memory"]  # GiB-hours: 1 GiB per run
    assert abs(memory * 3600 - (held + end - long_since)) < 1e-3
    assert abs(row["cost"] - (0.50 * cpu + 0.01 * memory)) < 1e-6
    assert row["unpriced"] == []

    # Reconciled with the Job's own startTime and completionTime (the job controller's).
    checks = {c["owner"]: c for c in _report(kwok_cluster, until, "usage")["checks"] if c["namespace"] == ns}
    assert set(checks) == {"Job/short"}, checks  # the long one has not ended
    job_status = kueue.job(ns, "short")["status"]
    ran = datetime.fromisoformat(
        job_status["completionTime"].replace("Z", "+00:00")
    ) - datetime.fromisoformat(job_status["startTime"].replace("Z", "+00:00"))
    assert checks["Job/short"]["ranSeconds"] == ran.total_seconds() and checks["Job/short"]["ok"], checks

    tenant = {r["group"]: r for r in _report(kwok_cluster, until, "usage", "--by", "tenant")["rows"]}[ns]
    assert tenant["runs"] == 2 and tenant["resourceHours"] == row["resourceHours"]

    efficiency = {
        (r["clusterQueue"], r["resource"]): r for r in _report(kwok_cluster, until, "efficiency")["rows"]
    }
    cq_cpu = efficiency[(f"{ns}-cq", "cpu")]
    assert cq_cpu["nominal"] == 4 and cq_cpu["borrowed"] == 0 and cq_cpu["lent"] == 0
    # the time average over the hour: CPU-seconds held / 3600 s
    assert abs(cq_cpu["used"] - cpu) < 1e-6
