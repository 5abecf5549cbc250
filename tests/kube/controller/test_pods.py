"""Plain Pods, pod groups, Deployments and StatefulSets, queued through their pods (upstream's examples).

Kubernetes' own controllers (ReplicaSet, StatefulSet in kube-controller-manager) are the
real ones; pykueue's webhook gates each new pod and its controller lifts the gate when the
pod's (or its group's) Workload is admitted.
"""

from __future__ import annotations

from typing import Any

from ..controlplane import KubeCluster
from ..upstream_examples import example
from .conftest import Kueue, is_true, wait
from .kinds import (
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

GATE = "kueue.x-k8s.io/admission"
POD_FRAMEWORKS = ("pod", "deployment", "statefulset")
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def gated(pod: dict[str, Any]) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


def group_workload(cluster: KubeCluster, namespace: str, name: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = cluster.get_or_none(f"{KUEUE}/namespaces/{namespace}/workloads/{name}")
    return found


def workloads(cluster: KubeCluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
    return items


def test_upstream_sample_pod_is_gated_admitted_preempted_and_finishes(
    kwok_cluster: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = kwok_cluster
    setup = queues(kueue, kube_namespace, cpu="3", nodes=fake_nodes)
    with controller_for(cluster, *POD_FRAMEWORKS):
        # Preempted: a plain pod is deleted (nothing makes it again), its quota freed.
        [victim] = create(cluster, kube_namespace, example("pods-kueue/kueue-pod.yaml"))
        assert gated(victim) and victim["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
        name = victim["metadata"]["name"]
        wait(
            lambda: admitted(cluster, kube_namespace, victim["metadata"]["uid"]),
            60,
            "the pod's Workload admitted",
        )
        wait(
            lambda: placed_in_pool(
                pods(cluster, kube_namespace, "kueue.x-k8s.io/managed%3Dtrue"), setup.pool, 1
            ),
            60,
            "the pod ungated on the flavor's nodes",
        )
        preemptor = preempt_with_high_priority_job(kueue, setup, cpu="3")
        wait(
            lambda: cluster.get_or_none(f"/api/v1/namespaces/{kube_namespace}/pods/{name}") is None,
            60,
            "deleted",
        )
        wait(
            lambda: workload_of(cluster, kube_namespace, victim["metadata"]["uid"]) is None,
            60,
            "Workload gone",
        )
        wait(
            lambda: is_true(kueue.job(kube_namespace, preemptor["metadata"]["name"]), "Complete"),
            60,
            "preemptor",
        )

        # Submitted again, it runs to its end: Finished, quota released.
        [pod] = create(cluster, kube_namespace, example("pods-kueue/kueue-pod.yaml"))
        uid = pod["metadata"]["uid"]
        wait(lambda: admitted(cluster, kube_namespace, uid), 60, "the second pod's Workload admitted")
        finished = wait_finished(cluster, kube_namespace, uid)
        assert (
            next(c for c in finished["status"]["conditions"] if c["type"] == "Finished")["reason"]
            == "Succeeded"
        )
        wait(lambda: quota_released(kueue, setup), 30, "quota released")


def test_upstream_pod_group_is_admitted_as_one_and_finishes(
    kwok_cluster: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = kwok_cluster
    setup = queues(kueue, kube_namespace, cpu="6", nodes=fake_nodes)
    with controller_for(cluster, *POD_FRAMEWORKS):
        created = create(cluster, kube_namespace, example("pods-kueue/kueue-pod-group.yaml"))
        assert len(created) == 2 and all(gated(p) for p in created)
        workload = wait(
            lambda: (
                (w := group_workload(cluster, kube_namespace, "sample-group"))
                and is_true(w, "Admitted")
                and w
            ),
            60,
            "the group's Workload admitted",
        )
        assert sum(ps["count"] for ps in workload["spec"]["podSets"]) == 2
        assert {r["uid"] for r in workload["metadata"]["ownerReferences"]} == {
            p["metadata"]["uid"] for p in created
        }
        wait(
            lambda: placed_in_pool(
                pods(cluster, kube_namespace, "kueue.x-k8s.io/pod-group-name%3Dsample-group"), setup.pool, 2
            ),
            60,
            "both pods ungated on the flavor's nodes",
        )
        # AssignQueueLabelsForPods, on by default as upstream: each pod names its queues.
        for pod in pods(cluster, kube_namespace, "kueue.x-k8s.io/pod-group-name%3Dsample-group"):
            labels = pod["metadata"]["labels"]
            assert labels["kueue.x-k8s.io/cluster-queue-name"] == setup.cluster_queue
            assert labels["kueue.x-k8s.io/local-queue-name"] == "user-queue"
        wait(
            lambda: is_true(group_workload(cluster, kube_namespace, "sample-group"), "Finished"),
            60,
            "the group Finished",
        )
        wait(lambda: quota_released(kueue, setup), 30, "quota released")


def _serving_round(
    cluster: KubeCluster, kueue: Kueue, namespace: str, setup: Any, selector: str, replicas: int, kind: str
) -> None:
    """Pods placed, preempted (deleted, made again gated by their owner), admitted again."""
    first = wait(
        lambda: placed_in_pool(pods(cluster, namespace, selector), setup.pool, replicas), 90, f"{kind} pods"
    )
    preemptor = preempt_with_high_priority_job(kueue, setup, cpu="1")

    def replaced_and_gated() -> bool:
        now = pods(cluster, namespace, selector)
        return (
            bool(now)
            and all(gated(p) for p in now)
            and not {p["metadata"]["uid"] for p in now} & {p["metadata"]["uid"] for p in first}
        )

    wait(replaced_and_gated, 60, f"the {kind}'s pods evicted and made again, gated")
    wait(lambda: is_true(kueue.job(namespace, preemptor["metadata"]["name"]), "Complete"), 60, "preemptor")
    again = wait(
        lambda: placed_in_pool(pods(cluster, namespace, selector), setup.pool, replicas),
        90,
        f"{kind} pods again",
    )
    assert {p["metadata"]["uid"] for p in again}.isdisjoint(p["metadata"]["uid"] for p in first)


def test_upstream_sample_deployment_pods_are_queued_preempted_and_resumed(
    kwok_cluster: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = kwok_cluster
    setup = queues(kueue, kube_namespace, cpu="1", nodes=fake_nodes)
    with controller_for(cluster, *POD_FRAMEWORKS):
        [deployment] = create(cluster, kube_namespace, example("serving-workloads/sample-deployment.yaml"))
        assert (
            deployment["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
        )
        _serving_round(cluster, kueue, kube_namespace, setup, "app%3Dnginx", 3, "Deployment")
        running = [
            w
            for w in workloads(cluster, kube_namespace)
            if is_true(w, "Admitted")
            and not is_true(w, "Finished")
            and w["metadata"]["ownerReferences"][0]["kind"] == "Pod"
        ]
        assert len(running) == 3  # one Workload per pod, as upstream
        cluster.delete(
            f"/apis/apps/v1/namespaces/{kube_namespace}/deployments/{deployment['metadata']['name']}"
        )
        wait(lambda: quota_released(kueue, setup), 60, "quota released once the Deployment is gone")


def test_upstream_sample_statefulset_is_one_group_preempted_and_resumed(
    kwok_cluster: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = kwok_cluster
    setup = queues(kueue, kube_namespace, cpu="1", nodes=fake_nodes)
    with controller_for(cluster, *POD_FRAMEWORKS):
        [sts] = create(cluster, kube_namespace, example("serving-workloads/sample-statefulset.yaml"))
        name = sts["metadata"]["name"]
        group = f"statefulset-{name}"
        workload = wait(
            lambda: (w := group_workload(cluster, kube_namespace, group)) and is_true(w, "Admitted") and w,
            60,
            "the StatefulSet's group Workload admitted",
        )
        assert [ps["count"] for ps in workload["spec"]["podSets"]] == [3]
        _serving_round(cluster, kueue, kube_namespace, setup, "app%3Dnginx", 3, "StatefulSet")
        cluster.delete(f"/apis/apps/v1/namespaces/{kube_namespace}/statefulsets/{name}")
        wait(lambda: quota_released(kueue, setup), 60, "quota released once the StatefulSet is gone")
