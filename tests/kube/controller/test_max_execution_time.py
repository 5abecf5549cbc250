"""A job's maximum execution time on the real control plane.

A Job labelled ``kueue.x-k8s.io/max-exec-time-seconds`` gets the limit in its
Workload's ``spec.maximumExecutionTimeSeconds``; once admitted that long, the
controller deactivates the Workload (upstream's MaximumExecutionTimeExceeded),
the Job is suspended and its quota goes to the job waiting behind it.
"""

from __future__ import annotations

from typing import Any

from ..conftest import NodeFactory
from .conftest import ControllerThread, Kueue, condition, is_true, job_manifest, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue

MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"


def test_a_job_past_its_maximum_execution_time_is_deactivated_and_its_quota_freed(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "2"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))

    limited = job_manifest("limited", "queue", cpu="2", run_duration="300s")
    limited["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "3"
    limited_job = kueue.create_job(ns, limited)
    wait(lambda: is_true(kueue.workload_of(limited_job), "Admitted"), 60, "the limited job admitted")
    workload = kueue.workload_of(limited_job)
    assert workload is not None and workload["spec"]["maximumExecutionTimeSeconds"] == 3
    behind = kueue.create_job(ns, job_manifest("behind", "queue", cpu="2", run_duration="300s"))

    def deactivated() -> dict[str, Any] | None:
        found = kueue.workload_of(limited_job)
        return found if found and found["spec"].get("active") is False else None

    final = wait(deactivated, 60, "the limited workload deactivated")
    wait(lambda: kueue.job(ns, "limited")["spec"].get("suspend") is True, 30, "the limited job suspended")
    wait(lambda: is_true(kueue.workload_of(behind), "Admitted"), 60, "the job behind it admitted")

    def evicted_and_counted() -> dict[str, Any] | None:
        found = kueue.workload_of(limited_job)
        evicted = condition(found, "Evicted")
        if not found or not evicted or evicted["status"] != "True":
            return None
        return found if "accumulatedPastExecutionTimeSeconds" in (found.get("status") or {}) else None

    counted = wait(evicted_and_counted, 30, "the eviction written with the time it ran")
    evicted = condition(counted, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded", evicted
    assert evicted["message"] == "The workload is deactivated due to exceeding the maximum execution time"
    # Admitted for about 3 s before the limit fired; whole seconds, as upstream counts them.
    assert 2 <= counted["status"]["accumulatedPastExecutionTimeSeconds"] <= 10, counted["status"]

    def warned() -> tuple[str, str, str] | None:
        for event in kueue.events_of(final):
            if event[1] == "MaximumExecutionTimeExceeded":
                return event
        return None

    kind, _, message = wait(warned, 30, "the MaximumExecutionTimeExceeded event")
    assert (kind, message) == ("Warning", "The maximum execution time (3s) exceeded")
