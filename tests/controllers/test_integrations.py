"""Each kind's adapter on upstream's own example for it: pod sets, holding, flavors in and out.

No cluster here (tests/kube/controller/ runs the same examples against the real
controllers): what the Workload is made of, how the kind is held, that admission puts the
flavor's node selector and tolerations on every pod template and stopping takes them off.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykueue.reconcilers import integrations
from pykueue.reconcilers.integrations import pod as pod_integration
from pykueue.reconcilers.jobframework import PodSetInfo

MIRROR = Path(os.environ.get("PYKUEUE_UPSTREAM_KUEUE", "/work/.mirror/kubernetes-sigs+kueue/repo"))


def example(path: str) -> list[dict[str, Any]]:
    name = f"site/static/examples/{path}"
    if (MIRROR / name).is_file():
        text = (MIRROR / name).read_text()
    else:
        proc = subprocess.run(
            ["git", "-C", str(MIRROR), "show", f"HEAD:{name}"], capture_output=True, text=True
        )
        if proc.returncode != 0:
            pytest.fail(f"upstream example {name} not readable from {MIRROR}; set PYKUEUE_UPSTREAM_KUEUE")
        text = proc.stdout
    return [d for d in yaml.safe_load_all(text) if d]


# example, kind, [(pod set, count)], where the templates are, how it is held
CASES = [
    ("jobs/sample-job.yaml", "Job", [("main", 3)]),
    ("jobs/sample-jobset.yaml", "JobSet", [("workers", 1), ("driver", 1)]),
    ("jobs/sample-pytorchjob.yaml", "PyTorchJob", [("master", 1), ("worker", 1)]),
    ("jobs/sample-tfjob.yaml", "TFJob", None),
    ("jobs/sample-mpijob.yaml", "MPIJob", [("launcher", 1), ("worker", 2)]),
    ("jobs/ray-cluster-sample.yaml", "RayCluster", [("head", 1), ("small-group", 1)]),
    ("jobs/ray-job-sample.yaml", "RayJob", [("head", 1), ("small-group", 1), ("submitter", 1)]),
    ("appwrapper/deployment-sample.yaml", "AppWrapper", [("sample-appwrapper-deployment-0", 3)]),
    ("pods-kueue/kueue-pod.yaml", "Pod", [("main", 1)]),
]

FLAVOR = PodSetInfo("", 0, {"pool": "a100"}, ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},))


def _templates(doc: dict[str, Any], adapter: Any) -> list[dict[str, Any]]:
    return [ps["template"] for ps in adapter.pod_sets(doc)]


@pytest.mark.parametrize(("path", "kind", "expected"), CASES, ids=[c[1] for c in CASES])
def test_upstream_example(path: str, kind: str, expected: list[tuple[str, int]] | None) -> None:
    [doc] = [d for d in example(path) if d["kind"] == kind][:1]
    integration = integrations.by_kind(doc["apiVersion"], doc["kind"])
    assert integration is not None and integration.adapter is not None
    adapter = integration.adapter()
    pod_sets = adapter.pod_sets(doc)
    if expected is not None:
        assert [(ps["name"], ps["count"]) for ps in pod_sets] == expected
    assert integrations.check_job(doc, integration) == []
    original = copy.deepcopy(doc)

    held = copy.deepcopy(doc)
    adapter.suspend(held)
    assert adapter.is_suspended(held)

    infos = [PodSetInfo(ps["name"], ps["count"], FLAVOR.node_selector, FLAVOR.tolerations) for ps in pod_sets]
    adapter.run_with_pod_sets(held, infos)
    if kind == "Pod":
        assert not adapter.is_suspended(held) and held["spec"]["nodeSelector"] == {"pool": "a100"}
        return
    assert not adapter.is_suspended(held)
    running = adapter.pod_sets(held)
    if kind == "AppWrapper":  # the flavors travel in podSetInfos, for the AppWrapper controller
        infos_written = [i for c in held["spec"]["components"] for i in c["podSetInfos"]]
        assert all(i["nodeSelector"] == {"pool": "a100"} for i in infos_written)
    else:
        for template in [ps["template"] for ps in running]:
            assert template["spec"]["nodeSelector"]["pool"] == "a100"
            assert {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"} in template["spec"][
                "tolerations"
            ]

    adapter.suspend(held)
    restore = [PodSetInfo.from_pod_set(ps) for ps in pod_sets]
    assert adapter.restore_pod_sets(held, restore)
    assert adapter.pod_sets(held) == adapter.pod_sets(original)
    assert not adapter.restore_pod_sets(held, restore)  # nothing left to restore


def test_child_kinds_are_not_queued_on_their_own() -> None:
    registry = integrations.registry(["batch/job", "jobset.x-k8s.io/jobset"])
    child = {
        "metadata": {
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "js",
                    "uid": "u",
                    "controller": True,
                }
            ]
        }
    }
    assert registry.managed_owner(child) is not None
    assert integrations.registry(["batch/job"]).managed_owner(child) is None


def test_statefulset_and_lws_templates_carry_the_queue_to_their_pods() -> None:
    [sts] = example("serving-workloads/sample-statefulset.yaml")
    integrations.by_name()["statefulset"].mutate(sts)  # type: ignore[misc]
    meta = sts["spec"]["template"]["metadata"]
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    assert meta["labels"]["kueue.x-k8s.io/pod-group-name"] == "statefulset-nginx-statefulset"
    assert meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
    [lws] = example("serving-workloads/sample-leaderworkerset.yaml")
    integrations.by_name()["leaderworkerset.x-k8s.io/leaderworkerset"].mutate(lws)  # type: ignore[misc]
    template = lws["spec"]["leaderWorkerTemplate"]
    for part in ("leaderTemplate", "workerTemplate"):
        assert template[part]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    from pykueue.reconcilers.integrations import leaderworkerset

    assert [(ps["name"], ps["count"]) for ps in leaderworkerset.pod_sets(lws)] == [
        ("leader", 1),
        ("worker", 2),
    ]


def test_appwrapper_without_pod_sets_is_read_as_its_webhook_would() -> None:
    [aw] = example("appwrapper/pytorch-sample.yaml")
    integration = integrations.by_kind(aw["apiVersion"], aw["kind"])
    assert integration is not None and integration.adapter is not None
    adapter = integration.adapter()
    pod_sets = adapter.pod_sets(aw)
    assert [(ps["name"], ps["count"]) for ps in pod_sets] == [
        ("sample-appwrapper-pytorch-job-0", 1),
        ("sample-appwrapper-pytorch-job-1", 1),
    ]
    assert [ps["template"]["spec"]["containers"][0]["name"] for ps in pod_sets] == ["pytorch", "pytorch"]
    infos = [PodSetInfo(ps["name"], 1, {"pool": "a"}) for ps in pod_sets]
    adapter.run_with_pod_sets(aw, infos)
    assert aw["spec"]["components"][0]["podSetInfos"] == [{"nodeSelector": {"pool": "a"}}] * 2


# What Kubeflow's SDK submits for upstream's site/static/examples/python/sample-trainjob.py
# (2 nodes, 1 CPU and 2Gi each), and a runtime shaped like the trainer's torch-distributed one.
TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {
        "name": "mnist",
        "namespace": "team-a",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
    },
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1", "memory": "2Gi"}}},
    },
}
RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                "template": {"spec": {"containers": [{"name": "node", "image": "pytorch"}]}}
                            },
                        },
                    }
                ]
            }
        },
    },
}


def test_trainjob_pod_sets_come_from_its_runtime_and_admission_goes_into_a_runtime_patch() -> None:
    import asyncio

    from pykueue.reconcilers.integrations import trainjob

    adapter = trainjob.TrainJobAdapter()
    job = copy.deepcopy(TRAINJOB)
    with pytest.raises(trainjob.MissingRuntime):
        adapter.pod_sets(job)
    integration = integrations.by_kind(job["apiVersion"], job["kind"])
    assert integration is not None and integrations.check_job(job, integration) == []  # validate passes it

    asked = []

    async def get(kind: str, namespace: str, name: str) -> dict[str, Any]:
        asked.append((kind, namespace, name))
        return RUNTIME

    asyncio.run(adapter.resolve(job, get))
    assert asked == [("ClusterTrainingRuntime", "", "torch-distributed")]
    [pod_set] = adapter.pod_sets(job)
    assert (pod_set["name"], pod_set["count"]) == ("node", 2)
    assert pod_set["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"}
    }
    # Without numNodes on the TrainJob, the runtime's mlPolicy decides.
    bare = copy.deepcopy(job)
    del bare["spec"]["trainer"]["numNodes"]
    assert adapter.pod_sets(bare)[0]["count"] == 1

    adapter.suspend(job)
    assert adapter.is_suspended(job)
    adapter.run_with_pod_sets(job, [PodSetInfo("node", 2, FLAVOR.node_selector, FLAVOR.tolerations)])
    assert not adapter.is_suspended(job)
    [patch] = job["spec"]["runtimePatches"]
    assert patch["manager"] == "kueue.x-k8s.io/manager"
    # Its time is set, so the trainer's defaulting webhook changes nothing (it would re-encode
    # spec.trainer's integer quantities as strings, which its immutability rule refuses).
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", patch["time"])
    [replicated] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert replicated["name"] == "node"
    assert replicated["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a100"}
    assert adapter.pod_sets(job) == adapter.pod_sets(
        TRAINJOB | {"spec": TRAINJOB["spec"]}
    )  # runtime untouched
    adapter.suspend(job)
    assert adapter.restore_pod_sets(job, [])
    assert "runtimePatches" not in job["spec"]  # removed, so the next admission adds it anew
    assert not adapter.restore_pod_sets(job, [])
    others = {"manager": "example.com/tuner"}
    job["spec"]["runtimePatches"] = [others]
    adapter.run_with_pod_sets(job, [PodSetInfo("node", 2, FLAVOR.node_selector, FLAVOR.tolerations)])
    assert [p["manager"] for p in job["spec"]["runtimePatches"]] == [
        "example.com/tuner",
        "kueue.x-k8s.io/manager",
    ]
    assert adapter.restore_pod_sets(job, [])
    assert job["spec"]["runtimePatches"] == [others]

    job["status"] = {"jobsStatus": [{"name": "node", "ready": 1, "active": 1}]}
    assert adapter.is_active(job) and adapter.pods_ready(job)
    job["status"]["conditions"] = [{"type": "Complete", "status": "True", "message": "done"}]
    finished = adapter.finished(job)
    assert finished is not None and finished.succeeded and finished.message == "done"


def test_pods_asking_the_same_spelled_differently_share_a_role() -> None:
    def one(cpu: object) -> dict[str, object]:
        return {
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}
        }

    assert (
        pod_integration.role_hash(one(1))
        == pod_integration.role_hash(one("1000m"))
        == pod_integration.role_hash(one("1"))
    )
    assert pod_integration.role_hash(one(2)) != pod_integration.role_hash(one(1))


def test_restoring_a_job_from_upstreams_workload_keeps_the_labels_of_its_selector() -> None:
    """Upstream's Workload of a Job leaves the template labels the API server made from the Job's
    uid out of its pod set (all but job-name); restoring from it must keep them on the Job, or
    the template no longer matches the selector and the API server refuses the update."""
    uid = "5e0c4c1e-0000-4000-8000-000000000001"
    generated = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "b",
        "controller-uid": uid,
        "job-name": "b",
    }
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "b", "namespace": "ns", "uid": uid},
        "spec": {
            "suspend": True,
            "parallelism": 1,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
            "template": {
                "metadata": {"labels": {**generated, "team": "a"}},
                "spec": {"nodeSelector": {"pool": "a100"}, "containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    integration = integrations.by_kind("batch/v1", "Job")
    assert integration is not None and integration.adapter is not None
    adapter = integration.adapter()
    # As upstream's pod set has it: the user's labels and job-name, no flavor's node selector.
    upstream_pod_set = {
        "name": "main",
        "count": 1,
        "template": {
            "metadata": {"labels": {"batch.kubernetes.io/job-name": "b", "team": "a"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    }
    assert adapter.restore_pod_sets(job, [PodSetInfo.from_pod_set(upstream_pod_set)])
    template = job["spec"]["template"]
    assert template["metadata"]["labels"] == {**generated, "team": "a"}
    assert "nodeSelector" not in template["spec"]
    assert not adapter.restore_pod_sets(job, [PodSetInfo.from_pod_set(upstream_pod_set)])
