"""A job's maximum execution time on the real control plane, and what is deleted afterwards.

A Job labelled ``kueue.x-k8s.io/max-exec-time-seconds`` gets the limit in its
Workload's ``spec.maximumExecutionTimeSeconds``; once admitted that long, the
controller deactivates the Workload (upstream's MaximumExecutionTimeExceeded),
the Job is suspended and its quota goes to the job waiting behind it. With
``objectRetentionPolicies``, finished Workloads and the jobs Kueue deactivated are
deleted once their retention is over.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from pykueue.reconcilers.jobframework import MAX_EXEC_TIME_LABEL

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from .conftest import ControllerThread, Kueue, condition, is_true, job_manifest, local_controller, wait
from .test_job_integration import _cluster_queue, _flavor, _local_queue


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


def test_retention_deletes_finished_workloads_and_the_jobs_kueue_deactivated(
    kueue: Kueue,
    kwok_cluster: KubeCluster,
    kueue_crds: list[str],
    fake_nodes: NodeFactory,
    kube_namespace: str,
    tmp_path: Path,
) -> None:
    """`pykueue controller --config` with upstream's objectRetentionPolicies, as a user runs it."""
    config = tmp_path / "configuration.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "objectRetentionPolicies": {
                    "workloads": {"afterFinished": "2s", "afterDeactivatedByKueue": "3s"}
                },
            }
        )
    )
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    system = f"pykueue-retention-{secrets.token_hex(3)}"
    log_path = tmp_path / "controller.log"
    with local_controller(kwok_cluster, log_path, system, "--config", str(config)):
        done_job = kueue.create_job(ns, job_manifest("done", "queue", run_duration="1s"))
        limited = job_manifest("limited", "queue", run_duration="300s")
        limited["metadata"]["labels"][MAX_EXEC_TIME_LABEL] = "2"
        limited_job = kueue.create_job(ns, limited)

        finished = wait(
            lambda: (w := kueue.workload_of(done_job)) and is_true(w, "Finished") and w,
            60,
            "the job's workload finished",
        )
        finished_at = condition(finished, "Finished")["lastTransitionTime"]
        wait(lambda: kueue.workload_of(done_job) is None, 30, "the finished workload deleted")
        gone_at = datetime.now(UTC)
        # Not before its 2 s of retention (whole seconds in lastTransitionTime: 1 s of slack).
        assert (gone_at - datetime.fromisoformat(finished_at.replace("Z", "+00:00"))).total_seconds() >= 1
        assert is_true(kueue.job(ns, "done"), "Complete")  # the job itself stays
        assert ("Normal", "Deleted", "Deleted finished workload due to elapsed retention") in kueue.events_of(
            finished
        )

        wait(
            lambda: (w := kueue.workload_of(limited_job)) and w["spec"].get("active") is False,
            60,
            "the limited workload deactivated",
        )
        wait(
            lambda: kwok_cluster.get_or_none(f"/apis/batch/v1/namespaces/{ns}/jobs/limited") is None,
            60,
            "the job Kueue deactivated deleted",
        )
        assert ("Normal", "Deleted", "Deleted job: deactivation retention period expired") in kueue.events_of(
            limited_job
        )
        # Read, not reported as a section pykueue does not use.
        assert "objectRetentionPolicies" not in log_path.read_text()
