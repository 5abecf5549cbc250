"""Upstream's TAS samples on the real control plane: every pod lands where its placement says.

Issue 40 items 6 and 7. The nodes are those of upstream's TAS kind cluster
(site/static/examples/tas/kind-cluster.yaml: two blocks of two racks of two nodes) as kwok
nodes; the queues are upstream's sample queues, their cluster-scoped names made unique per
test. Each test reads the node the real kube-scheduler bound every pod to, and checks it
against the Workload's topology assignment *by index*: the pod of rank i (its completion
index, JobSet job index, LWS worker index, pod-group index) on the host of the i-th slot of
the assignment, so a slice (consecutive indexes) shares its domain.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from pykueue.kube.conversion_webhook import topology_slices_to_domains

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from ..upstream_examples import example
from .conftest import Kueue, is_true, job_manifest, wait
from .kinds import controller_for, create, pods

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"

Where = dict[str, tuple[str, str]]


def _kind_nodes(fake_nodes: NodeFactory, capacity: dict[str, str]) -> Where:
    """The workers of upstream's TAS kind cluster as kwok nodes: node name -> (block, rack)."""
    [cluster] = yaml.safe_load_all(example("tas/kind-cluster.yaml"))
    where: Where = {}
    for node in cluster["nodes"]:
        if node["role"] != "worker":
            continue
        [made] = fake_nodes(1, labels=node["labels"], capacity=capacity)
        where[made["metadata"]["name"]] = (node["labels"][BLOCK], node["labels"][RACK])
    return where


def _sample_queues(kueue: Kueue, namespace: str, path: str) -> None:
    """Upstream's sample queues; cluster-scoped names get a suffix, and besides ``tas-user-queue``
    a ``user-queue`` LocalQueue (the JobSet samples' name) points at the same ClusterQueue."""
    tag = secrets.token_hex(3)
    docs = [d for d in yaml.safe_load_all(example(path)) if d]
    renamed = {
        d["metadata"]["name"]: f"{d['metadata']['name']}-{tag}"
        for d in docs
        if d["kind"] in ("Topology", "ResourceFlavor", "ClusterQueue")
    }
    for doc in docs:
        meta, spec = doc["metadata"], doc.get("spec") or {}
        if doc["kind"] != "LocalQueue":
            meta["name"] = renamed[meta["name"]]
        if doc["kind"] == "ResourceFlavor":
            spec["topologyName"] = renamed[spec["topologyName"]]
        if doc["kind"] == "ClusterQueue":
            for group in spec["resourceGroups"]:
                for flavor in group["flavors"]:
                    flavor["name"] = renamed[flavor["name"]]
        if doc["kind"] == "LocalQueue":
            spec["clusterQueue"] = renamed[spec["clusterQueue"]]
            kueue.apply({**doc, "metadata": {"name": "user-queue"}}, namespace=namespace)
        kueue.apply(doc, namespace=namespace)


def _slots(workload: dict[str, Any], pod_set: str) -> list[str]:
    """The host of each rank: the pod set's assignment expanded, one entry per pod."""
    [assignment] = [a for a in workload["status"]["admission"]["podSetAssignments"] if a["name"] == pod_set]
    topology = topology_slices_to_domains(assignment["topologyAssignment"])
    assert topology["levels"] == [HOST]
    return [domain["values"][0] for domain in topology["domains"] for _ in range(domain["count"])]


def _label(pod: dict[str, Any], key: str) -> int:
    return int(pod["metadata"]["labels"][key])


def _bound(cluster: KubeCluster, namespace: str, selector: str, count: int) -> list[dict[str, Any]] | None:
    found = pods(cluster, namespace, selector)
    return found if len(found) == count and all(p["spec"].get("nodeName") for p in found) else None


def _owned_workload(cluster: KubeCluster, namespace: str, uid: str) -> dict[str, Any] | None:
    for workload in cluster.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]:
        if any(r.get("uid") == uid for r in workload["metadata"].get("ownerReferences") or []):
            return workload if is_true(workload, "Admitted") else None
    return None


def _by_rank(found: list[dict[str, Any]], slots: list[str], rank: Callable[[dict[str, Any]], int]) -> None:
    for pod in found:
        assert pod["spec"]["nodeName"] == slots[rank(pod)], pod["metadata"]["name"]


JOB_SAMPLES = [
    "tas/sample-job-required.yaml",
    "tas/sample-job-preferred.yaml",
    "tas/sample-job-unconstrained.yaml",
]


@pytest.mark.parametrize("path", JOB_SAMPLES)
def test_upstream_tas_job_sample_pods_land_by_completion_index(
    kwok_cluster: KubeCluster, kueue: Kueue, fake_nodes: NodeFactory, kube_namespace: str, path: str
) -> None:
    cluster, ns = kwok_cluster, kube_namespace
    where = _kind_nodes(fake_nodes, {"cpu": "8", "memory": "32Gi", "pods": "110"})
    _sample_queues(kueue, ns, "tas/sample-queues.yaml")
    with controller_for(cluster):
        [job] = create(cluster, ns, example(path))
        kueue.applied.append(f"job/{job['metadata']['name']} -n {ns}")
        count = job["spec"]["parallelism"]
        workload = wait(lambda: _owned_workload(cluster, ns, job["metadata"]["uid"]), 90, "admitted")
        selector = f"batch.kubernetes.io/job-name%3D{job['metadata']['name']}"
        found = wait(lambda: _bound(cluster, ns, selector, count), 90, f"{count} pods bound")
    _by_rank(found, _slots(workload, "main"), lambda p: _label(p, COMPLETION_INDEX))
    if "required" in path:
        assert len({where[p["spec"]["nodeName"]] for p in found}) == 1  # one rack


def test_an_indexed_job_in_slices_keeps_each_slice_in_one_rack(
    kwok_cluster: KubeCluster, kueue: Kueue, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    # A rack (two 2-CPU nodes) holds one slice of four 1-CPU pods: twelve pods, three racks.
    # Pod names sort 0, 1, 10, 11, 2...: placed by name, slice 0 would take indexes 10 and 11.
    cluster, ns = kwok_cluster, kube_namespace
    where = _kind_nodes(fake_nodes, {"cpu": "2", "memory": "32Gi", "pods": "110"})
    _sample_queues(kueue, ns, "tas/sample-queues.yaml")
    job = job_manifest("sliced", "tas-user-queue", parallelism=12, run_duration="1h")
    job["spec"]["completionMode"] = "Indexed"
    job["spec"]["template"]["metadata"]["annotations"].update(
        {"kueue.x-k8s.io/podset-slice-required-topology": RACK, "kueue.x-k8s.io/podset-slice-size": "4"}
    )
    with controller_for(cluster):
        created = kueue.create_job(ns, job)
        workload = wait(lambda: _owned_workload(cluster, ns, created["metadata"]["uid"]), 90, "admitted")
        found = wait(
            lambda: _bound(cluster, ns, "batch.kubernetes.io/job-name%3Dsliced", 12), 90, "12 pods bound"
        )
    racks = {
        s: {where[p["spec"]["nodeName"]] for p in found if _label(p, COMPLETION_INDEX) // 4 == s}
        for s in range(3)
    }
    assert all(len(r) == 1 for r in racks.values()), racks
    assert len(set.union(*racks.values())) == 3
    _by_rank(found, _slots(workload, "main"), lambda p: _label(p, COMPLETION_INDEX))


JOBSET_SAMPLES = [
    "jobs/sample-jobset-tas-required.yaml",
    "jobs/sample-jobset-tas-sliced.yaml",
    "jobs/sample-jobset-tas-combined.yaml",
]


@pytest.mark.parametrize("path", JOBSET_SAMPLES)
def test_upstream_jobset_tas_sample_pods_land_by_job_and_completion_index(
    jobset_controller: KubeCluster, kueue: Kueue, fake_nodes: NodeFactory, kube_namespace: str, path: str
) -> None:
    cluster, ns = jobset_controller, kube_namespace
    # Two-CPU nodes: a rack holds four of the samples' 1-CPU pods, so slices of four fill racks.
    where = _kind_nodes(fake_nodes, {"cpu": "2", "memory": "32Gi", "pods": "110"})
    _sample_queues(kueue, ns, "tas/sample-queues.yaml")
    with controller_for(cluster, "jobset.x-k8s.io/jobset"):
        [jobset] = create(cluster, ns, example(path))
        name = jobset["metadata"]["name"]
        kueue.applied.append(f"jobset/{name} -n {ns}")
        [replicated] = jobset["spec"]["replicatedJobs"]
        per_job = replicated["template"]["spec"]["parallelism"]
        count = per_job * replicated.get("replicas", 1)
        workload = wait(lambda: _owned_workload(cluster, ns, jobset["metadata"]["uid"]), 90, "admitted")
        selector = f"jobset.sigs.k8s.io/jobset-name%3D{name}"
        found = wait(lambda: _bound(cluster, ns, selector, count), 90, f"{count} pods bound")

    def rank(pod: dict[str, Any]) -> int:
        return _label(pod, JOB_INDEX) * per_job + _label(pod, COMPLETION_INDEX)

    _by_rank(found, _slots(workload, replicated["name"]), rank)
    annotations = replicated["template"]["spec"]["template"]["metadata"]["annotations"]
    if "kueue.x-k8s.io/podset-slice-size" in annotations:
        size = int(annotations["kueue.x-k8s.io/podset-slice-size"])
        for first in range(0, count, size):
            racks = {where[p["spec"]["nodeName"]] for p in found if first <= rank(p) < first + size}
            assert len(racks) == 1, (first, racks)
    if "kueue.x-k8s.io/podset-required-topology" in annotations:
        level = annotations["kueue.x-k8s.io/podset-required-topology"]
        domains = {where[p["spec"]["nodeName"]] for p in found}
        assert len({d[0] for d in domains} if level == BLOCK else domains) == 1


def _group_pod(i: int, total: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"member-{i}",
            "labels": {
                "kueue.x-k8s.io/queue-name": "tas-user-queue",
                "kueue.x-k8s.io/pod-group-name": "racked",
                "pykueue.test/index": str(i),
            },
            "annotations": {
                "kueue.x-k8s.io/pod-group-total-count": str(total),
                "kueue.x-k8s.io/podset-required-topology": RACK,
                "kueue.x-k8s.io/pod-group-pod-index-label": "pykueue.test/index",
                "pykueue.test/run-duration": "1h",
            },
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "registry.invalid/sleep:1", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }


def test_a_pod_group_requiring_a_rack_runs_in_one_rack_by_its_pod_index(
    kwok_cluster: KubeCluster, kueue: Kueue, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    # Four 1-CPU pods, two-CPU nodes: only both nodes of one rack hold the group. Without the
    # topology gate kube-scheduler would spread them over the racks.
    cluster, ns = kwok_cluster, kube_namespace
    where = _kind_nodes(fake_nodes, {"cpu": "2", "memory": "32Gi", "pods": "110"})
    _sample_queues(kueue, ns, "tas/sample-queues.yaml")
    with controller_for(cluster, "pod"):
        created = [cluster.create(f"/api/v1/namespaces/{ns}/pods", _group_pod(i, 4)) for i in range(4)]
        assert all(
            {"name": "kueue.x-k8s.io/topology"} in p["spec"]["schedulingGates"]
            and p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-pod-index"]
            == p["metadata"]["labels"]["pykueue.test/index"]
            for p in created
        )
        workload = wait(
            lambda: (
                (w := cluster.get_or_none(f"{KUEUE}/namespaces/{ns}/workloads/racked"))
                and is_true(w, "Admitted")
                and w
            ),
            90,
            "the group admitted",
        )
        found = wait(
            lambda: _bound(cluster, ns, "kueue.x-k8s.io/pod-group-name%3Dracked", 4), 90, "4 pods bound"
        )
    assert len({where[p["spec"]["nodeName"]] for p in found}) == 1
    [pod_set] = workload["spec"]["podSets"]
    assert pod_set["topologyRequest"]["podIndexLabel"] == "kueue.x-k8s.io/pod-group-pod-index"
    _by_rank(found, _slots(workload, pod_set["name"]), lambda p: _label(p, "pykueue.test/index"))


def test_upstream_lws_tas_sample_runs_each_group_in_one_rack(
    lws_controller: KubeCluster, kueue: Kueue, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    # One GPU per node: a group's two GPU workers take both nodes of one rack, and its leader
    # must join them there (required rack, one pod set group).
    cluster, ns = lws_controller, kube_namespace
    where = _kind_nodes(fake_nodes, {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"})
    _sample_queues(kueue, ns, "tas/sample-gpu-queues.yaml")
    with controller_for(cluster, "leaderworkerset.x-k8s.io/leaderworkerset", "pod"):
        [sample] = yaml.safe_load_all(example("serving-workloads/sample-leaderworkerset-tas.yaml"))
        # As written the sample asks for a GPU without a limit, which no API server takes for
        # an extended resource: the LWS controller's worker StatefulSet is refused ("Limit must
        # be set for non overcommitable resources"). The one change: the limit, equal.
        for container in sample["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]:
            requests = container["resources"]["requests"]
            container["resources"]["limits"] = {"nvidia.com/gpu": requests["nvidia.com/gpu"]}
        [lws] = create(cluster, ns, yaml.safe_dump(sample))
        name = lws["metadata"]["name"]
        kueue.applied.append(f"leaderworkerset/{name} -n {ns}")
        groups = [f"leaderworkerset-{name}-{i}" for i in range(2)]

        def admitted() -> list[dict[str, Any]] | None:
            found = [cluster.get_or_none(f"{KUEUE}/namespaces/{ns}/workloads/{g}") for g in groups]
            return found if all(is_true(w, "Admitted") for w in found) else None  # type: ignore[misc]

        workloads = wait(admitted, 90, "both replicas admitted")
        selector = f"leaderworkerset.sigs.k8s.io/name%3D{name}"
        found = wait(
            lambda: _bound(cluster, ns, selector, 6),
            120,
            "6 pods bound",
            describe=lambda: (
                [
                    (
                        p["metadata"]["name"],
                        p["spec"].get("schedulingGates"),
                        p["spec"].get("nodeSelector"),
                        p["spec"].get("nodeName"),
                        p["status"].get("conditions"),
                    )
                    for p in pods(cluster, ns, selector)
                ]
                + [
                    (e["involvedObject"]["name"], e["reason"], e.get("message"))
                    for e in cluster.get(f"/api/v1/namespaces/{ns}/events")["items"]
                    if e["type"] == "Warning"
                ]
            ),
        )
    for index, workload in enumerate(workloads):
        mine = [
            p
            for p in found
            if p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] == str(index)
        ]
        assert len({where[p["spec"]["nodeName"]] for p in mine}) == 1, [p["spec"]["nodeName"] for p in mine]
        workers = [p for p in mine if p["metadata"]["labels"][WORKER_INDEX] != "0"]
        _by_rank(workers, _slots(workload, "worker"), lambda p: _label(p, WORKER_INDEX) - 1)
