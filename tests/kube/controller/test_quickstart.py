"""Upstream's quickstart, unchanged, on a real control plane with kwok nodes and the controller running."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from ..conftest import NodeFactory
from ..crd_helpers import QUICKSTART_QUEUES
from .conftest import ControllerThread, Kueue, condition, is_true, wait

SAMPLE_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        command: [ "/bin/sh" ]
        args: [ "-c", "sleep 60" ]
        resources:
          requests:
            cpu: "1"
            memory: "200Mi"
      restartPolicy: Never
"""


def _sample_job(suspend: bool) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(SAMPLE_JOB)
    if suspend:
        # What upstream's docs ask for on a cluster without Kueue's mutating webhook.
        job["spec"]["suspend"] = True
    return job


def _usage_is_zero(cq: dict[str, Any]) -> bool:
    status = cq.get("status") or {}
    totals = [r["total"] for f in status.get("flavorsReservation") or [] for r in f["resources"]]
    return (
        status.get("reservingWorkloads") == 0
        and status.get("admittedWorkloads") == 0
        and status.get("pendingWorkloads") == 0
        and bool(totals)
        and all(t in ("0", "0m") for t in totals)
    )


def test_quickstart_job_is_admitted_runs_on_kwok_nodes_completes_and_releases_quota(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory
) -> None:
    nodes = {n["metadata"]["name"] for n in fake_nodes(2)}
    kueue.apply(QUICKSTART_QUEUES)
    job = kueue.create_job("default", _sample_job(suspend=True))
    name = job["metadata"]["name"]
    assert job["spec"]["suspend"] is True

    workload = wait(
        lambda: (w := kueue.workload_of(job)) and is_true(w, "Admitted") and w,
        30,
        "the Job's Workload to be admitted",
    )
    assert is_true(workload, "QuotaReserved")
    assert workload["spec"]["queueName"] == "user-queue"
    assert workload["spec"]["podSets"][0]["count"] == 3
    assert workload["status"]["admission"]["clusterQueue"] == "cluster-queue"
    assert workload["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "default-flavor",
        "memory": "default-flavor",
    }
    owner = workload["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", name, job["metadata"]["uid"])

    wait(
        lambda: kueue.job(job["metadata"]["namespace"], name)["spec"]["suspend"] is False,
        30,
        "the Job resumed",
    )
    pods = wait(lambda: (p := kueue.pods_of("default", name)) and len(p) >= 3 and p, 30, "3 pods")
    wait(
        lambda: all(p["spec"].get("nodeName") in nodes for p in kueue.pods_of("default", name)),
        30,
        "pods bound to kwok nodes",
    )
    assert len(pods) >= 3
    wait(lambda: is_true(kueue.job("default", name), "Complete"), 60, "the Job to complete")
    finished = wait(
        lambda: (w := kueue.workload_of(job)) and is_true(w, "Finished") and w, 30, "Workload Finished"
    )
    assert condition(finished, "Finished")["reason"] == "Succeeded"  # type: ignore[index]
    wait(lambda: _usage_is_zero(kueue.cluster_queue("cluster-queue")), 30, "ClusterQueue usage back to 0")


def test_an_unsuspended_queued_job_is_suspended_until_admitted_and_pending_explains_why(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory
) -> None:
    fake_nodes(2)
    small = QUICKSTART_QUEUES.replace("nominalQuota: 9", "nominalQuota: 2")
    kueue.apply(small)
    job = kueue.create_job("default", _sample_job(suspend=False))  # the sample Job exactly as written
    name = job["metadata"]["name"]

    wait(
        lambda: kueue.job("default", name)["spec"].get("suspend") is True, 30, "the controller to suspend it"
    )
    pending = wait(
        lambda: (w := kueue.workload_of(job)) and condition(w, "QuotaReserved") and w,
        30,
        "a QuotaReserved condition on the pending Workload",
    )
    reserved = condition(pending, "QuotaReserved")
    assert reserved is not None and reserved["status"] == "False"
    assert "cpu" in reserved["message"], reserved
    wait(lambda: not kueue.pods_of("default", name), 30, "the early pods to be removed")
    lq = wait(
        lambda: (
            (q := kueue.local_queue("default", "user-queue")).get("status", {}).get("pendingWorkloads") == 1
            and q
        ),
        30,
        "LocalQueue pendingWorkloads 1",
    )
    assert condition(lq, "Active") == condition(lq, "Active") and is_true(lq, "Active")

    # More quota: the same Workload is admitted and the Job runs to the end.
    kueue.apply(copy.copy(QUICKSTART_QUEUES))
    wait(lambda: is_true(kueue.workload_of(job), "Admitted"), 30, "admission after the quota grew")
    wait(lambda: is_true(kueue.job("default", name), "Complete"), 60, "the Job to complete")
    wait(lambda: _usage_is_zero(kueue.cluster_queue("cluster-queue")), 30, "ClusterQueue usage back to 0")


def test_with_the_webhook_the_sample_job_is_suspended_at_creation_and_runs_to_the_end(
    kueue: Kueue, controller_with_webhooks: ControllerThread, fake_nodes: NodeFactory
) -> None:
    fake_nodes(2)
    kueue.apply(QUICKSTART_QUEUES)
    job = kueue.create_job("default", _sample_job(suspend=False))  # exactly as upstream's docs give it
    assert job["spec"]["suspend"] is True, "the Job webhook suspends a queue-named Job at creation"
    name = job["metadata"]["name"]
    wait(lambda: is_true(kueue.workload_of(job), "Admitted"), 30, "the Workload admitted")
    wait(lambda: is_true(kueue.job("default", name), "Complete"), 60, "the Job to complete")
    wait(lambda: _usage_is_zero(kueue.cluster_queue("cluster-queue")), 30, "ClusterQueue usage back to 0")
