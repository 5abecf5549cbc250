"""Three real control planes for the MultiKueue tests: a manager and two workers.

Each has its own etcd and kube-apiserver (own ports, own data directory); the workers
also run kube-controller-manager, kube-scheduler, kwok with two fake nodes each, the
JobSet controller and the Kubeflow training-operator, so a job dispatched to them really runs
(pods bound, run, succeed); the AppWrapper kind is there without its controller (the test
writes what it would report). The manager runs nothing but pykueue, with its webhooks (which
hand jobs queued in cq to MultiKueue): its jobs carry ``kueue.x-k8s.io/multikueue`` in their
managed-by field and never run there; it has the JobSet and Kubeflow CRDs only. Plain pods
and the pods of StatefulSets and Deployments queued in cq are MultiKueue's too: they stay
gated on the manager (which runs the StatefulSet, Deployment, ReplicaSet and ServiceAccount
controllers, no scheduler, no node), their copies run on the workers' kwok nodes.

``multikueue`` (module scope) yields a `Clusters` with the three clusters, a pykueue
controller on each (the manager's with MultiKueue on), and the queues every test uses:

    manager   ClusterQueue cq (8 cpu) with AdmissionCheck mk -> MultiKueueConfig mk
              -> MultiKueueClusters worker1 (kubeconfig in a Secret) and worker2 (a file path)
    worker1   ClusterQueue cq with 2 cpu
    worker2   ClusterQueue cq with 4 cpu
              and in each cluster the namespace ``mk-test`` with LocalQueue lq -> cq
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykueue.cli import controller_command
from pykueue.devcluster import kinds
from pykueue.multikueue import controller as multikueue
from pykueue.store import kubernetes

from ..controller.conftest import ControllerThread
from ..controlplane import KubeCluster, NodeSpec, Process, wait_for

NAMESPACE = "mk-test"
SYSTEM = "kueue-system"
WORKER_LOST_TIMEOUT = timedelta(seconds=10)
WORKER_CPU = {"worker1": "2", "worker2": "4"}
FRAMEWORKS = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "workload.codeflare.dev/appwrapper",
    "pod",
    "statefulset",
    "deployment",
)
# The kinds' controllers on the workers; the manager gets their CRDs only.
KIND_CONTROLLERS = (kinds.JOBSET, kinds.TRAINING_OPERATOR)
# Kinds whose CRD only is installed everywhere: a test plays their controller on the worker.
CRD_ONLY = (kinds.APPWRAPPER,)


@dataclass
class Clusters:
    manager: KubeCluster
    workers: dict[str, KubeCluster]
    controllers: dict[str, ControllerThread]

    def restart_apiserver(self, worker: str) -> None:
        """Start a worker's kube-apiserver again after `stop_apiserver`, same flags, same port."""
        cluster = self.workers[worker]
        old = cluster.processes["kube-apiserver"]
        cluster.processes["kube-apiserver"] = Process(old.name, old.argv, old.log_path).start()

    def stop_apiserver(self, worker: str) -> None:
        self.workers[worker].processes["kube-apiserver"].stop()


def _apply(cluster: KubeCluster, text: str) -> None:
    cluster.kubectl("apply", "--server-side", "-f", "-", input=text)


def _install_crds(cluster: KubeCluster) -> None:
    async def install() -> None:
        store = kubernetes.KubernetesStore(kubernetes.load_kubeconfig(cluster.kubeconfig))
        try:
            await controller_command.apply_all(store, controller_command.default_manifests(crds_only=True))
        finally:
            await store.close()

    asyncio.run(install())


def _queues(cpu: str, checks: str = "") -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: default}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  {checks}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {{name: cpu, nominalQuota: "{cpu}"}}
      - {{name: memory, nominalQuota: 64Gi}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: lq, namespace: {NAMESPACE}}}
spec: {{clusterQueue: cq}}
"""


def inline_kubeconfig(cluster: KubeCluster) -> str:
    """The cluster's kubeconfig with the CA inline and a bearer token: what a Secret may hold."""
    assert cluster.creds is not None
    ca = base64.b64encode(Path(cluster.creds.ca_cert).read_bytes()).decode()
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "w", "cluster": {"server": cluster.server, "certificate-authority-data": ca}}
            ],
            "users": [{"name": "u", "user": {"token": cluster.token}}],
            "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
            "current-context": "w",
        }
    )


def _multikueue_objects(workers: dict[str, KubeCluster]) -> str:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "worker1-kubeconfig", "namespace": SYSTEM},
        "data": {"kubeconfig": base64.b64encode(inline_kubeconfig(workers["worker1"]).encode()).decode()},
    }
    return (
        yaml.safe_dump(secret)
        + f"""
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {{name: worker1}}
spec:
  clusterSource:
    kubeConfig: {{location: worker1-kubeconfig, locationType: Secret}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {{name: worker2}}
spec:
  clusterSource:
    kubeConfig: {{location: "{workers["worker2"].kubeconfig}", locationType: Path}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {{name: mk}}
spec:
  clusters: [worker1, worker2]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {{name: mk}}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {{apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: mk}}
"""
    )


def _crds(specs: tuple[kinds.Spec, ...]) -> list[Path]:
    return [crd for spec in specs for crd in sorted((kinds.build(spec.name) / "crds").glob("*.yaml"))]


def _start_cluster(bin_dir: Path, workdir: Path, worker: bool) -> KubeCluster:
    cluster = KubeCluster(bin_dir, workdir)
    cluster.start_apiserver()
    if not worker:
        # The manager runs the StatefulSet and Deployment controllers (their pods stay gated
        # there, the copies run on a worker) and the ServiceAccount controller pods need; no
        # scheduler, no nodes.
        cluster.start_controllers(
            controllers="statefulset,deployment,replicaset,serviceaccount", scheduler=False
        )
    if worker:
        cluster.start_controllers()
        cluster.start_kwok()
        cluster.create_nodes(
            [
                NodeSpec(name=f"kwok-{i}", capacity={"cpu": "8", "memory": "32Gi", "pods": "110"})
                for i in range(2)
            ]
        )
        for spec in KIND_CONTROLLERS:
            kinds.start(cluster, spec)
    # The kinds without their controllers: the manager's jobs never run there, and on the
    # workers a test plays the CRD_ONLY kinds' controllers.
    for crd in _crds(CRD_ONLY if worker else KIND_CONTROLLERS + CRD_ONLY):
        cluster.kubectl("apply", "--server-side", "-f", str(crd))
        crd_name = yaml.safe_load(crd.read_text())["metadata"]["name"]
        wait_for(
            lambda n=crd_name: (
                "Established"
                in cluster.kubectl(
                    "get", f"crd/{n}", "-o", "jsonpath={.status.conditions[?(@.status=='True')].type}"
                )
            ),
            timeout=60,
            what=f"{crd_name} Established",
        )
    _install_crds(cluster)
    cluster.create_namespace(NAMESPACE)
    wait_for(
        lambda: cluster.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"),
        timeout=60,
        what=f"the default ServiceAccount of {NAMESPACE}",
    )
    return cluster


@pytest.fixture(scope="module")
def multikueue_clusters(kube_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    started: list[KubeCluster] = []
    controllers: dict[str, ControllerThread] = {}
    try:
        manager = _start_cluster(kube_bin_dir, tmp_path_factory.mktemp("manager"), worker=False)
        started.append(manager)
        workers = {}
        for name in WORKER_CPU:
            workers[name] = _start_cluster(kube_bin_dir, tmp_path_factory.mktemp(name), worker=True)
            started.append(workers[name])
            _apply(workers[name], _queues(WORKER_CPU[name]))
        manager.create_namespace(SYSTEM)
        _apply(manager, _multikueue_objects(workers))
        _apply(manager, _queues("8", checks="admissionChecksStrategy: {admissionChecks: [{name: mk}]}"))
        settings = multikueue.Settings(
            namespace=SYSTEM, worker_lost_timeout=WORKER_LOST_TIMEOUT, poll_seconds=0.5
        )
        controllers["manager"] = ControllerThread(
            str(manager.kubeconfig), webhook_namespace=SYSTEM, frameworks=FRAMEWORKS, multikueue=settings
        ).start()
        for name, cluster in workers.items():
            controllers[name] = ControllerThread(str(cluster.kubeconfig), frameworks=FRAMEWORKS).start()
        yield Clusters(manager, workers, controllers)
    finally:
        for thread in controllers.values():
            thread.stop()
        for cluster in reversed(started):
            cluster.stop()


def job(name: str, cpu: str, run_duration: str) -> dict[str, Any]:
    """A Job for the manager: queued in lq, handed to MultiKueue."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "managedBy": "kueue.x-k8s.io/multikueue",
            "parallelism": 1,
            "completions": 1,
            "template": {
                "metadata": {"annotations": {"pykueue.test/run-duration": run_duration}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/sleep:1",
                            "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                        }
                    ],
                },
            },
        },
    }


def jobset(name: str, run_duration: str) -> dict[str, Any]:
    """A JobSet for the manager (one replicated job of one pod), handed to MultiKueue."""
    template = job(name, cpu="1", run_duration=run_duration)
    pod_job = {"spec": {k: v for k, v in template["spec"].items() if k not in ("suspend", "managedBy")}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "managedBy": "kueue.x-k8s.io/multikueue",
            "replicatedJobs": [{"name": "workers", "replicas": 1, "template": pod_job}],
        },
    }


def pytorchjob(name: str, run_duration: str) -> dict[str, Any]:
    """A PyTorchJob for the manager (a master and a worker), without a managed-by field: the
    manager's webhook hands it to MultiKueue, its queue's ClusterQueue having the check."""
    replica = {
        "replicas": 1,
        "restartPolicy": "OnFailure",
        "template": {
            "metadata": {"annotations": {"pykueue.test/run-duration": run_duration}},
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "registry.invalid/pytorch:1",
                        "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}},
                    }
                ]
            },
        },
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
    }


def appwrapper(name: str) -> dict[str, Any]:
    """An AppWrapper for the manager wrapping one Pod, without managedBy nor suspend: the
    manager's webhook holds it and hands it to MultiKueue."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-pod"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/sleep:1",
                    "resources": {"requests": {"cpu": "1", "memory": "100Mi"}},
                }
            ],
        },
    }
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"components": [{"template": pod, "podSets": [{"path": "template", "replicas": 1}]}]},
    }
