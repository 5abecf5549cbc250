"""Topology-aware scheduling end to end: batch/v1 Jobs and a JobSet on kwok nodes by blocks and racks.

The controller places the pods on a topology (the engine), gates them, and lets each
go with its domain's node selector; the real kube-scheduler then binds them. The test
reads the nodes the pods were bound to (``spec.nodeName``), not only what we wrote.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml

from pykueue.kube.conversion_webhook import topology_slices_to_domains

from ..conftest import NodeFactory
from ..controlplane import KubeCluster
from .conftest import ControllerThread, Kueue, is_true, job_manifest, wait
from .kinds import admitted, controller_for, create, pods

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"
GATE = "kueue.x-k8s.io/topology"


def _topology(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]},
    }


def _tas_queues(ns: str, pool: str) -> list[dict[str, Any]]:
    flavor, cq = f"{ns}-tas", f"{ns}-cq"
    quota = [{"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "64Gi"}]
    return [
        _topology(f"{ns}-topology"),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"pykueue.test/pool": pool}, "topologyName": f"{ns}-topology"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {"coveredResources": ["cpu", "memory"], "flavors": [{"name": flavor, "resources": quota}]}
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "queue", "namespace": ns},
            "spec": {"clusterQueue": cq},
        },
    ]


def _racks(fake_nodes: NodeFactory, pool: str) -> dict[str, tuple[str, str]]:
    """Two blocks of two racks, one 4-CPU node per rack: node name -> (block, rack)."""
    where: dict[str, tuple[str, str]] = {}
    for block in ("b1", "b2"):
        for rack in ("r1", "r2"):
            labels = {"pykueue.test/pool": pool, BLOCK: block, RACK: f"{block}-{rack}"}
            [node] = fake_nodes(1, labels=labels, capacity={"cpu": "4", "memory": "32Gi", "pods": "110"})
            where[node["metadata"]["name"]] = (block, f"{block}-{rack}")
    return where


def _pod_on(kueue: Kueue, ns: str, node: str, cpu: str) -> None:
    """A pod Kueue does not manage, bound straight to ``node``: it takes node capacity."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "resident", "annotations": {"pykueue.test/run-duration": "1h"}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "registry.invalid/sleep:1", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }
    kueue.cluster.create(f"/api/v1/namespaces/{ns}/pods", pod)


def _bound(kueue: Kueue, ns: str, job: str, count: int) -> list[dict[str, Any]] | None:
    pods = [p for p in kueue.pods_of(ns, job) if not p["metadata"].get("deletionTimestamp")]
    if len(pods) == count and all(p["spec"].get("nodeName") for p in pods):
        return pods
    return None


def test_a_job_requiring_one_block_runs_on_the_nodes_of_its_assignment(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    ns = kube_namespace
    pool = f"pool-{ns}"
    where = _racks(fake_nodes, pool)
    b1_first = next(name for name, (block, _) in where.items() if block == "b1")
    # Block b1 keeps 1 + 4 free CPUs, room for two 2-CPU pods only: the four must all go to b2.
    _pod_on(kueue, ns, b1_first, "3")
    for doc in _tas_queues(ns, pool):
        kueue.apply(doc)
    job = job_manifest("placed", "queue", parallelism=4, cpu="2", run_duration="1h")
    job["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = BLOCK
    created = kueue.create_job(ns, job)

    workload = wait(
        lambda: (w := kueue.workload_of(created)) is not None and is_true(w, "Admitted") and w,
        60,
        "the workload admitted",
    )
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]["levels"] == [HOSTNAME]
    started = wait(
        lambda: (j := kueue.job(ns, "placed"))["spec"].get("suspend") is False and j, 30, "the job started"
    )
    template = started["spec"]["template"]
    assert {"name": GATE} in template["spec"]["schedulingGates"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]

    pods = wait(lambda: _bound(kueue, ns, "placed", 4), 60, "four pods bound by kube-scheduler")
    on_nodes = Counter(p["spec"]["nodeName"] for p in pods)
    b2 = {name for name, (block, _) in where.items() if block == "b2"}
    assert on_nodes == Counter({name: 2 for name in b2})
    for pod in pods:
        assert not any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])
        assert pod["spec"]["nodeSelector"][HOSTNAME] == pod["spec"]["nodeName"]
        assert pod["spec"]["nodeSelector"]["pykueue.test/pool"] == pool


def test_pods_appearing_later_fill_the_assigned_hosts_without_overfilling_one(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    ns = kube_namespace
    pool = f"pool-{ns}"
    where = _racks(fake_nodes, pool)
    for doc in _tas_queues(ns, pool):
        kueue.apply(doc)
    # Six 2-CPU pods preferring one rack: a rack (one node) holds two, a block four, so they
    # spread over blocks, two per node on three nodes.
    job = job_manifest("spread", "queue", parallelism=6, cpu="2", run_duration="1h")
    job["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] = RACK
    created = kueue.create_job(ns, job)
    wait(
        lambda: (w := kueue.workload_of(created)) is not None and is_true(w, "Admitted"),
        60,
        "the workload admitted",
    )
    pods = wait(lambda: _bound(kueue, ns, "spread", 6), 60, "six pods bound by kube-scheduler")
    on_nodes = Counter(p["spec"]["nodeName"] for p in pods)
    assert set(on_nodes.values()) == {2} and len(on_nodes) == 3
    assert set(on_nodes) <= set(where)

    # A pod deleted is replaced by the Job's controller, gated again: it goes back to the
    # one host that now has room, never to a host that already holds its two.
    victim = pods[0]
    kueue.cluster.delete(f"/api/v1/namespaces/{ns}/pods/{victim['metadata']['name']}")
    replaced = wait(
        lambda: (
            (now := _bound(kueue, ns, "spread", 6))
            and victim["metadata"]["uid"] not in {p["metadata"]["uid"] for p in now}
            and now
        ),
        60,
        "the replacement bound",
    )
    assert Counter(p["spec"]["nodeName"] for p in replaced) == on_nodes


def _hosts_of(workload: dict[str, Any]) -> set[str]:
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    topology = topology_slices_to_domains(assignment["topologyAssignment"])
    assert topology["levels"] == [HOSTNAME]
    return {domain["values"][0] for domain in topology["domains"]}


def test_a_deleted_node_under_a_job_moves_its_pods_to_a_node_of_the_same_block(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    ns = kube_namespace
    pool = f"pool-{ns}"
    where = _racks(fake_nodes, pool)
    for doc in _tas_queues(ns, pool):
        kueue.apply(doc)
    job = job_manifest("moved", "queue", parallelism=2, cpu="2", run_duration="1h")
    job["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = BLOCK
    created = kueue.create_job(ns, job)
    pods = wait(lambda: _bound(kueue, ns, "moved", 2), 60, "two pods bound")
    block = where[pods[0]["spec"]["nodeName"]][0]
    lost = pods[0]["spec"]["nodeName"]

    kueue.cluster.delete(f"/api/v1/nodes/{lost}")
    # The node failure reaches the Workload, the engine places the lost pods again in the same
    # block (the request is required), and the Job's replacements are bound there.
    moved = wait(
        lambda: (
            (w := kueue.workload_of(created)) is not None
            and is_true(w, "Admitted")
            and lost not in _hosts_of(w)
            and not (w["status"].get("unhealthyNodes"))
            and w
        ),
        90,
        "the assignment moved off the deleted node",
    )
    assert {where[h][0] for h in _hosts_of(moved)} == {block}
    now = wait(
        lambda: (
            (
                p := [
                    x
                    for x in kueue.pods_of(ns, "moved")
                    if x.get("status", {}).get("phase") not in ("Failed",)
                ]
            )
            and len(p) == 2
            and all(x["spec"].get("nodeName") for x in p)
            and p
        ),
        90,
        "two live pods bound again",
    )
    assert {x["spec"]["nodeName"] for x in now} == _hosts_of(moved)
    assert all(where[x["spec"]["nodeName"]][0] == block for x in now)
    failed = [x for x in kueue.pods_of(ns, "moved") if x["status"].get("phase") == "Failed"]
    assert all(x["spec"]["nodeName"] == lost for x in failed)


def test_a_jobset_requiring_one_block_runs_there(
    jobset_controller: KubeCluster, kueue: Kueue, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    cluster, ns = jobset_controller, kube_namespace
    pool = f"pool-{ns}"
    where = _racks(fake_nodes, pool)
    b1_first = next(name for name, (block, _) in where.items() if block == "b1")
    _pod_on(kueue, ns, b1_first, "3")  # b1 keeps room for two 2-CPU pods: four go to b2
    for doc in _tas_queues(ns, pool):
        kueue.apply(doc)
    pod_template = job_manifest("unused", None, cpu="2", run_duration="1h")["spec"]["template"]
    pod_template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = BLOCK
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "placed", "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {"spec": {"parallelism": 2, "completions": 2, "template": pod_template}},
                }
            ]
        },
    }
    with controller_for(cluster, "jobset.x-k8s.io/jobset"):
        [created] = create(cluster, ns, yaml.safe_dump(jobset))
        uid = created["metadata"]["uid"]
        workload = wait(lambda: admitted(cluster, ns, uid), 60, "the JobSet's Workload admitted")
        assert workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
        selector = "jobset.sigs.k8s.io/jobset-name%3Dplaced"

        def bound() -> list[dict[str, Any]] | None:
            found = [p for p in pods(cluster, ns, selector) if not p["metadata"].get("deletionTimestamp")]
            return found if len(found) == 4 and all(p["spec"].get("nodeName") for p in found) else None

        found = wait(bound, 60, "four JobSet pods bound by kube-scheduler")
    b2 = {name for name, (block, _) in where.items() if block == "b2"}
    assert Counter(p["spec"]["nodeName"] for p in found) == Counter({name: 2 for name in b2})
    assert all(p["spec"]["nodeSelector"][HOSTNAME] == p["spec"]["nodeName"] for p in found)
