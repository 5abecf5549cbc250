"""Two `pykueue controller --leader-elect` processes on the real control plane: one writes, one waits."""

from __future__ import annotations

import time

from ..conftest import NodeFactory
from ..controller.conftest import Kueue, is_true, job_manifest, wait
from ..controller.test_job_integration import _cluster_queue, _flavor, _local_queue
from ..controlplane import KubeCluster
from .conftest import Controllers

LEASE = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/pykueue-controller-leader"


def test_one_replica_leads_and_the_standby_takes_over_after_kill_9(
    kwok_cluster: KubeCluster,
    kueue: Kueue,
    controllers: Controllers,
    fake_nodes: NodeFactory,
    kube_namespace: str,
) -> None:
    ns = kube_namespace
    fake_nodes(1)
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    first = controllers.start("--leader-elect", "--lease-namespace", ns)
    first.wait_running()
    second = controllers.start("--leader-elect", "--lease-namespace", ns)
    second.wait_serving()
    lease_path = LEASE.format(ns=ns)
    assert kwok_cluster.get(lease_path)["spec"]["holderIdentity"] == first.identity

    job = kueue.create_job(ns, job_manifest("before", "queue", run_duration="600s"))
    wait(lambda: is_true(kueue.workload_of(job), "Admitted"), 30, "admission by the leader")
    time.sleep(3)  # more than one retry period of the standby
    # Exactly one writes: the standby never started its loop and says it follows.
    assert "pykueue controller is running" not in second.log()
    assert "acquired lease" not in second.log()
    assert 'leader_election_master_status{name="pykueue-controller-leader"} 0.0' in second.http("/metrics")[1]
    scraped = first.http("/metrics")[1]
    assert 'leader_election_master_status{name="pykueue-controller-leader"} 1.0' in scraped
    assert (
        f'kueue_admitted_workloads_total{{cluster_queue="{ns}-cq",priority_class="",replica_role="leader"}} 1.0'
        in scraped
    )
    assert second.http("/readyz")[0] == 200

    first.kill()
    killed = time.monotonic()
    job2 = kueue.create_job(ns, job_manifest("after", "queue", run_duration="600s"))
    wait(lambda: "acquired lease" in second.log(), 30, "the standby to take the lease")
    took_over = time.monotonic() - killed
    wait(lambda: is_true(kueue.workload_of(job2), "Admitted"), 30, "admission by the new leader")
    admitted_after = time.monotonic() - killed
    assert kwok_cluster.get(lease_path)["spec"]["holderIdentity"] == second.identity
    # Lease 15 s; a standby sees a renewal up to one retry period (2 s) late and tries every 2 s.
    assert took_over <= 15 + 2 * 2, took_over
    print(f"takeover after kill -9: lease {took_over:.1f}s, next Job admitted {admitted_after:.1f}s")
    assert kueue.job(ns, "after")["spec"]["suspend"] is False or wait(
        lambda: kueue.job(ns, "after")["spec"]["suspend"] is False, 15, "the Job to run"
    )
    # The first job, admitted before the kill, is still admitted once and running.
    assert is_true(kueue.workload_of(job), "Admitted")
    assert second.stop() == 0
    # A graceful stop releases the lease.
    assert kwok_cluster.get(lease_path)["spec"].get("holderIdentity", "") == ""
