"""Every other job kind end to end with its real controller (built by hack/kind-controllers).

Each test submits upstream's example for its kind as written (its LocalQueue is
``user-queue``), sees it held, admitted with the flavor's node selector on its pods,
preempted by a higher priority (stopped, templates restored), admitted again and
resumed, and then finished (a job) or deleted (a service) with its quota released.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pykueue.devcluster import kinds as kind_controllers

from ..controlplane import ApiError, KubeCluster, wait_for
from ..ray_dashboard import host_address, ray_dashboard
from ..upstream_examples import example
from .conftest import Kueue, is_true, wait
from .kinds import (
    admitted,
    controller_for,
    create,
    lifecycle,
    placed_in_pool,
    pods,
    preempt_with_high_priority_job,
    queues,
    quota_released,
    wait_finished,
    workload_of,
)


def _controller(cluster: KubeCluster, spec: kind_controllers.Spec) -> Iterator[KubeCluster]:
    kind_controllers.start(cluster, spec)
    try:
        yield cluster
    finally:
        kind_controllers.stop(cluster, spec)


@pytest.fixture(scope="session")
def training_operator(kwok_cluster: KubeCluster) -> Iterator[KubeCluster]:
    yield from _controller(kwok_cluster, kind_controllers.TRAINING_OPERATOR)


@pytest.fixture(scope="session")
def mpi_operator(kwok_cluster: KubeCluster) -> Iterator[KubeCluster]:
    yield from _controller(kwok_cluster, kind_controllers.MPI_OPERATOR)


@pytest.fixture(scope="session")
def kuberay(kwok_cluster: KubeCluster) -> Iterator[KubeCluster]:
    yield from _controller(kwok_cluster, kind_controllers.KUBERAY)


@pytest.fixture(scope="session")
def appwrapper_controller(kwok_cluster: KubeCluster) -> Iterator[KubeCluster]:
    yield from _controller(kwok_cluster, kind_controllers.APPWRAPPER)


def _finished_ok(cluster: KubeCluster, namespace: str, uid: str) -> None:
    finished = wait_finished(cluster, namespace, uid, timeout=120)
    assert (
        next(c for c in finished["status"]["conditions"] if c["type"] == "Finished")["reason"] == "Succeeded"
    )


def _replica_templates(field: str) -> Any:
    return lambda obj: [spec["template"] for spec in obj["spec"][field].values()]


def test_upstream_sample_pytorchjob(
    training_operator: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = training_operator
    setup = queues(kueue, kube_namespace, cpu="2", nodes=fake_nodes)
    with controller_for(cluster, "kubeflow.org/pytorchjob"):
        [job] = create(cluster, kube_namespace, example("jobs/sample-pytorchjob.yaml"))
        assert job["spec"]["runPolicy"]["suspend"] is True
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        workload = wait(lambda: workload_of(cluster, kube_namespace, uid), 60, "the Workload")
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("master", 1),
            ("worker", 1),
        ]
        lifecycle(
            cluster,
            kueue,
            setup,
            path=f"/apis/kubeflow.org/v1/namespaces/{kube_namespace}/pytorchjobs/{name}",
            uid=uid,
            selector=f"training.kubeflow.org/job-name%3D{name}",
            pod_count=2,
            suspended=lambda o: bool(o["spec"]["runPolicy"].get("suspend")),
            preemptor_cpu="2",
            templates=_replica_templates("pytorchReplicaSpecs"),
        )
        wait(
            lambda: is_true(
                cluster.get(f"/apis/kubeflow.org/v1/namespaces/{kube_namespace}/pytorchjobs/{name}"),
                "Succeeded",
            ),
            90,
            "Succeeded",
        )
        _finished_ok(cluster, kube_namespace, uid)
        wait(lambda: quota_released(kueue, setup), 30, "quota released")


def test_upstream_sample_mpijob(
    mpi_operator: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = mpi_operator
    setup = queues(kueue, kube_namespace, cpu="3", nodes=fake_nodes)
    with controller_for(cluster, "kubeflow.org/mpijob"):
        [job] = create(cluster, kube_namespace, example("jobs/sample-mpijob.yaml"))
        assert job["spec"]["runPolicy"]["suspend"] is True
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        workload = wait(lambda: workload_of(cluster, kube_namespace, uid), 60, "the Workload")
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("launcher", 1),
            ("worker", 2),
        ]
        lifecycle(
            cluster,
            kueue,
            setup,
            path=f"/apis/kubeflow.org/v2beta1/namespaces/{kube_namespace}/mpijobs/{name}",
            uid=uid,
            selector=f"training.kubeflow.org/job-name%3D{name}",
            pod_count=3,
            suspended=lambda o: bool(o["spec"]["runPolicy"].get("suspend")),
            preemptor_cpu="3",
            templates=_replica_templates("mpiReplicaSpecs"),
        )
        _finished_ok(cluster, kube_namespace, uid)
        wait(lambda: quota_released(kueue, setup), 30, "quota released")


def _ray_templates(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [spec["headGroupSpec"]["template"], *(g["template"] for g in spec.get("workerGroupSpecs") or [])]


def test_upstream_sample_raycluster(
    kuberay: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = kuberay
    setup = queues(kueue, kube_namespace, cpu="2", nodes=fake_nodes)
    with controller_for(cluster, "ray.io/raycluster", "ray.io/rayjob"):
        [ray] = create(cluster, kube_namespace, example("jobs/ray-cluster-sample.yaml"))
        assert ray["spec"]["suspend"] is True
        name, uid = ray["metadata"]["name"], ray["metadata"]["uid"]
        path = f"/apis/ray.io/v1/namespaces/{kube_namespace}/rayclusters/{name}"
        workload = wait(lambda: workload_of(cluster, kube_namespace, uid), 60, "the Workload")
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("head", 1),
            ("small-group", 1),
        ]
        lifecycle(
            cluster,
            kueue,
            setup,
            path=path,
            uid=uid,
            selector=f"ray.io/cluster%3D{name}",
            pod_count=2,
            suspended=lambda o: bool(o["spec"].get("suspend")),
            preemptor_cpu="2",
            templates=lambda o: _ray_templates(o["spec"]),
        )
        # A RayCluster serves until deleted: then its Workload goes and the quota with it.
        cluster.delete(path)
        wait(lambda: workload_of(cluster, kube_namespace, uid) is None, 60, "the Workload deleted")
        wait(lambda: quota_released(kueue, setup), 30, "quota released")


def test_upstream_sample_rayjob(
    kuberay: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = kuberay
    setup = queues(kueue, kube_namespace, cpu="3", nodes=fake_nodes)
    with controller_for(cluster, "ray.io/raycluster", "ray.io/rayjob"):
        [job] = create(cluster, kube_namespace, example("jobs/ray-job-sample.yaml"))
        assert job["spec"]["suspend"] is True
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        path = f"/apis/ray.io/v1/namespaces/{kube_namespace}/rayjobs/{name}"
        workload = wait(lambda: workload_of(cluster, kube_namespace, uid), 60, "the Workload")
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("head", 1),
            ("small-group", 1),
            ("submitter", 1),
        ]
        wait(lambda: admitted(cluster, kube_namespace, uid), 60, "the Workload admitted")
        wait(lambda: cluster.get(path)["spec"].get("suspend") is False, 30, "resumed")
        # KubeRay makes a RayCluster for it (never queued on its own) with the flavor on its pods.
        cluster_name = wait(
            lambda: cluster.get(path).get("status", {}).get("rayClusterName"), 60, "its RayCluster"
        )
        wait(
            lambda: placed_in_pool(
                pods(cluster, kube_namespace, f"ray.io/cluster%3D{cluster_name}"), setup.pool, 2
            ),
            90,
            "the RayCluster's pods on the flavor's nodes",
        )
        ray_cluster = cluster.get(f"/apis/ray.io/v1/namespaces/{kube_namespace}/rayclusters/{cluster_name}")
        assert workload_of(cluster, kube_namespace, ray_cluster["metadata"]["uid"]) is None
        preemptor = preempt_with_high_priority_job(kueue, setup, cpu="3")
        wait(lambda: is_true(workload_of(cluster, kube_namespace, uid), "Evicted"), 60, "evicted")
        wait(lambda: cluster.get(path)["spec"].get("suspend") is True, 30, "suspended")
        wait(
            lambda: not pods(cluster, kube_namespace, f"ray.io/cluster%3D{cluster_name}"), 60, "its pods gone"
        )
        wait(
            lambda: is_true(kueue.job(kube_namespace, preemptor["metadata"]["name"]), "Complete"),
            60,
            "preemptor",
        )
        wait(lambda: admitted(cluster, kube_namespace, uid), 60, "admitted again")
        wait(lambda: cluster.get(path)["spec"].get("suspend") is False, 30, "resumed again")
        # It finishes on its own: the test answers as its head's dashboard that the Ray job succeeded.
        with ray_dashboard("SUCCEEDED") as dashboard:
            _serve_dashboard_from(cluster, kube_namespace, path, host_address())
            done = wait(
                lambda: (
                    (s := cluster.get(path).get("status", {})).get("jobDeploymentStatus") == "Complete" and s
                ),
                90,
                "the RayJob Complete",
            )
            assert done["jobStatus"] == "SUCCEEDED" and done["jobId"] in dashboard.asked
        finished = wait_finished(cluster, kube_namespace, uid)
        assert (
            next(c for c in finished["status"]["conditions"] if c["type"] == "Finished")["reason"]
            == "Succeeded"
        )
        wait(lambda: quota_released(kueue, setup), 60, "quota released")


def _serve_dashboard_from(cluster: KubeCluster, namespace: str, path: str, address: str) -> None:
    """Give the RayJob's head pod ``address``, once kwok has made it run: the API server's
    service proxy then reaches the test's dashboard there (tests/kube/ray_dashboard.py)."""
    name = wait(lambda: cluster.get(path).get("status", {}).get("rayClusterName"), 60, "its RayCluster")
    head = wait(
        lambda: next(
            (
                p
                for p in pods(cluster, namespace, f"ray.io/cluster%3D{name},ray.io/node-type%3Dhead")
                if (p.get("status") or {}).get("podIP")
            ),
            None,
        ),
        90,
        "its head pod running",
    )
    status = {"podIP": address, "podIPs": [{"ip": address}]}
    cluster.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{head['metadata']['name']}/status",
        {"status": status},
        content_type="application/merge-patch+json",
    )


def test_upstream_sample_appwrapper(
    appwrapper_controller: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = appwrapper_controller
    setup = queues(kueue, kube_namespace, cpu="1", nodes=fake_nodes)
    with controller_for(cluster, "workload.codeflare.dev/appwrapper"):
        [aw] = create(cluster, kube_namespace, example("appwrapper/deployment-sample.yaml"))
        assert aw["spec"]["suspend"] is True
        name, uid = aw["metadata"]["name"], aw["metadata"]["uid"]
        path = f"/apis/workload.codeflare.dev/v1beta2/namespaces/{kube_namespace}/appwrappers/{name}"
        workload = wait(lambda: workload_of(cluster, kube_namespace, uid), 60, "the Workload")
        assert [ps["count"] for ps in workload["spec"]["podSets"]] == [3]

        def infos(obj: dict[str, Any]) -> list[dict[str, Any]]:
            return [{"spec": info} for c in obj["spec"]["components"] for info in c.get("podSetInfos") or []]

        lifecycle(
            cluster,
            kueue,
            setup,
            path=path,
            uid=uid,
            selector="app%3Dnginx",
            pod_count=3,
            suspended=lambda o: bool(o["spec"].get("suspend")),
            preemptor_cpu="1",
            templates=infos,
        )
        cluster.delete(path)
        wait(lambda: workload_of(cluster, kube_namespace, uid) is None, 60, "the Workload deleted")
        wait(lambda: quota_released(kueue, setup), 60, "quota released")


def test_lws_controller_syncs_every_kind_it_watches(lws_controller: KubeCluster) -> None:
    # lws v0.9 runs a DisaggregatedSet controller too: without that CRD its informer never
    # syncs and controller-runtime stops the whole manager two minutes after the start. Its
    # workers start only after the sync, so the wait ends either way (watch: the exit fails it).
    proc = lws_controller.processes["lws"]

    def started() -> bool:
        return any(
            "Starting workers" in line and "disaggregatedset" in line
            for line in proc.log_path.read_text(errors="replace").splitlines()
        )

    wait_for(started, timeout=300, what="the lws DisaggregatedSet controller's workers", watch=[proc])
    assert lws_controller.get_or_none(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/disaggregatedsets.disaggregatedset.x-k8s.io"
    )


def test_upstream_sample_leaderworkerset(
    lws_controller: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = lws_controller
    setup = queues(kueue, kube_namespace, cpu="1", nodes=fake_nodes)
    with controller_for(cluster, "leaderworkerset.x-k8s.io/leaderworkerset", "pod"):
        [lws] = create(cluster, kube_namespace, example("serving-workloads/sample-leaderworkerset.yaml"))
        name = lws["metadata"]["name"]
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]
        assert leader["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
        groups = [f"leaderworkerset-{name}-{i}" for i in range(2)]
        base = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{kube_namespace}/workloads"

        def both_admitted() -> bool:
            found = [cluster.get_or_none(f"{base}/{g}") for g in groups]
            return all(is_true(w, "Admitted") for w in found)

        wait(both_admitted, 90, "one Workload per replica, both admitted")
        workload = cluster.get(f"{base}/{groups[0]}")
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
            ("leader", 1),
            ("worker", 2),
        ]
        # LWSImmutableGroupSize, on by default as upstream: the group size stays while queued.
        with pytest.raises(ApiError) as refused:
            cluster.request(
                "PATCH",
                f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{kube_namespace}/leaderworkersets/{name}",
                {"spec": {"leaderWorkerTemplate": {"size": 4}}},
                content_type="application/merge-patch+json",
            )
        assert refused.value.status == 422
        assert "spec.leaderWorkerTemplate.size: Invalid value: 4: field is immutable" in str(refused.value)
        selector = f"leaderworkerset.sigs.k8s.io/name%3D{name}"
        first = wait(
            lambda: placed_in_pool(pods(cluster, kube_namespace, selector), setup.pool, 6), 90, "6 pods"
        )
        preemptor = preempt_with_high_priority_job(kueue, setup, cpu="1")

        def replaced_and_gated() -> bool:
            now = pods(cluster, kube_namespace, selector)
            old = {p["metadata"]["uid"] for p in first}
            return (
                bool(now)
                and not {p["metadata"]["uid"] for p in now} & old
                and all(
                    any(
                        g["name"] == "kueue.x-k8s.io/admission"
                        for g in p["spec"].get("schedulingGates") or []
                    )
                    for p in now
                )
            )

        wait(replaced_and_gated, 90, "the groups evicted, their pods made again and gated")
        wait(
            lambda: is_true(kueue.job(kube_namespace, preemptor["metadata"]["name"]), "Complete"),
            60,
            "preemptor",
        )
        wait(both_admitted, 90, "both replicas admitted again")
        wait(
            lambda: placed_in_pool(pods(cluster, kube_namespace, selector), setup.pool, 6), 90, "6 pods again"
        )
        cluster.delete(
            f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{kube_namespace}/leaderworkersets/{name}"
        )
        wait(lambda: quota_released(kueue, setup), 90, "quota released once the LeaderWorkerSet is gone")
