"""Kubeflow Trainer v2's TrainJob end to end: the trainer's own controller (github.com/kubeflow/trainer/v2,
built by hack/kind-controllers) makes a JobSet for it, run by the real JobSet controller.

Upstream Kueue has no YAML example for a TrainJob; its example is the Python SDK script
site/static/examples/python/sample-trainjob.py. The TrainJob below is what that script
submits (runtime torch-distributed, 1 CPU and 2Gi per node, queue ``user-queue``), with
two nodes; the runtime is the trainer's own ``torch-distributed`` ClusterTrainingRuntime,
read from the trainer's Go module at the version built.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from pykueue.devcluster import kinds as kind_controllers

from ..controlplane import KubeCluster
from .conftest import Kueue, is_true, wait
from .kinds import controller_for, lifecycle, queues, quota_released, wait_finished, workload_of

TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"


@pytest.fixture(scope="session")
def trainer(jobset_controller: KubeCluster) -> Iterator[KubeCluster]:
    kind_controllers.start(jobset_controller, kind_controllers.TRAINER)
    runtime = kind_controllers.module_file("trainer", "manifests/base/runtimes/torch_distributed.yaml")
    jobset_controller.kubectl("apply", "--server-side", "-f", "-", input=runtime)
    try:
        yield jobset_controller
    finally:
        kind_controllers.stop(jobset_controller, kind_controllers.TRAINER)


def _trainjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "command": ["python", "-c", "print('training')"],
                "resourcesPerNode": {"requests": {"cpu": "1", "memory": "2Gi"}},
            },
        },
    }


def _patch_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of pykueue's runtime patch (where admission writes the flavor)."""
    out = []
    for patch in obj["spec"].get("runtimePatches") or []:
        if patch.get("manager") == "kueue.x-k8s.io/manager":
            spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
            out += [rj["template"]["spec"]["template"] for rj in spec.get("replicatedJobs") or []]
    return out


def test_trainjob_is_queued_preempted_resumed_and_finishes(
    trainer: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    cluster = trainer
    setup = queues(kueue, kube_namespace, cpu="2", nodes=fake_nodes)
    with controller_for(cluster, "trainer.kubeflow.org/trainjob"):
        job = cluster.create(
            TRAINJOBS.format(ns=kube_namespace), yaml.safe_load(yaml.safe_dump(_trainjob("mnist")))
        )
        assert job["spec"]["suspend"] is True  # held by pykueue's webhook at creation
        uid = job["metadata"]["uid"]
        path = f"{TRAINJOBS.format(ns=kube_namespace)}/mnist"
        workload = wait(lambda: workload_of(cluster, kube_namespace, uid), 60, "the Workload")
        assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("node", 2)]
        requests = workload["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"][
            "requests"
        ]
        assert requests == {"cpu": "1", "memory": "2Gi"}
        lifecycle(
            cluster,
            kueue,
            setup,
            path=path,
            uid=uid,
            selector="jobset.sigs.k8s.io/jobset-name%3Dmnist",
            pod_count=2,
            suspended=lambda o: bool(o["spec"].get("suspend")),
            preemptor_cpu="2",
            templates=_patch_templates,
        )
        # The trainer's JobSet is its TrainJob's: never queued on its own.
        jobset = cluster.get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{kube_namespace}/jobsets/mnist")
        assert workload_of(cluster, kube_namespace, jobset["metadata"]["uid"]) is None
        wait(lambda: is_true(cluster.get(path), "Complete"), 120, "the TrainJob Complete")
        finished = wait_finished(cluster, kube_namespace, uid, timeout=120)
        assert (
            next(c for c in finished["status"]["conditions"] if c["type"] == "Finished")["reason"]
            == "Succeeded"
        )
        wait(lambda: quota_released(kueue, setup), 30, "quota released")


def test_a_trainjob_with_integer_quantities_is_started_and_stopped(
    trainer: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: object
) -> None:
    # `cpu: 1` as a number: the trainer's webhook re-encodes spec.trainer whenever it changes the
    # TrainJob, and the CRD's `self == oldSelf` rule then refuses the update ("field is immutable").
    cluster = trainer
    setup = queues(kueue, kube_namespace, cpu="2", nodes=fake_nodes)
    body = _trainjob("integers")
    body["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": 1, "memory": "2Gi"}}
    with controller_for(cluster, "trainer.kubeflow.org/trainjob"):
        job = cluster.create(TRAINJOBS.format(ns=kube_namespace), body)
        assert job["spec"]["trainer"]["resourcesPerNode"]["requests"]["cpu"] == 1
        uid = job["metadata"]["uid"]
        path = f"{TRAINJOBS.format(ns=kube_namespace)}/integers"
        wait(lambda: cluster.get(path)["spec"].get("suspend") is False, 60, "the TrainJob started")
        workload = workload_of(cluster, kube_namespace, uid)
        assert workload is not None and is_true(workload, "Admitted") and not is_true(workload, "Finished")
        assert _patch_templates(cluster.get(path)), "the flavor is in pykueue's runtime patch"
        # Preempted by a higher priority: stopped, its patch removed, then admitted again.
        lifecycle(
            cluster,
            kueue,
            setup,
            path=path,
            uid=uid,
            selector="jobset.sigs.k8s.io/jobset-name%3Dintegers",
            pod_count=2,
            suspended=lambda o: bool(o["spec"].get("suspend")),
            preemptor_cpu="2",
            templates=_patch_templates,
        )
        assert cluster.get(path)["spec"]["trainer"]["resourcesPerNode"]["requests"]["cpu"] == 1
