"""Issue 23: what a user of upstream Kueue expects of a drop-in, on the real control plane.

Queue-name changes of Jobs, Workloads whose queues do not exist, invalid ClusterQueues,
every pending Workload explained, and a controller started before its API server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykueue.store import kubernetes

from ..conftest import NodeFactory
from ..controlplane import ApiError, ControlPlaneError, KubeCluster
from .conftest import (
    QUEUE_LABEL,
    ControllerThread,
    Kueue,
    condition,
    is_true,
    job_manifest,
    local_controller,
    wait,
)
from .test_cli import PYKUEUE
from .test_job_integration import _cluster_queue, _flavor, _local_queue

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
MERGE_PATCH = "application/merge-patch+json"


def _relabel(kueue: Kueue, namespace: str, name: str, queue: str) -> Any:
    return kueue.cluster.request(
        "PATCH",
        f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}",
        {"metadata": {"labels": {QUEUE_LABEL: queue}}},
        content_type=MERGE_PATCH,
    )


def _queues(kueue: Kueue, ns: str) -> None:
    """Two LocalQueues: ``empty`` (a ClusterQueue without quota), ``full`` (4 CPUs)."""
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-empty", f"{ns}-flavor", "0"))
    kueue.apply(_cluster_queue(f"{ns}-full", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "empty", f"{ns}-empty"))
    kueue.apply(_local_queue(ns, "full", f"{ns}-full"))


def test_a_suspended_jobs_new_queue_name_reaches_its_workload_which_is_then_admitted(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    _queues(kueue, ns)
    job = kueue.create_job(ns, job_manifest("mover", "empty"))
    pending = wait(
        lambda: (wl := kueue.workload_of(job)) and condition(wl, "QuotaReserved") and wl,
        30,
        "the Workload pending in the queue without quota",
    )
    assert pending["spec"]["queueName"] == "empty"
    _relabel(kueue, ns, "mover", "full")
    moved = wait(
        lambda: (wl := kueue.workload_of(job)) and wl["spec"]["queueName"] == "full" and wl,
        30,
        "the Workload's spec.queueName to follow the Job's label",
    )
    assert moved["metadata"]["uid"] == pending["metadata"]["uid"], "the same Workload, updated"
    wait(lambda: is_true(kueue.workload_of(job), "Admitted"), 30, "the moved Workload admitted")
    admitted = kueue.workload_of(job)
    assert admitted is not None and admitted["status"]["admission"]["clusterQueue"] == f"{ns}-full"
    wait(lambda: is_true(kueue.job(ns, "mover"), "Complete"), 60, "the Job to run to the end")


def test_the_webhook_refuses_a_queue_name_change_of_a_running_job(
    kueue: Kueue, controller_with_webhooks: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    _queues(kueue, ns)
    job = kueue.create_job(ns, job_manifest("runner", "full", run_duration="120s"))
    wait(lambda: kueue.job(ns, "runner")["spec"].get("suspend") is False, 30, "the Job running")
    with pytest.raises(ApiError) as refused:
        _relabel(kueue, ns, "runner", "empty")
    assert refused.value.status in (400, 403, 422), refused.value
    message = str(refused.value)
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in message and "immutable" in message, message
    assert kueue.job(ns, "runner")["metadata"]["labels"][QUEUE_LABEL] == "full"
    workload = kueue.workload_of(job)
    assert workload is not None and workload["spec"]["queueName"] == "full"
    # While suspended the label may change (the case the reconciler follows).
    kueue.cluster.request(
        "PATCH",
        f"/apis/batch/v1/namespaces/{ns}/jobs/runner",
        {"spec": {"suspend": True}, "metadata": {"labels": {QUEUE_LABEL: "empty"}}},
        content_type=MERGE_PATCH,
    )
    assert kueue.job(ns, "runner")["metadata"]["labels"][QUEUE_LABEL] == "empty"


def _reserved_false(kueue: Kueue, ns: str, name: str) -> dict[str, Any] | None:
    wl = kueue.cluster.get_or_none(f"{KUEUE}/namespaces/{ns}/workloads/{name}")
    cond = condition(wl, "QuotaReserved")
    return cond if cond is not None and cond["status"] == "False" else None


def _workload(ns: str, name: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                            ],
                        }
                    },
                }
            ],
        },
    }


def test_a_workload_whose_queues_do_not_exist_says_so_as_upstream(
    kueue: Kueue, controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    kueue.apply(_workload(ns, "lost", "nowhere"))
    no_lq = wait(lambda: _reserved_false(kueue, ns, "lost"), 30, "QuotaReserved=False on the lost Workload")
    assert (no_lq["reason"], no_lq["message"]) == ("Misconfigured", "LocalQueue nowhere doesn't exist")

    kueue.apply(_local_queue(ns, "dangling", f"{ns}-missing-cq"))
    kueue.apply(_workload(ns, "dangling", "dangling"))
    no_cq = wait(
        lambda: _reserved_false(kueue, ns, "dangling"), 30, "QuotaReserved=False on the dangling Workload"
    )
    assert (no_cq["reason"], no_cq["message"]) == (
        "Misconfigured",
        f"ClusterQueue {ns}-missing-cq doesn't exist",
    )

    # Once the queue exists the workload is admitted.
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-missing-cq", f"{ns}-flavor", "2"))
    wait(
        lambda: is_true(kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads/dangling"), "Admitted"),
        30,
        "the Workload admitted once its ClusterQueue exists",
    )


def test_a_cluster_queue_the_controller_refuses_says_why_in_its_active_condition(
    kueue: Kueue, controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    # No webhook here: the API server's schema accepts what only upstream's webhook refuses.
    bad = _cluster_queue(f"{ns}-bad", f"{ns}-flavor", "1", cohort=f"{ns}-cohort")
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "5"
    kueue.apply(bad)
    inactive = wait(
        lambda: (c := condition(kueue.cluster_queue(f"{ns}-bad"), "Active")) and c["status"] == "False" and c,
        30,
        "Active=False on the invalid ClusterQueue",
    )
    assert inactive["reason"] == "Invalid", inactive
    assert "lendingLimit" in inactive["message"], inactive
    kueue.apply(_local_queue(ns, "queue", f"{ns}-bad"))
    kueue.apply(_workload(ns, "waits", "queue"))
    waiting = wait(lambda: _reserved_false(kueue, ns, "waits"), 30, "the Workload's QuotaReserved=False")
    assert waiting["reason"] == "Misconfigured", waiting

    # Fixed, it becomes active and admits.
    del bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"]
    kueue.cluster.request(
        "PUT",
        f"{KUEUE}/clusterqueues/{ns}-bad",
        {
            **bad,
            "metadata": {
                **bad["metadata"],
                "resourceVersion": kueue.cluster_queue(f"{ns}-bad")["metadata"]["resourceVersion"],
            },
        },
    )
    wait(
        lambda: (c := condition(kueue.cluster_queue(f"{ns}-bad"), "Active")) and c["status"] == "True",
        30,
        "Active=True once the ClusterQueue is valid",
    )
    wait(
        lambda: is_true(kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads/waits"), "Admitted"),
        30,
        "the Workload admitted",
    )


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_every_pending_workload_says_why_it_waits(
    kueue: Kueue, controller: ControllerThread, kube_namespace: str, strategy: str
) -> None:
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "2", queueingStrategy=strategy))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    count = 40
    for i in range(count):
        kueue.apply(_workload(ns, f"wl-{i:02d}", "queue"))

    def explained() -> list[dict[str, Any]] | None:
        items = kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
        pending = [w for w in items if not (w.get("status") or {}).get("admission")]
        if len(items) != count or len(pending) != count - 2:
            return None
        return pending if all(condition(w, "QuotaReserved") for w in pending) else None

    try:
        pending = wait(explained, 60, "a QuotaReserved condition on every pending Workload")
    except AssertionError:
        items = kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
        bare = [w["metadata"]["name"] for w in items if not condition(w, "QuotaReserved")]
        raise AssertionError(f"{len(bare)} of {len(items)} Workloads without QuotaReserved: {bare}") from None
    for wl in pending:
        reserved = condition(wl, "QuotaReserved")
        assert reserved is not None and reserved["status"] == "False" and reserved["message"], wl
    if strategy == "BestEffortFIFO":
        # One of the twins was tried and did not fit; the others say they were skipped for it.
        def reasons() -> set[tuple[str, bool]] | None:
            items = kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
            conds = [
                condition(w, "QuotaReserved") for w in items if not (w.get("status") or {}).get("admission")
            ]
            found = {(c["reason"], c["message"].startswith("Bypassed")) for c in conds if c}
            return found if found == {("WaitingForQuota", False), ("WaitingForQuota", True)} else None

        try:
            wait(reasons, 30, "every pending Workload's reason: WaitingForQuota, tried or bypassed")
        except AssertionError:
            items = kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads")["items"]
            seen = sorted(
                {(c["reason"], c["message"]) for w in items if (c := condition(w, "QuotaReserved"))}
            )
            raise AssertionError(f"reasons seen: {seen}") from None


class _Forwarder:
    """A TCP port on 127.0.0.1 that forwards to the API server once opened: until then,
    connections to it are refused, as to an API server that is not up yet."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = int(probe.getsockname()[1])
        probe.close()  # nothing listens there until open()
        self._server: socket.socket | None = None

    def open(self) -> None:
        server = socket.create_server(("127.0.0.1", self.port))
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


def test_a_controller_started_before_its_api_server_waits_and_then_works(
    kueue: Kueue, kwok_cluster: KubeCluster, kube_namespace: str
) -> None:
    ns = kube_namespace
    real = kubernetes.load_kubeconfig(kwok_cluster.kubeconfig)
    address = urllib.parse.urlsplit(real.server)
    forwarder = _Forwarder((address.hostname or "127.0.0.1", address.port or 443))
    config = dataclasses.replace(real, server=f"https://127.0.0.1:{forwarder.port}")
    thread = ControllerThread(config).launch()
    try:
        # The API server "is down": the controller keeps trying instead of exiting.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert thread.alive(), f"the controller exited: {thread.error!r}"
            time.sleep(0.2)
        assert not thread.ready.is_set()
        forwarder.open()
        assert thread.ready.wait(60), f"the controller never became ready: {thread.error!r}"
        kueue.apply(_flavor(f"{ns}-flavor"))
        kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "2"))
        kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
        kueue.apply(_workload(ns, "late", "queue"))
        wait(
            lambda: is_true(kueue.cluster.get(f"{KUEUE}/namespaces/{ns}/workloads/late"), "Admitted"),
            30,
            "the Workload admitted by the controller that waited",
        )
    finally:
        thread.stop()
        forwarder.close()


V1BETA1_CLUSTER_QUEUE = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: {name}
spec:
  cohort: {cohort}
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: {flavor}
      resources:
      - name: cpu
        nominalQuota: "2"
        borrowingLimit: "1"
      - name: memory
        nominalQuota: 1Gi
"""


def test_after_install_crds_only_a_v1beta1_object_is_refused_not_stripped(
    kueue: Kueue, kwok_cluster: KubeCluster, kube_namespace: str
) -> None:
    ns = kube_namespace
    # The session's CRDs are what `pykueue install --crds-only` applies.
    manifest = V1BETA1_CLUSTER_QUEUE.format(name=f"{ns}-old", cohort=f"{ns}-co", flavor=f"{ns}-flavor")
    with pytest.raises(ControlPlaneError) as refused:
        kwok_cluster.kubectl("apply", "--server-side", "-f", "-", input=manifest)
    assert "v1beta1" in str(refused.value), refused.value
    assert kwok_cluster.get_or_none(f"{KUEUE}/clusterqueues/{ns}-old") is None


@pytest.fixture
def local_webhook_controller(
    kwok_cluster: KubeCluster, kueue_crds: list[str], tmp_path: Path
) -> Iterator[subprocess.Popen[str]]:
    system = f"pykueue-local-{secrets.token_hex(3)}"
    with local_controller(kwok_cluster, tmp_path / "controller.log", system) as process:
        yield process


def test_out_of_cluster_with_local_webhooks_jobs_are_suspended_at_creation_and_v1beta1_converts(
    kueue: Kueue,
    local_webhook_controller: subprocess.Popen[str],
    fake_nodes: NodeFactory,
    kube_namespace: str,
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    # A v1beta1 ClusterQueue goes through the local conversion webhook: nothing is lost.
    manifest = V1BETA1_CLUSTER_QUEUE.format(name=f"{ns}-old", cohort=f"{ns}-co", flavor=f"{ns}-flavor")
    kueue.cluster.kubectl("apply", "--server-side", "-f", "-", input=manifest)
    kueue.applied.append(f"clusterqueue/{ns}-old")
    stored = kueue.cluster_queue(f"{ns}-old")
    assert stored["spec"]["cohortName"] == f"{ns}-co"
    cpu = stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert (cpu["nominalQuota"], cpu["borrowingLimit"]) == ("2", "1")
    kueue.apply(_local_queue(ns, "queue", f"{ns}-old"))
    # A queue-named Job created running, as upstream's sample: suspended by the webhook.
    job = kueue.create_job(ns, job_manifest("sample", "queue", suspend=False))
    assert job["spec"]["suspend"] is True
    wait(lambda: is_true(kueue.job(ns, "sample"), "Complete"), 60, "the Job run to the end once admitted")


def test_install_crds_only_then_a_full_server_side_apply_does_not_conflict(
    kwok_cluster: KubeCluster, kueue_crds: list[str], tmp_path: Path
) -> None:
    def install(*extra: str) -> None:
        result = subprocess.run(
            [PYKUEUE, "install", *extra, "--kubeconfig", str(kwok_cluster.kubeconfig)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr

    install("--crds-only")
    # The documented full install, by kubectl: the CRDs change (v1beta1 served, webhook
    # conversion), which another field manager would refuse as a conflict.
    rendered = subprocess.run([PYKUEUE, "manifests"], capture_output=True, text=True, check=True).stdout
    crds = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "CustomResourceDefinition"]
    path = tmp_path / "crds.yaml"
    path.write_text(yaml.safe_dump_all(crds))
    try:
        kwok_cluster.kubectl("apply", "--server-side", "-f", str(path))
        stored = kwok_cluster.get(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io"
        )
        assert stored["spec"]["conversion"]["strategy"] == "Webhook"
        # And back: `pykueue install --crds-only` over kubectl's apply.
    finally:
        install("--crds-only")
    stored = kwok_cluster.get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io"
    )
    assert stored["spec"]["conversion"]["strategy"] == "None"


def test_upstreams_user_roles_let_a_namespace_editor_see_its_workloads_and_queues(
    kwok_cluster: KubeCluster, kueue_crds: list[str], kube_namespace: str
) -> None:
    ns = kube_namespace
    for user, role in (("alice", "edit"), ("bob", "kueue-batch-user-role")):
        kwok_cluster.create(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": user},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            },
        )

    def can(user: str, verb: str, resource: str) -> bool:
        out = kwok_cluster.kubectl("auth", "can-i", verb, resource, "-n", ns, f"--as={user}", check=False)
        return out.strip() == "yes"

    # Aggregation into the built-in roles is the controller-manager's work: wait for it.
    wait(lambda: can("alice", "list", "workloads.kueue.x-k8s.io"), 30, "edit to include the workload viewer")
    assert can("alice", "get", "localqueues.kueue.x-k8s.io")
    # kueuectl's pending-workloads view (the visibility API's subresource).
    review = kwok_cluster.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "alice",
                "resourceAttributes": {
                    "group": "visibility.kueue.x-k8s.io",
                    "resource": "localqueues",
                    "subresource": "pendingworkloads",
                    "verb": "get",
                    "namespace": ns,
                },
            },
        },
    )
    assert review["status"].get("allowed") is True, review["status"]
    assert not can("alice", "create", "localqueues.kueue.x-k8s.io")  # queues are the batch admin's
    assert not can("alice", "list", "clusterqueues.kueue.x-k8s.io")  # cluster-wide: not for edit
    wait(lambda: can("bob", "create", "jobs.batch"), 30, "the batch user role aggregated")
    assert can("bob", "list", "workloads.kueue.x-k8s.io")
    assert not can("bob", "delete", "workloads.kueue.x-k8s.io")

    # The other job kinds' roles: a batch user submits them, a namespace editor reads them.
    # (Asked by SubjectAccessReview: their CRDs need not be installed for RBAC to answer.)
    def allowed(user: str, verb: str, group: str, resource: str) -> bool:
        attributes = {"group": group, "resource": resource, "verb": verb, "namespace": ns}
        answer = kwok_cluster.create(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": user, "resourceAttributes": attributes},
            },
        )
        return bool(answer["status"].get("allowed"))

    wait(
        lambda: allowed("bob", "create", "jobset.x-k8s.io", "jobsets"),
        30,
        "the JobSet editor role aggregated",
    )
    assert allowed("bob", "delete", "kubeflow.org", "pytorchjobs")
    wait(lambda: allowed("alice", "list", "ray.io", "rayjobs"), 30, "edit to include the RayJob viewer")
    assert not allowed("alice", "create", "ray.io", "rayjobs")
    assert not allowed("bob", "create", "batch", "cronjobs")


def test_a_local_queues_flavors_reservation_and_usage_list_every_flavor_and_resource(
    kueue: Kueue, controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    flavor = f"{ns}-flavor"
    kueue.apply(_flavor(flavor))
    kueue.apply(_cluster_queue(f"{ns}-cq", flavor, "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))

    def status_with(cpu: str) -> dict[str, Any] | None:
        status = kueue.local_queue(ns, "queue").get("status") or {}
        usage = status.get("flavorsUsage") or []
        cpus = [r["total"] for f in usage for r in f["resources"] if r["name"] == "cpu"]
        return status if cpus == [cpu] else None

    empty = wait(lambda: status_with("0"), 30, "the LocalQueue's status with zero usage")
    zero = [{"name": flavor, "resources": [{"name": "cpu", "total": "0"}, {"name": "memory", "total": "0"}]}]
    assert empty["flavorsReservation"] == zero and empty["flavorsUsage"] == zero
    kueue.apply(_workload(ns, "user", "queue"))
    used = wait(lambda: status_with("1"), 30, "the LocalQueue's usage with the admitted Workload")
    assert used["flavorsReservation"] == [
        {"name": flavor, "resources": [{"name": "cpu", "total": "1"}, {"name": "memory", "total": "0"}]}
    ]


def test_a_deactivated_workload_says_it_is_not_requeued(
    kueue: Kueue, controller: ControllerThread, fake_nodes: NodeFactory, kube_namespace: str
) -> None:
    fake_nodes(1)
    ns = kube_namespace
    kueue.apply(_flavor(f"{ns}-flavor"))
    kueue.apply(_cluster_queue(f"{ns}-cq", f"{ns}-flavor", "4"))
    kueue.apply(_local_queue(ns, "queue", f"{ns}-cq"))
    job = kueue.create_job(ns, job_manifest("switched-off", "queue", run_duration="120s"))
    admitted = wait(
        lambda: (wl := kueue.workload_of(job)) and is_true(wl, "Admitted") and wl, 30, "admission"
    )
    kueue.cluster.request(
        "PATCH",
        f"{KUEUE}/namespaces/{ns}/workloads/{admitted['metadata']['name']}",
        {"spec": {"active": False}},
        content_type=MERGE_PATCH,
    )

    def requeued_false() -> dict[str, Any] | None:
        cond = condition(kueue.workload_of(job), "Requeued")
        return cond if cond is not None and cond["status"] == "False" else None

    try:
        requeued = wait(requeued_false, 30, "Requeued=False on the deactivated Workload")
    except AssertionError:
        raise AssertionError(f"status: {(kueue.workload_of(job) or {}).get('status')}") from None
    assert requeued["reason"] == "Deactivated", requeued
    evicted = condition(kueue.workload_of(job), "Evicted")
    assert evicted is not None and evicted["reason"] == "Deactivated", evicted
    assert kueue.job(ns, "switched-off")["spec"]["suspend"] is True


def test_a_pending_workload_deactivated_is_evicted_and_not_requeued_then_reactivated(
    kueue: Kueue, controller: ControllerThread, kube_namespace: str
) -> None:
    ns = kube_namespace
    _queues(kueue, ns)
    job = kueue.create_job(ns, job_manifest("waiting", "empty"))
    pending = wait(
        lambda: (wl := kueue.workload_of(job)) and condition(wl, "QuotaReserved") and wl, 30, "pending"
    )
    path = f"{KUEUE}/namespaces/{ns}/workloads/{pending['metadata']['name']}"

    def activate(active: bool) -> None:
        kueue.cluster.request("PATCH", path, {"spec": {"active": active}}, content_type=MERGE_PATCH)

    def with_condition(kind: str, status: str, reason: str) -> dict[str, Any] | None:
        cond = condition(kueue.cluster.get(path), kind)
        return cond if cond is not None and (cond["status"], cond["reason"]) == (status, reason) else None

    activate(False)
    wait(lambda: with_condition("Requeued", "False", "Deactivated"), 30, "Requeued=False, Deactivated")
    assert with_condition("Evicted", "True", "Deactivated")
    assert with_condition("QuotaReserved", "False", "Deactivated")
    activate(True)
    wait(lambda: with_condition("Requeued", "True", "Reactivated"), 30, "Requeued=True, Reactivated")
