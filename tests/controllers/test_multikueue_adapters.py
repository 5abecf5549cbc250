"""Each job kind's MultiKueue adapter: what its copy for a worker keeps and drops, when a job is
MultiKueue's, what status comes back, and when the webhook may hand a new job over."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.integrations import appwrapper, pod, trainjob

MK = jobframework.MULTIKUEUE_MANAGED_BY
POD = {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}


@dataclass(frozen=True)
class Kind:
    framework: str
    manifest: dict[str, Any]  # spec and status of a job the manager's API server holds
    managed_by: tuple[str, ...]
    suspend: tuple[str, ...]
    own_controller: str


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = (obj or {}).get(part)
    return obj


def _put(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = value


def _replicas(*types: str) -> dict[str, Any]:
    return {t: {"replicas": 2, "restartPolicy": "OnFailure", "template": copy.deepcopy(POD)} for t in types}


KINDS = [
    Kind(
        "kubeflow.org/pytorchjob",
        {
            "spec": {
                "runPolicy": {"managedBy": MK, "suspend": False, "cleanPodPolicy": "None"},
                "pytorchReplicaSpecs": _replicas("Master", "Worker"),
            },
            "status": {"conditions": [{"type": "Running", "status": "True"}], "replicaStatuses": {}},
        },
        ("spec", "runPolicy", "managedBy"),
        ("spec", "runPolicy", "suspend"),
        "kubeflow.org/training-operator",
    ),
    Kind(
        "kubeflow.org/tfjob",
        {"spec": {"runPolicy": {"managedBy": MK}, "tfReplicaSpecs": _replicas("PS", "Worker")}},
        ("spec", "runPolicy", "managedBy"),
        ("spec", "runPolicy", "suspend"),
        "kubeflow.org/training-operator",
    ),
    Kind(
        "kubeflow.org/paddlejob",
        {"spec": {"runPolicy": {"managedBy": MK}, "paddleReplicaSpecs": _replicas("Master", "Worker")}},
        ("spec", "runPolicy", "managedBy"),
        ("spec", "runPolicy", "suspend"),
        "kubeflow.org/training-operator",
    ),
    Kind(
        "kubeflow.org/xgboostjob",
        {"spec": {"runPolicy": {"managedBy": MK}, "xgbReplicaSpecs": _replicas("Master", "Worker")}},
        ("spec", "runPolicy", "managedBy"),
        ("spec", "runPolicy", "suspend"),
        "kubeflow.org/training-operator",
    ),
    Kind(
        "kubeflow.org/jaxjob",
        {"spec": {"runPolicy": {"managedBy": MK}, "jaxReplicaSpecs": _replicas("Worker")}},
        ("spec", "runPolicy", "managedBy"),
        ("spec", "runPolicy", "suspend"),
        "kubeflow.org/training-operator",
    ),
    Kind(
        "kubeflow.org/mpijob",
        {
            "spec": {
                "slotsPerWorker": 1,
                "runPolicy": {"managedBy": MK, "suspend": False},
                "mpiReplicaSpecs": _replicas("Launcher", "Worker"),
            },
            "status": {"conditions": [{"type": "Created", "status": "True"}]},
        },
        ("spec", "runPolicy", "managedBy"),
        ("spec", "runPolicy", "suspend"),
        "kubeflow.org/mpi-operator",
    ),
    Kind(
        "ray.io/rayjob",
        {
            "spec": {
                "managedBy": MK,
                "entrypoint": "python run.py",
                "shutdownAfterJobFinishes": True,
                "rayClusterSpec": {"headGroupSpec": {"template": copy.deepcopy(POD)}},
            },
            "status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"},
        },
        ("spec", "managedBy"),
        ("spec", "suspend"),
        "ray.io/kuberay-operator",
    ),
    Kind(
        "ray.io/raycluster",
        {
            "spec": {
                "managedBy": MK,
                "suspend": False,
                "headGroupSpec": {"template": copy.deepcopy(POD)},
                "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "template": copy.deepcopy(POD)}],
            },
            "status": {"state": "ready"},
        },
        ("spec", "managedBy"),
        ("spec", "suspend"),
        "ray.io/kuberay-operator",
    ),
    Kind(
        "trainer.kubeflow.org/trainjob",
        {
            "spec": {
                "managedBy": MK,
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": 2},
                "runtimePatches": [
                    {"manager": "example.com/tuner", "trainingRuntimeSpec": {"mlPolicy": {"numNodes": 2}}},
                ],
            },
            "status": {"jobsStatus": [{"name": "node", "active": 2}]},
        },
        ("spec", "managedBy"),
        ("spec", "suspend"),
        "trainer.kubeflow.org/trainjob-controller",
    ),
    Kind(
        "workload.codeflare.dev/appwrapper",
        {
            "spec": {
                "managedBy": MK,
                "components": [
                    {
                        "template": {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(POD)},
                        "podSets": [{"path": "template", "replicas": 1}],
                    }
                ],
            },
            "status": {"phase": "Running"},
        },
        ("spec", "managedBy"),
        ("spec", "suspend"),
        "workload.codeflare.dev/appwrapper-controller",
    ),
    Kind(
        "batch/job",
        {
            "spec": {"managedBy": MK, "parallelism": 2, "template": copy.deepcopy(POD)},
            "status": {"active": 2},
        },
        ("spec", "managedBy"),
        ("spec", "suspend"),
        "kubernetes.io/job-controller",
    ),
    Kind(
        "jobset.x-k8s.io/jobset",
        {"spec": {"managedBy": MK, "replicatedJobs": []}, "status": {"restarts": 0}},
        ("spec", "managedBy"),
        ("spec", "suspend"),
        "jobset.sigs.k8s.io/jobset-controller",
    ),
]


def _integration(kind: Kind) -> jobframework.Integration:
    return integrations.by_name()[kind.framework]


def _manager_job(kind: Kind) -> dict[str, Any]:
    """The job as the manager's API server returns it: identity and bookkeeping filled in."""
    integration = _integration(kind)
    return {
        "apiVersion": integration.api_version,
        "kind": integration.kind,
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "0f2c-uid",
            "resourceVersion": "812",
            "generation": 3,
            "creationTimestamp": "2026-12-01T19:00:00Z",
            "managedFields": [{"manager": "kubectl"}],
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "cm-uid"}],
            "labels": {jobframework.QUEUE_NAME_LABEL: "lq", "team": "a"},
            "annotations": {"note": "kept"},
        },
        **copy.deepcopy(kind.manifest),
    }


def _ids(kind: Kind) -> str:
    return kind.framework


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_every_kind_upstream_dispatches_has_an_adapter_registered_by_its_integration(kind: Kind) -> None:
    integration = _integration(kind)
    registry = integrations.registry((kind.framework,))
    adapter = registry.multikueue(integration.kind)
    assert adapter is not None
    assert adapter.managed_by_field == ".".join(kind.managed_by)


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_a_job_is_multikueues_only_when_its_managed_by_field_says_so(kind: Kind) -> None:
    factory = _integration(kind).multikueue
    assert factory is not None
    adapter = factory()
    job = _manager_job(kind)
    assert adapter.managed(job)
    for other in (None, kind.own_controller, "example.com/other"):
        _put(job, kind.managed_by, other)
        assert not adapter.managed(job), other


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_the_copy_is_the_users_spec_suspended_without_the_managers_identity_or_status(kind: Kind) -> None:
    factory = _integration(kind).multikueue
    assert factory is not None
    job = _manager_job(kind)
    original = copy.deepcopy(job)
    remote = factory().remote_copy(job)

    assert job == original, "the manager's job is left as it was"
    assert remote["metadata"] == {
        "name": "train",
        "namespace": "team-a",
        "labels": {jobframework.QUEUE_NAME_LABEL: "lq", "team": "a"},
        "annotations": {"note": "kept"},
    }
    assert "status" not in remote
    assert (remote["apiVersion"], remote["kind"]) == (job["apiVersion"], job["kind"])
    # The worker's own controller runs it once the worker's Kueue admits it.
    assert _at(remote, kind.managed_by) is None
    assert _at(remote, kind.suspend) is True
    # The rest of the spec travels unchanged (what some kinds strip besides is tested below).
    expected = {"spec": copy.deepcopy(original["spec"])}
    _put(expected, kind.suspend, True)
    _at(expected, kind.managed_by[:-1]).pop(kind.managed_by[-1])
    assert remote["spec"] == expected["spec"]


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_the_workers_status_is_mirrored_whole_and_only_when_it_differs(kind: Kind) -> None:
    factory = _integration(kind).multikueue
    assert factory is not None
    adapter = factory()
    job = _manager_job(kind)
    remote = {**adapter.remote_copy(job), "status": {"conditions": [{"type": "Done", "status": "True"}]}}
    mirrored = adapter.mirror_status(job, remote)
    assert mirrored is not None
    assert mirrored["status"] == remote["status"]
    assert mirrored["metadata"] == job["metadata"] and mirrored["spec"] == job["spec"]
    assert adapter.mirror_status(mirrored, remote) is None


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_the_webhook_may_hand_over_a_job_of_nobody_or_of_its_own_controller_only(kind: Kind) -> None:
    factory = _integration(kind).multikueue
    assert factory is not None
    adapter = factory()
    for before, handed in (
        (None, True),
        (kind.own_controller, True),
        ("example.com/other", False),
        (MK, False),
    ):
        job = _manager_job(kind)
        _put(job, kind.managed_by, before)
        if before is None:
            _at(job, kind.managed_by[:-1]).pop(kind.managed_by[-1])
        assert adapter.default_managed_by(job) is handed, before
        assert _at(job, kind.managed_by) == (MK if handed else before)


def test_a_kubeflow_job_without_a_run_policy_gets_one() -> None:
    adapter = integrations.by_name()["kubeflow.org/pytorchjob"].multikueue
    assert adapter is not None
    job: dict[str, Any] = {"spec": {"runPolicy": None, "pytorchReplicaSpecs": {}}}
    assert adapter().default_managed_by(job)
    assert job["spec"]["runPolicy"] == {"managedBy": MK}
    assert adapter().remote_copy({"spec": {}})["spec"] == {"runPolicy": {"suspend": True}}


def test_a_trainjob_copy_drops_kueues_runtime_patch_and_keeps_the_others() -> None:
    kind = next(k for k in KINDS if k.framework == "trainer.kubeflow.org/trainjob")
    job = _manager_job(kind)
    kueue_patch = {
        "manager": trainjob.KUEUE_PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}]}}},
    }
    job["spec"]["runtimePatches"].append(kueue_patch)
    remote = trainjob.multikueue_adapter().remote_copy(job)
    assert [p["manager"] for p in remote["spec"]["runtimePatches"]] == ["example.com/tuner"]
    only_kueue = copy.deepcopy(job)
    only_kueue["spec"]["runtimePatches"] = [kueue_patch]
    assert "runtimePatches" not in trainjob.multikueue_adapter().remote_copy(only_kueue)["spec"]


def test_an_appwrapper_copy_drops_the_managers_pod_set_infos_and_keeps_its_pod_sets() -> None:
    kind = next(k for k in KINDS if k.framework == "workload.codeflare.dev/appwrapper")
    job = _manager_job(kind)
    job["spec"]["components"][0]["podSetInfos"] = [{"nodeSelector": {"pool": "manager-only"}}]
    remote = appwrapper.multikueue_adapter().remote_copy(job)
    [component] = remote["spec"]["components"]
    assert "podSetInfos" not in component
    assert component["podSets"] == [{"path": "template", "replicas": 1}]
    assert job["spec"]["components"][0]["podSetInfos"], "the manager's AppWrapper keeps its own"


def test_kinds_run_through_their_pods_are_dispatched_as_pods_but_a_leaderworkerset() -> None:
    # A Deployment's pods are plain pods (their Workloads are the pods'); a StatefulSet's form
    # a group its Workload is owned by, copied pod by pod; a LeaderWorkerSet's Workloads get
    # the check Rejected ("MultiKueue cannot dispatch the kind LeaderWorkerSet").
    by_name = integrations.by_name()
    assert by_name["deployment"].multikueue is None
    assert by_name["leaderworkerset.x-k8s.io/leaderworkerset"].multikueue is None
    assert by_name["statefulset"].multikueue is by_name["pod"].multikueue is pod.multikueue_adapter


def _manager_pod() -> dict[str, Any]:
    """A gated pod of a group as the manager's API server holds it (token volume, status)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "g-0",
            "namespace": "team-a",
            "uid": "manager-uid",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "x"}],
            "labels": {
                jobframework.QUEUE_NAME_LABEL: "lq",
                pod.MANAGED_LABEL: "true",
                pod.GROUP_NAME_LABEL: "g",
            },
            "annotations": {pod.GROUP_TOTAL_COUNT_ANNOTATION: "2", pod.ROLE_HASH_ANNOTATION: "abc"},
        },
        "spec": {
            "schedulingGates": [{"name": pod.SCHEDULING_GATE}],
            "serviceAccountName": "default",
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "kube-api-access-x7k2p", "projected": {"sources": []}},
            ],
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/data"},
                        {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets"},
                    ],
                }
            ],
            "initContainers": [
                {
                    "name": "init",
                    "image": "i",
                    "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/s"}],
                }
            ],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
        },
    }


def test_any_pod_queued_for_multikueue_is_dispatched_and_the_webhook_writes_nothing() -> None:
    adapter = integrations.registry(("pod",)).multikueue("Pod")
    assert adapter is not None
    manager_pod = _manager_pod()
    assert adapter.managed(manager_pod)
    before = copy.deepcopy(manager_pod)
    assert adapter.default_managed_by(manager_pod) is False
    assert manager_pod == before


def test_a_pod_copy_keeps_the_gate_and_kueues_labels_and_drops_identity_status_and_token() -> None:
    adapter = pod.multikueue_adapter()
    manager_pod = _manager_pod()
    original = copy.deepcopy(manager_pod)
    remote = adapter.remote_copy(manager_pod)

    assert manager_pod == original, "the manager's pod is left as it was"
    assert remote["metadata"] == {
        "name": "g-0",
        "namespace": "team-a",
        "labels": original["metadata"]["labels"],
        "annotations": original["metadata"]["annotations"],
    }
    assert "status" not in remote
    spec = remote["spec"]
    # Held there until the worker's Kueue admits it (with the rest of its group).
    assert spec["schedulingGates"] == [{"name": pod.SCHEDULING_GATE}]
    # The worker's API server mounts its own service-account token; the user's volumes stay.
    assert spec["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert "volumeMounts" not in spec["initContainers"][0]
    assert spec["serviceAccountName"] == "default"


def test_a_pod_copy_is_held_and_marked_kueues_even_when_its_original_was_not() -> None:
    ungated = _manager_pod()
    ungated["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
    ungated["spec"]["nodeName"] = "manager-node"
    ungated["metadata"]["labels"].pop(pod.MANAGED_LABEL)
    remote = pod.multikueue_adapter().remote_copy(ungated)
    assert remote["spec"]["schedulingGates"] == [{"name": "example.com/other"}, {"name": pod.SCHEDULING_GATE}]
    assert "nodeName" not in remote["spec"]
    assert remote["metadata"]["labels"][pod.MANAGED_LABEL] == "true"


def _worker_status(phase: str, scheduled: str, reason: str = "") -> dict[str, Any]:
    condition = {"type": "PodScheduled", "status": scheduled, **({"reason": reason} if reason else {})}
    return {
        "phase": phase,
        "conditions": [{"type": "Initialized", "status": "True"}, condition],
        "containerStatuses": [{"name": "c", "ready": phase == "Running", "restartCount": 0}],
        "podIP": "10.0.0.7",
    }


def test_a_pod_copys_status_comes_back_but_not_its_unschedulable_condition() -> None:
    adapter = pod.multikueue_adapter()
    manager_pod = _manager_pod()
    gated = manager_pod["status"]["conditions"][0]

    waiting = {"status": _worker_status("Pending", "False", "Unschedulable")}
    mirrored = adapter.mirror_status(manager_pod, waiting)
    assert mirrored is not None
    # The manager's cluster autoscaler must not see an unschedulable pod it should make room for.
    assert [c for c in mirrored["status"]["conditions"] if c["type"] == "PodScheduled"] == [gated]
    assert mirrored["status"]["containerStatuses"] == waiting["status"]["containerStatuses"]
    assert mirrored["spec"] == manager_pod["spec"] and mirrored["metadata"] == manager_pod["metadata"]
    assert adapter.mirror_status(mirrored, waiting) is None, "nothing to write when they agree"

    running = {"status": _worker_status("Running", "True")}
    mirrored = adapter.mirror_status(mirrored, running)
    assert mirrored is not None
    assert mirrored["status"] == running["status"], "scheduled there: the whole status, phase Running"

    done = {"status": {**_worker_status("Succeeded", "True"), "phase": "Succeeded"}}
    finished = adapter.mirror_status(mirrored, done)
    assert finished is not None and pod.finished(finished) == jobframework.Finished(True, "Pod succeeded")


def test_a_pods_own_status_is_never_cleared_when_its_copy_loses() -> None:
    # Unlike a job's, a pod's status is its API server's too (phase, the gate's condition).
    assert pod.multikueue_adapter().status_forgotten(_manager_pod()) is None
    kind = next(k for k in KINDS if k.framework == "batch/job")
    job = _manager_job(kind)
    job["status"] = {"active": 1}
    factory = _integration(kind).multikueue
    assert factory is not None
    cleared = factory().status_forgotten(job)
    assert cleared is not None and cleared["status"] == {} and job["status"] == {"active": 1}
    assert factory().status_forgotten(cleared) is None
