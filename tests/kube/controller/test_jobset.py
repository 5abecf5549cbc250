"""JobSet end to end, against the real JobSet controller (sigs.k8s.io/jobset, built by hack/kind-controllers).

Upstream's sample-jobset.yaml, as written: held at creation by pykueue's webhook, admitted,
its Jobs' pods placed on the flavor's nodes, preempted by a higher priority and its
template restored, admitted again and resumed, finished with its quota released.
"""

from __future__ import annotations

from ..controlplane import KubeCluster
from ..upstream_examples import example
from .conftest import Kueue, is_true, wait
from .kinds import (
    POOL_LABEL,
    admitted,
    controller_for,
    create,
    placed_in_pool,
    pods,
    preempt_with_high_priority_job,
    queues,
    quota_released,
    wait_finished,
    workload_of,
)

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/{name}"


def test_upstream_sample_jobset_is_queued_preempted_and_resumed(
    jobset_controller: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = jobset_controller
    setup = queues(kueue, kube_namespace, cpu="3", nodes=fake_nodes)
    with controller_for(cluster, "jobset.x-k8s.io/jobset"):
        [created] = create(cluster, kube_namespace, example("jobs/sample-jobset.yaml"))
        name, uid = created["metadata"]["name"], created["metadata"]["uid"]
        assert name.startswith("sleep-job-")  # generateName, as the example has it
        assert created["spec"]["suspend"] is True  # held by the webhook at creation
        path = JOBSETS.format(ns=kube_namespace, name=name)
        selector = f"jobset.sigs.k8s.io/jobset-name%3D{name}"

        # Admitted: resumed, both replicated jobs' pods on the flavor's nodes.
        workload = wait(lambda: admitted(cluster, kube_namespace, uid), 60, "the JobSet's Workload admitted")
        assert [ps["name"] for ps in workload["spec"]["podSets"]] == ["workers", "driver"]
        assert [ps["count"] for ps in workload["spec"]["podSets"]] == [1, 1]
        wait(lambda: cluster.get(path)["spec"].get("suspend") is False, 30, "the JobSet resumed")
        first = wait(
            lambda: placed_in_pool(pods(cluster, kube_namespace, selector), setup.pool, 2), 60, "pods"
        )
        assert {p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in first} == {
            "workers",
            "driver",
        }

        # A higher priority takes the quota: the JobSet is stopped, its template restored.
        preemptor = preempt_with_high_priority_job(kueue, setup, cpu="3")
        wait(
            lambda: is_true(workload_of(cluster, kube_namespace, uid), "Evicted"),
            60,
            "the JobSet's Workload evicted",
        )
        wait(lambda: cluster.get(path)["spec"].get("suspend") is True, 30, "the JobSet suspended")

        def restored() -> bool:
            jobs = cluster.get(path)["spec"]["replicatedJobs"]
            return all(
                POOL_LABEL not in (rj["template"]["spec"]["template"]["spec"].get("nodeSelector") or {})
                for rj in jobs
            )

        wait(restored, 30, "the JobSet's pod templates restored")
        wait(lambda: not pods(cluster, kube_namespace, selector), 60, "the JobSet's pods gone")
        wait(
            lambda: is_true(kueue.job(kube_namespace, preemptor["metadata"]["name"]), "Complete"),
            60,
            "preemptor",
        )

        # Quota free again: admitted again, resumed, finished, quota released.
        wait(lambda: admitted(cluster, kube_namespace, uid), 60, "the JobSet admitted again")
        wait(lambda: cluster.get(path)["spec"].get("suspend") is False, 30, "the JobSet resumed again")
        second = wait(
            lambda: placed_in_pool(pods(cluster, kube_namespace, selector), setup.pool, 2), 60, "pods"
        )
        assert {p["metadata"]["uid"] for p in second}.isdisjoint(p["metadata"]["uid"] for p in first)
        wait(lambda: is_true(cluster.get(path), "Completed"), 90, "the JobSet Completed")
        finished = wait_finished(cluster, kube_namespace, uid)
        assert (
            next(c for c in finished["status"]["conditions"] if c["type"] == "Finished")["reason"]
            == "Succeeded"
        )
        wait(lambda: quota_released(kueue, setup), 30, "the ClusterQueue's quota released")
        # The JobSet's Jobs were never queued on their own.
        jobs = cluster.get(f"/apis/batch/v1/namespaces/{kube_namespace}/jobs")["items"]
        owned = [
            j
            for j in jobs
            if any(r.get("kind") == "JobSet" for r in j["metadata"].get("ownerReferences", []))
        ]
        assert owned and all(
            workload_of(cluster, kube_namespace, j["metadata"]["uid"]) is None for j in owned
        )
