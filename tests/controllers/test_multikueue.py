"""The MultiKueue check's planning: who gets a copy, who wins, which copies go, what a Secret may hold."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from pykueue.api import configuration
from pykueue.errors import ValidationError
from pykueue.multikueue import clusters as multikueue_clusters
from pykueue.multikueue import controller as multikueue
from pykueue.multikueue import dispatching
from pykueue.reconcilers import integrations
from pykueue.reconcilers.integrations import batch_job, jobset
from pykueue.store.base import Key
from pykueue.store.memory import MemoryStore


def _reserved(at: str) -> dict[str, object]:
    return {"status": {"conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": at}]}}


def test_the_earliest_reservation_wins_and_a_tie_goes_to_the_config_order() -> None:
    remote = {"b": _reserved("2026-01-01T00:00:05Z"), "a": _reserved("2026-01-01T00:00:09Z"), "c": None}
    assert dispatching.winner(remote, ["a", "b", "c"]) == "b"
    tie = {"b": _reserved("2026-01-01T00:00:05Z"), "a": _reserved("2026-01-01T00:00:05Z")}
    assert dispatching.winner(tie, ["b", "a"]) == "b"
    assert dispatching.winner({"a": {"status": {}}}, ["a"]) is None


def test_dispatchers_choose_different_workers() -> None:
    clusters = ["w5", "w1", "w4", "w2", "w3"]
    active = {"w1", "w2", "w3", "w4"}
    wl: dict[str, object] = {"status": {"nominatedClusterNames": ["w3", "w5"]}}
    assert dispatching.eligible("AllAtOnce", clusters, active, wl, timedelta(0)) == ["w1", "w4", "w2", "w3"]
    # Incremental: in the config's order, as upstream v0.19.2 (MultiKueueIncrementalDispatcherRespectConfigOrder).
    assert dispatching.eligible("Incremental", clusters, active, wl, timedelta(0)) == ["w1", "w4", "w2"]
    assert dispatching.eligible("Incremental", clusters, active, wl, timedelta(minutes=5)) == [
        "w1",
        "w4",
        "w2",
        "w3",
    ]
    # External: only what another controller nominated, and only if active.
    assert dispatching.eligible("External", clusters, active, wl, timedelta(0)) == ["w3"]


def _workload(check_state: str, cluster: str | None = None, **conditions: str) -> dict[str, object]:
    status: dict[str, object] = {
        "admission": {"clusterQueue": "cq"},
        "admissionChecks": [{"name": "mk", "state": check_state}],
        "conditions": [{"type": k, "status": v} for k, v in conditions.items()],
    }
    if cluster:
        status["clusterName"] = cluster
    return {"status": status}


def test_which_copies_are_kept() -> None:
    assert dispatching.copy_wanted(_workload("Pending"), "w1", "Pending")
    assert dispatching.copy_wanted(_workload("Ready", "w1"), "w1", "Ready")
    assert not dispatching.copy_wanted(_workload("Ready", "w1"), "w2", "Ready"), "a loser's copy"
    assert not dispatching.copy_wanted(None, "w1", None), "an orphan"
    assert not dispatching.copy_wanted(_workload("Ready", "w1", Finished="True"), "w1", "Ready")
    assert not dispatching.copy_wanted(_workload("Retry", "w1"), "w1", "Retry")
    assert not dispatching.copy_wanted({"status": {}}, "w1", "Pending"), "no quota reserved"


def test_the_check_is_active_while_one_cluster_is() -> None:
    check = {"spec": {"parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"}}}
    configs = {"mk": {"spec": {"clusters": ["w1", "w2"]}}}
    assert dispatching.check_active(check, configs, {"w1", "w2"})[0:2] == (True, "Active")
    assert dispatching.check_active(check, configs, {"w2"}) == (
        True,
        "SomeActiveClusters",
        "Inactive clusters: [w1]",
    )
    assert dispatching.check_active(check, configs, set())[0:2] == (False, "NoUsableClusters")
    assert dispatching.check_active(check, {}, {"w1"})[1] == "BadParametersRef"
    wrong = {
        "spec": {
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "x"}
        }
    }
    assert dispatching.check_active(wrong, configs, {"w1"})[1] == "BadParametersRef"


def test_a_config_naming_a_missing_cluster_says_which() -> None:
    check = {"spec": {"parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"}}}
    configs = {"mk": {"spec": {"clusters": ["w1", "w2", "w3"]}}}
    assert dispatching.check_active(check, configs, {"w2"}, known={"w1", "w2"}) == (
        True,
        "SomeActiveClusters",
        "Missing clusters: [w3], Inactive clusters: [w1]",
    )
    assert dispatching.check_active(check, configs, set(), known={"w1", "w2"}) == (
        False,
        "NoUsableClusters",
        "Missing clusters: [w3], Inactive clusters: [w1 w2]",
    )


def _worker_cluster(name: str, kubeconfig: Path) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Path", "location": str(kubeconfig)}}},
    }


def _kubeconfig_file(path: Path, server: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "wrong"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


async def _unauthorized(request: web.Request) -> web.Response:
    # What a worker's API server answers a token it does not know.
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized",
              "reason": "Unauthorized", "code": 401}  # fmt: skip
    return web.json_response(status, status=401)


def test_an_inactive_cluster_says_what_failed_with_which_worker_and_how(tmp_path: Path) -> None:
    closed = socket.socket()  # bound, never listening: connections to it are refused
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]

    async def scenario() -> dict[str, str]:
        app = web.Application()
        app.router.add_get("/version", _unauthorized)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        refusing = f"http://127.0.0.1:{runner.addresses[0][1]}"
        down = f"https://127.0.0.1:{port}"
        store = MemoryStore()
        await store.create(_worker_cluster("w-down", _kubeconfig_file(tmp_path / "down", down)))
        await store.create(_worker_cluster("w-auth", _kubeconfig_file(tmp_path / "auth", refusing)))
        connections = multikueue_clusters.ClusterConnections(
            store, "kueue-system", clock=lambda: datetime(2026, 1, 1, tzinfo=UTC)
        )
        try:
            await connections.refresh()
        finally:
            await connections.close()
            await runner.cleanup()
        found = {}
        for cluster in (await store.list("MultiKueueCluster"))[0]:
            [active] = cluster["status"]["conditions"]
            assert (active["status"], active["reason"]) == ("False", "ClientConnectionFailed")
            found[cluster["metadata"]["name"]] = active["message"]
        return found

    with closed:
        messages = asyncio.run(scenario())
    assert messages["w-down"] == (
        f"cannot reach worker w-down (https://127.0.0.1:{port}): "
        f"GET /version: cannot connect to 127.0.0.1:{port} (Connection refused)"
    )
    assert messages["w-auth"].startswith("worker w-auth (http://127.0.0.1:")
    assert messages["w-auth"].endswith(" refused GET /version: HTTP 401 Unauthorized")


def test_a_polled_check_names_the_config_cluster_that_does_not_exist(tmp_path: Path) -> None:
    closed = socket.socket()  # bound, never listening: the existing cluster is inactive
    closed.bind(("127.0.0.1", 0))
    down = f"https://127.0.0.1:{closed.getsockname()[1]}"
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "mk"},
        "spec": {
            "controllerName": multikueue.CONTROLLER_NAME,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"},
        },
    }
    config = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueConfig",
        "metadata": {"name": "mk"},
        "spec": {"clusters": ["w-down", "w-missing"]},
    }

    async def scenario() -> dict[str, object]:
        store = MemoryStore()
        stored = await store.create(check)
        await store.create(config)
        await store.create(_worker_cluster("w-down", _kubeconfig_file(tmp_path / "down", down)))
        controller = multikueue.MultiKueueController(
            store, integrations.registry(("batch/job",)), {Key.of(stored): stored}, lambda uid: None
        )
        try:
            await controller.poll()
        finally:
            await controller.clusters.close()
        [active] = (await store.get("AdmissionCheck", "", "mk"))["status"]["conditions"]
        return dict(active)

    with closed:
        active = asyncio.run(scenario())
    assert (active["status"], active["reason"]) == ("False", "NoUsableClusters")
    assert active["message"] == "Missing clusters: [w-missing], Inactive clusters: [w-down]"


def _secret(doc: object) -> dict[str, object]:
    data = base64.b64encode(json.dumps(doc).encode()).decode()
    return {"metadata": {"name": "w1", "namespace": "kueue-system"}, "data": {"kubeconfig": data}}


def _kubeconfig(user: dict[str, object]) -> dict[str, object]:
    return {
        "clusters": [{"name": "c", "cluster": {"server": "https://w1:6443/"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


def test_a_secret_kubeconfig_must_carry_its_credentials_inline() -> None:
    config = multikueue_clusters.kubeconfig_from_secret(_secret(_kubeconfig({"token": "t"})))
    assert (config.server, config.token) == ("https://w1:6443", "t")
    with pytest.raises(
        multikueue_clusters.BadConfig, match=r"users\[u\]\.user\.client-key: files are not allowed"
    ):
        multikueue_clusters.kubeconfig_from_secret(_secret(_kubeconfig({"client-key": "/etc/key"})))
    with pytest.raises(
        multikueue_clusters.BadConfig, match=r"Secret kueue-system/w1: data\.kubeconfig is missing"
    ):
        multikueue_clusters.kubeconfig_from_secret({"metadata": {"name": "w1", "namespace": "kueue-system"}})


def test_a_batch_job_copy_is_suspended_unmanaged_and_without_the_managers_identity() -> None:
    manager_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {"a": "b"},
        },
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "suspend": False,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u1", "app": "x"}}},
        },
        "status": {"active": 1},
    }
    adapter = batch_job.multikueue_adapter()
    assert adapter.managed(manager_job)
    remote = adapter.remote_copy(manager_job)
    assert remote["metadata"] == {"name": "j", "namespace": "ns", "labels": {"a": "b"}}
    assert remote["spec"]["suspend"] is True
    assert "managedBy" not in remote["spec"] and "selector" not in remote["spec"]
    assert remote["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert "status" not in remote
    assert manager_job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue", "the original is left alone"
    mirrored = adapter.mirror_status(manager_job, {"status": {"active": 0, "succeeded": 1}})
    assert mirrored is not None and mirrored["status"] == {"active": 0, "succeeded": 1}
    assert adapter.mirror_status(manager_job, {"status": {"active": 1}}) is None


def test_the_configuration_section_sets_the_dispatcher_and_the_timeout() -> None:
    section = configuration.MultiKueue(
        worker_lost_timeout="1h30m", dispatcher_name=dispatching.INCREMENTAL, origin="east"
    )
    settings = multikueue.settings_of(section, "ops")
    assert settings.worker_lost_timeout == timedelta(hours=1, minutes=30)
    assert (settings.dispatcher, settings.origin, settings.namespace) == ("Incremental", "east", "ops")
    assert multikueue.settings_of(configuration.MultiKueue()).dispatcher == "AllAtOnce"
    external = configuration.MultiKueue(dispatcher_name="example.com/mine")
    assert multikueue.settings_of(external).dispatcher == "External"
    with pytest.raises(ValidationError, match=r"multiKueue\.workerLostTimeout"):
        configuration.parse(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "multiKueue": {"workerLostTimeout": "soon"},
            }
        )


def test_a_jobset_copy_is_suspended_and_unmanaged() -> None:
    manager_set = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "s", "namespace": "ns", "uid": "u2", "generation": 3},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "suspend": False, "replicatedJobs": []},
        "status": {"restarts": 0},
    }
    adapter = jobset.multikueue_adapter()
    assert adapter.managed(manager_set)
    assert not adapter.managed({"spec": {"managedBy": "jobset.sigs.k8s.io/jobset-controller"}})
    remote = adapter.remote_copy(manager_set)
    assert remote == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {"suspend": True, "replicatedJobs": []},
    }
    assert adapter.mirror_status(manager_set, {"status": {"restarts": 1}}) is not None


def test_every_kind_with_a_multikueue_adapter_is_reachable_through_the_registry() -> None:
    registry = integrations.registry(
        ("batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "pod")
    )
    job_adapter, set_adapter = registry.multikueue("Job"), registry.multikueue("JobSet")
    assert job_adapter is not None and job_adapter.managed_by_field == "spec.managedBy"
    assert set_adapter is not None and set_adapter.managed_by_field == "spec.managedBy"
    pytorch = registry.multikueue("PyTorchJob")
    assert pytorch is not None and pytorch.managed_by_field == "spec.runPolicy.managedBy"
    # Pods, alone or in groups, are dispatched one copy per pod (a composable kind).
    pod = registry.multikueue("Pod")
    assert pod is not None and "Pod" in registry.multikueue_kinds() and "Pod" not in registry.kinds()
    # A kind not enabled in the configuration is not dispatched either.
    assert registry.multikueue("RayJob") is None
