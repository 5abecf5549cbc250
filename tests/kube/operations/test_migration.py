"""Issue 42: taking a cluster over from upstream Kueue, and handing it back (docs/kubernetes.md,
"Migrating from Kueue").

Upstream's own manager (sigs.k8s.io/kueue/cmd/kueue at the release pykueue targets, built by
hack/kueue-manager) admits Jobs and a Workload of its own, preempts a low-priority Job for a
high-priority one (WorkloadPriorityClasses) and leaves some pending. Then it is stopped and
`pykueue controller` started on the same objects; later the reverse. Across each hand-over nothing
admitted is evicted or admitted again (same admission, same condition times, same pods), the
ClusterQueue's usage is the same, the pending ones keep their order and a new Job queues behind.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykueue.api import crd

from ..conftest import NodeFactory
from ..controller.conftest import KUEUE, QUEUE_LABEL, Kueue, condition, is_true, job_manifest, wait
from ..controller.test_job_integration import _cluster_queue, _flavor, _local_queue
from ..controlplane import KubeCluster
from ..crd_helpers import apply_crd, established, install_crds
from .conftest import Controllers
from .test_metrics_and_visibility import VISIBILITY
from .upstream_kueue import WEBHOOK_SECRET, WEBHOOK_SERVICE, UpstreamKueue

HACK = Path(__file__).resolve().parents[3] / "hack"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PRIORITIES = {"low": 10, "mid": 50, "high": 100}
# What the ClusterQueue's status says of its usage; equal across a hand-over.
USAGE_FIELDS = (
    "flavorsReservation",
    "flavorsUsage",
    "admittedWorkloads",
    "reservingWorkloads",
    "pendingWorkloads",
)


@pytest.fixture(scope="session")
def kueue_manager() -> Path:
    """Upstream's manager binary; hack/kueue-manager builds it when missing (minutes, once)."""
    built = subprocess.run(["bash", str(HACK / "kueue-manager")], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.fail(f"hack/kueue-manager failed:\n{built.stderr[-3000:]}", pytrace=False)
    return Path(built.stdout.strip().splitlines()[-1]) / "kueue"


def _upstream_crds(crd_dir: Path, service: crd.WebhookClientConfig) -> list[dict[str, Any]]:
    """Upstream's CRDs of the release (config/components/crd/bases), with the conversion webhook
    its kustomization adds to the kinds of two versions, pointing at its webhook Service."""
    manifests = [yaml.safe_load(path.read_text()) for path in sorted(crd_dir.glob("*.yaml"))]
    for manifest in manifests:
        if len(manifest["spec"]["versions"]) > 1:
            manifest["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": service.client_config("/convert"),
                    "conversionReviewVersions": ["v1"],
                },
            }
    return manifests


@pytest.fixture(params=["pykueue-crds", "upstream-crds"])
def upstream_system(
    request: pytest.FixtureRequest, kwok_cluster: KubeCluster, kueue_crds: list[str], kueue_manager: Path
) -> Iterator[str]:
    """Upstream's namespace with its (empty) certificate Secret, as its manifests make them, and
    the CRDs (pykueue's, or upstream's own of the release) with their conversion pointing at its
    webhook Service, where its certificate management publishes the CA. Afterwards the
    session's CRDs are back."""
    name = f"kueue-system-{secrets.token_hex(3)}"
    kwok_cluster.create_namespace(name)
    kwok_cluster.create(
        f"/api/v1/namespaces/{name}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": WEBHOOK_SECRET}},
    )
    service = crd.WebhookClientConfig(service_namespace=name, service_name=WEBHOOK_SERVICE)
    if request.param == "pykueue-crds":
        install_crds(kwok_cluster, service)
    else:
        manifests = _upstream_crds(kueue_manager.parent.parent / "crds", service)
        for manifest in manifests:
            apply_crd(kwok_cluster, manifest)
        for manifest in manifests:
            crd_name = manifest["metadata"]["name"]
            wait(lambda crd_name=crd_name: established(kwok_cluster, crd_name), 60, f"{crd_name} Established")
    try:
        yield name
    finally:
        # What `pykueue install --crds-only` applied; replaced whole, since upstream wrote the CA.
        for manifest in crd.crds(v1beta1_served=False):
            apply_crd(kwok_cluster, manifest)
        for manifest in crd.crds(v1beta1_served=False):
            crd_name = manifest["metadata"]["name"]
            wait(lambda crd_name=crd_name: established(kwok_cluster, crd_name), 60, f"{crd_name} Established")
        kwok_cluster.delete(f"/api/v1/namespaces/{name}")


def _priority_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": PRIORITIES[name.rpartition("-")[2]],
    }


def _job(ns: str, name: str, priority: str, parallelism: int = 1) -> dict[str, Any]:
    job = job_manifest(name, "queue", parallelism=parallelism, run_duration="3600s")
    job["metadata"]["labels"][PRIORITY_LABEL] = f"{ns}-{priority}"
    return job


def _workload(ns: str, name: str, priority: int) -> dict[str, Any]:
    """A Workload of its own (no Job behind it), as a user or another controller makes one."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "queue"}},
        "spec": {
            "queueName": "queue",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "registry.invalid/sleep:1",
                                    "resources": {"requests": {"cpu": "1", "memory": "200Mi"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def _key(workload: dict[str, Any]) -> str:
    """The Job a Workload belongs to (its name is the controller's choice), or the Workload itself."""
    owners = workload["metadata"].get("ownerReferences") or []
    return str(owners[0]["name"]) if owners else str(workload["metadata"]["name"])


@dataclass(frozen=True)
class Snapshot:
    """What must not change across a hand-over."""

    # Per admitted workload: its uid, status.admission and the times of the conditions an eviction
    # or a second admission would move.
    admitted: dict[str, tuple[str, str, tuple[tuple[str, str, str], ...]]]
    pending: frozenset[str]
    usage: dict[str, Any]
    # The pods of the admitted Jobs (an eviction suspends the Job and deletes them).
    pods: dict[str, frozenset[str]]


def _conditions(workload: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    kept = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued")
    found = [condition(workload, kind) for kind in kept]
    return tuple((c["type"], c["status"], c["lastTransitionTime"]) for c in found if c)


def snapshot(cluster: KubeCluster, kueue: Kueue, ns: str, cq: str) -> Snapshot:
    workloads = cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
    admitted = {
        _key(w): (
            w["metadata"]["uid"],
            json.dumps(w["status"]["admission"], sort_keys=True),
            _conditions(w),
        )
        for w in workloads
        if is_true(w, "Admitted")
    }
    pending = frozenset(_key(w) for w in workloads if not (w.get("status") or {}).get("admission"))
    status = kueue.cluster_queue(cq).get("status") or {}
    pods = {
        name: frozenset(p["metadata"]["uid"] for p in kueue.pods_of(ns, name))
        for name in admitted
        if name != "own"
    }
    return Snapshot(admitted, pending, {f: status.get(f) for f in USAGE_FIELDS}, pods)


def _settled(
    cluster: KubeCluster, kueue: Kueue, ns: str, cq: str, admitted: int, pending: int
) -> Snapshot | None:
    """A snapshot once the ClusterQueue's status counts what the workloads say, and every admitted
    Job runs all its pods and every pending one is suspended with none."""
    shot = snapshot(cluster, kueue, ns, cq)
    if len(shot.admitted) != admitted or len(shot.pending) != pending:
        return None
    if (shot.usage["admittedWorkloads"], shot.usage["pendingWorkloads"]) != (admitted, pending):
        return None
    for name in shot.pending - {"own"}:
        if kueue.job(ns, name)["spec"].get("suspend") is not True or kueue.pods_of(ns, name):
            return None
    for name, pods in shot.pods.items():
        if (
            kueue.job(ns, name)["spec"].get("suspend") is not False
            or len(pods) != kueue.job(ns, name)["spec"]["parallelism"]
        ):
            return None
    return shot


def _all_admitted(cluster: KubeCluster, kueue: Kueue, ns: str, cq: str, names: set[str]) -> bool:
    return names <= set(snapshot(cluster, kueue, ns, cq).admitted)


def assert_unchanged(before: Snapshot, after: Snapshot, what: str, queued: int) -> None:
    """``queued``: the Jobs created since ``before``, pending now."""
    for name, (uid, admission, conditions) in before.admitted.items():
        assert name in after.admitted, f"{what}: {name} is no longer admitted"
        now_uid, now_admission, now_conditions = after.admitted[name]
        assert now_uid == uid, f"{what}: {name}'s Workload was replaced"
        assert json.loads(now_admission) == json.loads(admission), f"{what}: {name} was admitted again"
        assert now_conditions == conditions, f"{what}: {name}'s conditions moved"
    assert after.pods == before.pods, f"{what}: an admitted Job's pods were replaced"
    expected = {**before.usage, "pendingWorkloads": before.usage["pendingWorkloads"] + queued}
    assert after.usage == expected, f"{what}: the ClusterQueue's usage changed"


def test_pykueue_takes_over_from_upstream_kueue_and_hands_back(
    kwok_cluster: KubeCluster,
    kueue: Kueue,
    controllers: Controllers,
    fake_nodes: NodeFactory,
    kube_namespace: str,
    kueue_manager: Path,
    upstream_system: str,
    tmp_path: Path,
) -> None:
    ns, cq = kube_namespace, f"{kube_namespace}-cq"
    fake_nodes(1)
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(cq, f"{ns}-flavor", "4", preemption={"withinClusterQueue": "LowerPriority"}))
    kueue.apply(_local_queue(ns, "queue", cq))
    for level in PRIORITIES:
        kueue.apply(_priority_class(f"{ns}-{level}"))
    workloads = f"{KUEUE}/namespaces/{ns}/workloads"

    def settled(admitted: int, pending: int) -> Snapshot:
        return wait(
            lambda: _settled(kwok_cluster, kueue, ns, cq, admitted, pending),
            120,
            f"{admitted} admitted and {pending} pending",
            interval=0.5,
            describe=lambda: snapshot(kwok_cluster, kueue, ns, cq),
        )

    # --- upstream admits, preempts, leaves pending --------------------------------------------------
    upstream = UpstreamKueue(kueue_manager, kwok_cluster, upstream_system, tmp_path, 0)
    upstream.wait_ready()
    kueue.create_job(ns, _job(ns, "a", "mid", parallelism=2))
    kwok_cluster.create(workloads, _workload(ns, "own", 60))
    kueue.create_job(ns, _job(ns, "b", "low"))
    settled(3, 0)
    # The queue is full: "high" preempts the lowest priority, "b", which waits again.
    kueue.create_job(ns, _job(ns, "high", "high"))
    settled(3, 1)
    kueue.create_job(ns, _job(ns, "p1", "mid"))
    kueue.create_job(ns, _job(ns, "p2", "low"))
    by_upstream = settled(3, 3)
    assert set(by_upstream.admitted) == {"a", "own", "high"}
    assert by_upstream.pending == {"b", "p1", "p2"}
    preempted = next(w for w in kwok_cluster.get(workloads)["items"] if _key(w) == "b")
    assert (condition(preempted, "Preempted") or {}).get("reason") == "InClusterQueue"
    assert upstream.stop() == 0, upstream.log()[-4000:]

    # --- pykueue takes over -------------------------------------------------------------------------
    controller = controllers.start()
    controller.wait_running()
    kueue.create_job(ns, _job(ns, "n1", "low"))
    # By priority, then by creation: p1 (mid), then b before p2 (both low; b is older), then n1.
    expected = ["p1", "b", "p2", "n1"]

    def pending_order() -> list[str] | None:
        status, body = controller.http(
            f"{VISIBILITY}/clusterqueues/{cq}/pendingworkloads", kwok_cluster.token
        )
        assert status == 200, body
        names = [w["metadata"]["name"] for w in json.loads(body)["items"]]
        by_name = {w["metadata"]["name"]: _key(w) for w in kwok_cluster.get(workloads)["items"]}
        order = [by_name.get(name, name) for name in names]
        return order if len(order) == 4 else None

    assert wait(pending_order, 60, "n1's Workload pending") == expected
    by_pykueue = settled(3, 4)
    assert_unchanged(by_upstream, by_pykueue, "pykueue's takeover", queued=1)
    # Nothing of upstream's was refused: e.g. a pending Job restored from upstream's Workload
    # without the template labels its selector needs.
    assert "WARNING pykueue.reconcilers.job_reconciler" not in controller.log(), controller.log()
    assert controller.stop() == 0, controller.log()[-4000:]

    # --- and back to upstream -----------------------------------------------------------------------
    upstream = UpstreamKueue(kueue_manager, kwok_cluster, upstream_system, tmp_path, 1)
    upstream.wait_ready()
    kueue.create_job(ns, _job(ns, "n2", "low"))
    back = settled(3, 5)
    assert_unchanged(by_pykueue, back, "upstream's takeover", queued=1)

    # The order, as upstream admits: one freed CPU at a time, then two.
    for freed, admitted_next in (("high", {"p1"}), ("own", {"b"}), ("a", {"p2", "n1"})):
        if freed == "own":
            kwok_cluster.delete(f"{workloads}/own")
        else:
            kwok_cluster.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/{freed}?propagationPolicy=Background")
        wait(
            partial(_all_admitted, kwok_cluster, kueue, ns, cq, admitted_next),
            120,
            f"{sorted(admitted_next)} admitted after {freed} went",
            interval=0.5,
        )
        now = snapshot(kwok_cluster, kueue, ns, cq)
        assert "n2" in now.pending, now
    assert upstream.stop() == 0, upstream.log()[-4000:]
