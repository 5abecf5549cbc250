"""waitForPodsReady on the real control plane: a gang that cannot start gives its quota back.

The controller runs with an upstream Configuration file (`--config`), as a user
would start it. A Job whose pods cannot be scheduled (its node selector matches
no node) never becomes ready: its Workload is evicted with reason
PodsReadyTimeout, its Job suspended, requeued after the backoff, and
deactivated once the backoff limit is spent. A Job whose pods run on a kwok
node gets PodsReady=True (Started) and keeps its quota.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pykueue.cli import controller_command

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from .conftest import ControllerThread, Kueue, condition, is_true, job_manifest, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue

CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "waitForPodsReady": {
        "timeout": "5s",
        "blockAdmission": False,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 1, "backoffLimitCount": 1},
    },
    "clientConnection": {"qps": 50},  # a section for upstream's Go client: accepted, reported unused
}


@pytest.fixture
def ready_controller(
    kwok_cluster: KubeCluster, kueue_crds: list[str], tmp_path: Path
) -> Iterator[ControllerThread]:
    path = tmp_path / "configuration.yaml"
    path.write_text(yaml.safe_dump(CONFIGURATION))
    config = controller_command.engine_config(path, fair_sharing=False, nominal_first=True)
    assert config.wait_for_pods_ready is not None and config.async_evictions
    thread = ControllerThread(str(kwok_cluster.kubeconfig), config=config).start()
    try:
        yield thread
    finally:
        thread.stop()


def test_pods_that_never_get_ready_are_evicted_requeued_then_deactivated(
    kueue: Kueue, ready_controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))

    runs = kueue.create_job(ns, job_manifest("runs", "queue", run_duration="120s"))
    stuck = job_manifest("stuck", "queue")
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"pykueue.test/no-such-node": "true"}
    stuck_job = kueue.create_job(ns, stuck)

    def ready(job: dict[str, object]) -> dict[str, object] | None:
        workload = kueue.workload_of(job)
        return workload if is_true(workload, "PodsReady") else None

    started = wait(lambda: ready(runs), 60, "PodsReady of the job that runs")
    assert condition(started, "PodsReady")["reason"] == "Started"

    def timed_out() -> dict[str, object] | None:
        workload = kueue.workload_of(stuck_job)
        evicted = condition(workload, "Evicted") if workload else None
        if evicted and evicted["reason"] == "PodsReadyTimeout":
            return workload
        return None

    first = wait(timed_out, 60, "the stuck job evicted by the PodsReady timeout")
    assert "Exceeded the PodsReady timeout" in condition(first, "Evicted")["message"]
    wait(lambda: kueue.job(ns, "stuck")["spec"].get("suspend") is True, 30, "the stuck job suspended")
    wait(
        lambda: (
            ((kueue.workload_of(stuck_job) or {}).get("status") or {}).get("requeueState", {}).get("count")
            == 1
        ),
        30,
        "requeueState.count 1",
    )

    # Readmitted after its 1 s backoff, it times out again: the limit (1) is spent.
    def deactivated() -> dict[str, object] | None:
        workload = kueue.workload_of(stuck_job)
        return workload if workload and workload["spec"].get("active") is False else None

    final = wait(deactivated, 90, "the stuck workload deactivated past backoffLimitCount")
    wait(lambda: kueue.job(ns, "stuck")["spec"].get("suspend") is True, 30, "the stuck job suspended again")
    evicted = condition(kueue.workload_of(stuck_job), "Evicted")
    assert evicted is not None and evicted["status"] == "True"
    assert "RequeuingLimitExceeded" in evicted["reason"] or "exceeding the maximum" in evicted["message"], (
        evicted
    )
    assert final["metadata"]["name"]

    # `kubectl describe` tells the story through Events, with upstream's reasons.
    def reasons_of(obj: dict[str, object], wanted: set[str]) -> set[str] | None:
        seen = {reason for _, reason, _ in kueue.events_of(obj)}
        return seen if wanted <= seen else None

    on_workload = {
        "QuotaReserved",
        "Admitted",
        "EvictedDueToPodsReadyTimeout",
        "EvictedDueToDeactivatedDueToRequeuingLimitExceeded",
    }
    wait(lambda: reasons_of(final, on_workload), 30, f"events {on_workload} on the stuck workload")
    on_job = {"CreatedWorkload", "Started", "Stopped"}
    wait(lambda: reasons_of(stuck_job, on_job), 30, f"events {on_job} on the stuck job")
    running = kueue.workload_of(runs)
    assert running is not None
    wait(lambda: reasons_of(running, {"QuotaReserved", "Admitted"}), 30, "events on the job that runs")

    # The job that runs kept its quota all along.
    still = kueue.workload_of(runs)
    assert is_true(still, "Admitted") and not is_true(still, "Evicted")
