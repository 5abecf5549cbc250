"""The job framework's contract, kind by kind neutral: which jobs are managed and the Workload made of them.

Run against the in-memory store (the same reconciler runs on the API server in tests/kube).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pykueue.api import configuration
from pykueue.api.meta import LabelSelector, LabelSelectorRequirement
from pykueue.cli import controller_command
from pykueue.errors import FieldProblem, ValidationError
from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.job_reconciler import JobReconciler
from pykueue.store.base import WatchEvent
from pykueue.store.memory import MemoryStore


def job(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "team-a",
    owner: dict[str, Any] | None = None,
    suspend: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": suspend,
            "parallelism": 2,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        },
    }


async def reconcile(
    store: MemoryStore, reconciler: JobReconciler, *objs: dict[str, Any]
) -> list[dict[str, Any]]:
    for obj in objs:
        await store.create(obj)
    await reconciler.sync()
    await reconciler.reconcile()
    workloads, _ = await store.list("Workload")
    return workloads


def run(
    settings: jobframework.Settings,
    *objs: dict[str, Any],
    namespaces: dict[str, dict[str, str]] | None = None,
    frameworks: tuple[str, ...] = integrations.DEFAULT_FRAMEWORKS,
) -> list[dict[str, Any]]:
    store = MemoryStore()
    reconciler = JobReconciler(
        store,
        integrations.registry(frameworks),
        flavors=dict,
        settings=settings,
        namespace_labels=lambda ns: (namespaces or {}).get(ns),
    )
    return asyncio.run(reconcile(store, reconciler, *objs))


QUEUED = {jobframework.QUEUE_NAME_LABEL: "main"}


def test_queue_name_from_the_label_or_the_old_annotation() -> None:
    workloads = run(
        jobframework.Settings(),
        job("labelled", labels=QUEUED),
        job("annotated", annotations={jobframework.QUEUE_NAME_ANNOTATION: "legacy"}),
        job("plain"),
    )
    queues = sorted(w["spec"].get("queueName") for w in workloads)
    assert queues == ["legacy", "main"]


def test_manage_jobs_without_queue_name_holds_every_job() -> None:
    store = MemoryStore()
    reconciler = JobReconciler(
        store,
        integrations.registry(),
        dict,
        settings=jobframework.Settings(manage_jobs_without_queue_name=True),
    )

    async def two_passes() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        await store.create(job("plain", suspend=False))
        await reconciler.sync()
        await reconciler.reconcile()  # suspended first
        held = await store.get("Job", "team-a", "plain")
        reconciler.handle(WatchEvent("MODIFIED", held, str(held["metadata"]["resourceVersion"])))
        await reconciler.reconcile()  # then queued
        return held, (await store.list("Workload"))[0]

    held, workloads = asyncio.run(two_passes())
    assert held["spec"]["suspend"] is True
    assert len(workloads) == 1
    assert "queueName" not in workloads[0]["spec"]  # waits until the job names a queue


def test_requests_reencoded_by_the_jobs_controller_keep_its_workload() -> None:
    # The trainer's webhook writes a TrainJob's `cpu: 1` back as "1": the same request, so the
    # waiting job keeps its Workload (and its place in the queue) instead of being queued anew.
    store = MemoryStore()
    reconciler = JobReconciler(store, integrations.registry(), dict)
    integer = job("j", labels=QUEUED)
    integer["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {
        "cpu": 1,
        "memory": 1073741824,
    }

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        [first] = await reconcile(store, reconciler, integer)
        stored = await store.get("Job", "team-a", "j")
        stored["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {
            "cpu": "1000m",
            "memory": "1Gi",
        }
        updated = await store.update(stored)
        reconciler.handle(WatchEvent("MODIFIED", updated, str(updated["metadata"]["resourceVersion"])))
        await reconciler.reconcile()
        return [first], (await store.list("Workload"))[0]

    before, after = asyncio.run(scenario())
    assert [w["metadata"]["uid"] for w in after] == [w["metadata"]["uid"] for w in before]


class RefusingStore(MemoryStore):
    """Refuses to unsuspend a Job, as an API server answers 422 to an update its rules forbid
    (a TrainJob's CEL `spec.trainer: self == oldSelf`; the trainer is not in this unit test)."""

    async def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Job" and obj["spec"].get("suspend") is False:
            raise ValidationError(
                [FieldProblem("spec.trainer", 'Invalid value: "object": field is immutable')]
            )
        return await super().update(obj)


def test_a_job_refusing_its_admission_update_finishes_its_workload_and_says_why() -> None:
    store = RefusingStore()
    said: list[tuple[str, str, str, str]] = []
    reconciler = JobReconciler(store, integrations.registry(), dict)
    reconciler.on_event = lambda obj, kind, reason, message: said.append((obj["kind"], kind, reason, message))

    async def scenario() -> dict[str, Any]:
        [workload] = await reconcile(store, reconciler, job("j", labels=QUEUED))
        workload["status"] = {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {}}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True"},
            ],
        }
        admitted = await store.update_status(workload)
        reconciler.handle(WatchEvent("MODIFIED", admitted, str(admitted["metadata"]["resourceVersion"])))
        await reconciler.reconcile()
        return await store.get("Workload", "team-a", workload["metadata"]["name"])

    finished = asyncio.run(scenario())
    [condition] = [c for c in finished["status"]["conditions"] if c["type"] == "Finished"]
    assert (condition["status"], condition["reason"]) == ("True", "FailedToStart")
    assert condition["message"] == (
        'Job team-a/j refused its admission update: spec.trainer: Invalid value: "object": field is immutable'
    )
    warnings = [(kind, reason) for kind, level, reason, _ in said if level == "Warning"]
    assert warnings == [("Job", "FailedToStart"), ("Workload", "FailedToStart")]


def test_namespace_selector_leaves_other_namespaces_alone() -> None:
    selector = LabelSelector(match_labels={"kueue": "on"})
    workloads = run(
        jobframework.Settings(namespace_selector=selector),
        job("in", labels=QUEUED, namespace="opted-in"),
        job("out", labels=QUEUED, namespace="opted-out"),
        namespaces={"opted-in": {"kueue": "on"}, "opted-out": {}},
    )
    assert [w["metadata"]["namespace"] for w in workloads] == ["opted-in"]


def test_default_selector_skips_kube_system_and_the_controllers_namespace() -> None:
    selector = configuration.default().namespace_selector()
    assert not selector.matches({"kubernetes.io/metadata.name": "kube-system"})
    assert not selector.matches({"kubernetes.io/metadata.name": "kueue-system"})
    assert selector.matches({"kubernetes.io/metadata.name": "team-a"})


def test_max_exec_time_priority_class_and_copied_labels_reach_the_workload() -> None:
    labels = {
        **QUEUED,
        jobframework.MAX_EXEC_TIME_LABEL: "600",
        jobframework.PRIORITY_CLASS_LABEL: "high",
        "team": "vision",
        "other": "not-copied",
    }
    [workload] = run(jobframework.Settings(label_keys_to_copy=("team",)), job("j", labels=labels))
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 600
    assert workload["spec"]["priorityClassRef"]["name"] == "high"
    assert workload["metadata"]["labels"]["team"] == "vision"
    assert "other" not in workload["metadata"]["labels"]


def test_a_job_owned_by_a_managed_kind_gets_no_workload_of_its_own() -> None:
    parent = {"apiVersion": "batch/v1", "kind": "Job", "name": "parent", "uid": "p-uid", "controller": True}
    workloads = run(jobframework.Settings(), job("child", labels=QUEUED, owner=parent))
    assert workloads == []


def test_unknown_framework_is_refused_by_name() -> None:
    with pytest.raises(jobframework.UnknownFramework, match=r"'acme\.io/widget'"):
        integrations.registry(["batch/job", "acme.io/widget"])


def test_configuration_file_read_with_field_paths(tmp_path: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "manageJobsWithoutQueueName: true\n"
        "integrations:\n  frameworks: [batch/job]\n  labelKeysToCopy: [team]\n"
        "webhook: {port: 9443}\n"
    )
    cfg = configuration.load(path)
    jobs = controller_command.jobs_of(cfg)
    assert jobs.settings.manage_jobs_without_queue_name
    assert jobs.settings.label_keys_to_copy == ("team",)
    assert jobs.registry.kinds() == ["Job"]
    assert cfg.ignored_sections() == ["webhook"]
    path.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nintegrations: {frameworks: 3}\n"
    )
    with pytest.raises(ValidationError) as err:
        configuration.load(path)
    assert err.value.problems[0].path == "integrations.frameworks"


def test_selector_expressions_from_the_configuration() -> None:
    selector = LabelSelector(
        match_expressions=[LabelSelectorRequirement(key="tier", operator="In", values=["ml"])]
    )
    assert jobframework.Settings(namespace_selector=selector).namespace_managed({"tier": "ml"})
    assert not jobframework.Settings(namespace_selector=selector).namespace_managed({"tier": "web"})
    assert jobframework.Settings(namespace_selector=selector).namespace_managed(None)


def test_workloads_carry_the_topology_request_of_their_pod_templates() -> None:
    """Upstream's jobs build spec.podSets[].topologyRequest from the template annotations
    (jobframework's request builder), with how the kind numbers its pods (issue 40, item 9)."""
    from pykueue.reconcilers.integrations import batch_job, jobset

    plain = job("plain", labels={"kueue.x-k8s.io/queue-name": "q"})
    plain["metadata"]["uid"] = "u1"
    made = jobframework.workload_for(batch_job.BatchJobAdapter(), plain)
    assert "topologyRequest" not in made["spec"]["podSets"][0]

    tas = job("tas", labels={"kueue.x-k8s.io/queue-name": "q"})
    tas["metadata"]["uid"] = "u2"
    tas["spec"]["template"]["metadata"] = {
        "annotations": {
            "kueue.x-k8s.io/podset-preferred-topology": "cloud.example.com/rack",
            "kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname",
            "kueue.x-k8s.io/podset-slice-size": "2",
        }
    }
    made = jobframework.workload_for(batch_job.BatchJobAdapter(), tas)
    assert made["spec"]["podSets"][0]["topologyRequest"] == {
        "preferred": "cloud.example.com/rack",
        "podSetSliceRequiredTopology": "kubernetes.io/hostname",
        "podSetSliceSize": 2,
        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
    }
    assert integrations.check_job(tas, integrations.by_name()["batch/job"]) == []
    # Standalone's apply refuses what the webhook refuses.
    del tas["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-slice-required-topology"]
    [problem] = integrations.check_job(tas, integrations.by_name()["batch/job"])
    assert problem.path == "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]"
    tas["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-slice-required-topology"] = "h"

    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "js",
            "namespace": "team-a",
            "uid": "u3",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 3,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {
                                "metadata": {
                                    "annotations": {
                                        "kueue.x-k8s.io/podset-required-topology": "cloud.example.com/block"
                                    }
                                },
                                "spec": {"containers": [{"name": "c"}]},
                            },
                        }
                    },
                }
            ],
        },
    }
    made = jobframework.workload_for(jobset.JobSetAdapter(), js)
    assert made["spec"]["podSets"][0]["topologyRequest"] == {
        "required": "cloud.example.com/block",
        "podIndexLabel": "batch.kubernetes.io/job-completion-index",
        "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index",
        "subGroupCount": 3,
    }
