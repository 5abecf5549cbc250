"""The live side of `make bench-upstream`'s lost-work and lag figures (issue 46): its watches read a real
API server's Workloads and ClusterQueues (v1beta2, a client certificate from an inline kubeconfig as
upstream's runner writes it) into the record that benchmarks/upstream_watch.py's pure functions read."""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pykueue.devcluster.credentials import write_kubeconfig

from .controlplane import KubeCluster, wait_for
from .crd_helpers import install_crds

ROOT = Path(__file__).resolve().parents[2]
# benchmarks/ is not a package of the wheel; the repository's root holds it.
sys.path.insert(0, str(ROOT))

from benchmarks.upstream_watch import QueueSeen, RunWatch, WorkloadSeen, lost_work, usage_lag  # noqa: E402

pytestmark = pytest.mark.kube

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
MERGE = "application/merge-patch+json"


def _conditions(**states: bool) -> list[dict[str, Any]]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return [
        {
            "type": kind,
            "status": str(on),
            "reason": "Test",
            "message": "set by the test",
            "lastTransitionTime": now,
        }
        for kind, on in states.items()
    ]


def _queue_usage(cluster: KubeCluster, name: str, cpus: str) -> None:
    status = {
        "flavorsUsage": [{"name": "default", "resources": [{"name": "cpu", "total": cpus, "borrowed": "0"}]}]
    }
    cluster.request("PATCH", f"{KUEUE}/clusterqueues/{name}/status", {"status": status}, content_type=MERGE)


def test_the_watches_record_an_admission_its_eviction_and_the_queue_status(
    kube_apiserver: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    install_crds(kube_apiserver)
    assert kube_apiserver.creds is not None
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", kube_apiserver.server, kube_apiserver.creds, inline=True
    )
    watch = RunWatch(kubeconfig)
    watch.start()
    cq = f"watch-{secrets.token_hex(3)}"
    ns = kube_namespace
    try:
        kube_apiserver.create(
            f"{KUEUE}/clusterqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": cq},
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "10"}]}
                            ],
                        }
                    ]
                },
            },
        )
        container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
        kube_apiserver.create(
            f"{KUEUE}/namespaces/{ns}/workloads",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "w"},
                "spec": {
                    "queueName": "lq",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 2,
                            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                        }
                    ],
                },
            },
        )
        status_path = f"{KUEUE}/namespaces/{ns}/workloads/w/status"
        admission = {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}, "count": 2}
            ],
        }
        admitted = {"admission": admission, "conditions": _conditions(QuotaReserved=True, Admitted=True)}
        kube_apiserver.request("PATCH", status_path, {"status": admitted}, content_type=MERGE)
        _queue_usage(kube_apiserver, cq, "2")
        time.sleep(0.5)
        evicted = {"conditions": _conditions(QuotaReserved=True, Admitted=True, Evicted=True)}
        kube_apiserver.request("PATCH", status_path, {"status": evicted}, content_type=MERGE)
        released = {
            "admission": None,
            "conditions": _conditions(QuotaReserved=False, Admitted=False, Evicted=True),
        }
        kube_apiserver.request("PATCH", status_path, {"status": released}, content_type=MERGE)
        _queue_usage(kube_apiserver, cq, "0")

        def mine() -> list[WorkloadSeen | QueueSeen]:
            return [
                e
                for e in list(watch.seen)
                if (isinstance(e, WorkloadSeen) and e.key == f"{ns}/w")
                or (isinstance(e, QueueSeen) and e.name == cq)
            ]

        def settled() -> bool:
            seen = mine()
            return any(isinstance(e, QueueSeen) and not e.usage for e in seen[1:]) and any(
                isinstance(e, WorkloadSeen) and e.evicted and not e.reserved for e in seen
            )

        wait_for(settled, timeout=30, what="the watches to see the eviction and the queue's last status")
    finally:
        watch.stop()
        kube_apiserver.delete(f"{KUEUE}/clusterqueues/{cq}")
    seen = mine()
    held = [e for e in seen if isinstance(e, WorkloadSeen) and e.reserved]
    assert held and held[0].usage == {("default", "cpu"): 2000} and held[0].cluster_queue == cq
    lost = lost_work(seen)
    assert lost.evictions == 1
    # Charged from the times the watch delivered the two states: the 0.5 s between the writes
    # can arrive compressed on a loaded machine (seen: 0.03 s), so only its presence and bound are firm.
    assert 0 < lost.of_resource("cpu") < 2 * 10
    lag = usage_lag(seen)[cq]
    assert len(lag.lags) == 2 and lag.unresolved == 0
    assert watch.figures()["watch_cpu_s"] >= 0
