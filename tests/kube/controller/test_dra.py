"""DRA on the real control plane: upstream's ResourceClaimTemplate sample charged through deviceClassMappings;
its counter and capacity samples, and a DeviceClass with no mapping, refused on a Misconfigured Workload.

kube-scheduler allocates the devices for real: a DeviceClass and a ResourceSlice published
for a kwok node stand in for a DRA driver (no driver runs here), so the pods are placed only
where a device is free, and pykueue admits only what the ClusterQueue's device quota allows.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from pykueue.cli import devcluster_command
from pykueue.reconcilers import jobframework

from ..controlplane import KubeCluster
from ..upstream_examples import example
from .conftest import ControllerThread, Kueue, condition, is_true, wait
from .kinds import create, workload_of

DRIVER = "gpu.example.com"
RESOURCE = "/apis/resource.k8s.io/v1"


def _devices(cluster: KubeCluster, node: str, count: int) -> None:
    cluster.create(
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    cluster.create(
        f"{RESOURCE}/resourceslices",
        {
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{i}"} for i in range(count)],
            },
        },
    )


def _queues(kueue: Kueue, namespace: str, tag: str) -> str:
    cq = f"dra-{tag}"
    kueue.apply(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"rf-{tag}"}}
    )
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "example.com/gpu"],
                        "flavors": [
                            {
                                "name": f"rf-{tag}",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 40},
                                    {"name": "memory", "nominalQuota": "200Gi"},
                                    {"name": "example.com/gpu", "nominalQuota": 1},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )
    kueue.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        }
    )
    return cq


def _gpu_reserved(kueue: Kueue, cq: str) -> str:
    for flavor in (kueue.cluster_queue(cq).get("status") or {}).get("flavorsReservation") or []:
        for resource in flavor.get("resources") or []:
            if resource["name"] == "example.com/gpu":
                return str(resource.get("total"))
    return "0"


def test_upstream_dra_sample_is_charged_device_quota(
    kwok_cluster: KubeCluster, kueue: Kueue, kube_namespace: str, fake_nodes: Any
) -> None:
    cluster = kwok_cluster
    tag = secrets.token_hex(3)
    [node] = fake_nodes(1)
    _devices(cluster, node["metadata"]["name"], 2)
    cq = _queues(kueue, kube_namespace, tag)
    settings = jobframework.Settings(device_classes={DRIVER: "example.com/gpu"})
    system = _system(cluster)
    thread = ControllerThread(str(cluster.kubeconfig), webhook_namespace=system, settings=settings).start()
    try:
        sample = example("dra/sample-dra-rct-job.yaml")
        template, first = create(cluster, kube_namespace, sample)
        assert template["kind"] == "ResourceClaimTemplate" and first["spec"]["suspend"] is True
        second = create(cluster, kube_namespace, "\n---\n".join(sample.split("\n---\n")[1:]))[0]
        wait(
            lambda: is_true(workload_of(cluster, kube_namespace, first["metadata"]["uid"]), "Admitted"),
            60,
            "first",
        )
        workload = workload_of(cluster, kube_namespace, first["metadata"]["uid"])
        assert workload is not None
        assert workload["spec"]["podSets"][0]["template"]["spec"]["overhead"] == {"example.com/gpu": "1"}
        # The first runs: kube-scheduler allocates a device for its claim, kwok runs the pod.
        wait(
            lambda: is_true(kueue.job(kube_namespace, first["metadata"]["name"]), "Complete"),
            90,
            "first done",
        )
        wait(
            lambda: is_true(workload_of(cluster, kube_namespace, second["metadata"]["uid"]), "Admitted"),
            60,
            "second",
        )
        wait(
            lambda: is_true(kueue.job(kube_namespace, second["metadata"]["name"]), "Complete"),
            90,
            "second done",
        )
        # The quota is one device: the second was admitted only once the first had finished.
        done = condition(workload_of(cluster, kube_namespace, first["metadata"]["uid"]), "Finished")
        later = condition(workload_of(cluster, kube_namespace, second["metadata"]["uid"]), "Admitted")
        assert done is not None and later is not None
        assert later["lastTransitionTime"] >= done["lastTransitionTime"]
        wait(lambda: _gpu_reserved(kueue, cq) == "0", 30, "device quota released")
    finally:
        thread.stop()
        cluster.delete(f"{RESOURCE}/resourceslices/{node['metadata']['name']}-gpus")
        cluster.delete(f"{RESOURCE}/deviceclasses/{DRIVER}")
        kueue.cluster.kubectl("delete", "jobs", "--all", "-n", kube_namespace, "--wait=false", check=False)
        cluster.delete(f"/api/v1/namespaces/{system}")


def _system(cluster: KubeCluster) -> str:
    name = f"pykueue-system-{secrets.token_hex(3)}"
    cluster.create_namespace(name)
    return name


# Configurations as an admin writes them for upstream's samples (read by dev-cluster's --config path).
COUNTER = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: gpu.memory
    deviceClassNames: [gpu.example.com]
    sources:
    - counter: {name: memory, driver: gpu.example.com}
"""
CAPACITY = COUNTER.replace("counter: {name: memory,", "capacity: {name: gpu.example.com/memory,")
UNMAPPED = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: example.com/fpga
    deviceClassNames: [fpga.example.com]
"""


def _events_of(cluster: KubeCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


@pytest.mark.parametrize(
    ("sample", "config", "named"),
    [
        (
            "dra/sample-dra-rct-job.yaml",
            UNMAPPED,
            "exactly.deviceClassName: DeviceClass gpu.example.com is not mapped in DRA configuration",
        ),
        ("dra/sample-dra-counter-job.yaml", COUNTER, "resources.deviceClassMappings[0].sources[0].counter"),
        (
            "dra/sample-dra-capacity-job.yaml",
            CAPACITY,
            "resources.deviceClassMappings[0].sources[0].capacity",
        ),
    ],
)
def test_upstream_dra_sample_that_cannot_be_charged_is_misconfigured(
    kwok_cluster: KubeCluster,
    kueue: Kueue,
    kube_namespace: str,
    tmp_path: Path,
    sample: str,
    config: str,
    named: str,
) -> None:
    cluster = kwok_cluster
    tag = secrets.token_hex(3)
    _queues(kueue, kube_namespace, tag)
    path = tmp_path / "config.yaml"
    path.write_text(config)
    setup = devcluster_command.configured(path)
    system = _system(cluster)
    thread = ControllerThread(
        str(cluster.kubeconfig), webhook_namespace=system, settings=setup.settings, config=setup.engine
    ).start()
    try:
        template, job = create(cluster, kube_namespace, example(sample))[:2]
        assert template["kind"] == "ResourceClaimTemplate" and job["spec"]["suspend"] is True
        uid = job["metadata"]["uid"]

        def misconfigured() -> bool:
            found = condition(workload_of(cluster, kube_namespace, uid), "QuotaReserved")
            return found is not None and found["reason"] == "Misconfigured"

        wait(misconfigured, 60, "Misconfigured")
        workload = workload_of(cluster, kube_namespace, uid)
        assert workload is not None
        reserved = condition(workload, "QuotaReserved")
        assert reserved is not None and reserved["status"] == "False" and named in reserved["message"]
        assert "overhead" not in workload["spec"]["podSets"][0]["template"]["spec"]  # nothing charged
        name = workload["metadata"]["name"]
        wait(
            lambda: any(
                e["type"] == "Warning" and named in e["message"]
                for e in _events_of(cluster, kube_namespace, name)
            ),
            30,
            "a Warning event on the Workload",
        )
        assert kueue.job(kube_namespace, job["metadata"]["name"])["spec"]["suspend"] is True
    finally:
        thread.stop()
        kueue.cluster.kubectl("delete", "jobs", "--all", "-n", kube_namespace, "--wait=false", check=False)
        cluster.delete(f"/api/v1/namespaces/{system}")


def test_upstream_dra_extended_resource_sample_is_admitted_and_charged_its_resource(
    kwok_cluster: KubeCluster, kueue: Kueue, kube_namespace: str
) -> None:
    """The extended-resource sample asks for ``example.com/gpu`` in the container itself (a
    device the node's driver may back with DRA): pykueue charges it as the resource it names."""
    cluster = kwok_cluster
    cq = _queues(kueue, kube_namespace, secrets.token_hex(3))
    system = _system(cluster)
    thread = ControllerThread(str(cluster.kubeconfig), webhook_namespace=system).start()
    try:
        [job] = create(cluster, kube_namespace, example("dra/sample-dra-extended-resource-job.yaml"))
        assert job["spec"]["suspend"] is True
        uid = job["metadata"]["uid"]
        wait(lambda: is_true(workload_of(cluster, kube_namespace, uid), "Admitted"), 60, "admitted")
        wait(lambda: _gpu_reserved(kueue, cq) == "1", 30, "example.com/gpu reserved")
        workload = workload_of(cluster, kube_namespace, uid)
        assert workload is not None
        [assignment] = workload["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"]["example.com/gpu"] == "1"
    finally:
        thread.stop()
        kueue.cluster.kubectl("delete", "jobs", "--all", "-n", kube_namespace, "--wait=false", check=False)
        cluster.delete(f"/api/v1/namespaces/{system}")
