"""The webhook decisions as pure functions of an AdmissionReview / ConversionReview."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from typing import Any

import pytest

from pykueue.api import manifests
from pykueue.kube import conversion_webhook, webhooks

CONFIG = webhooks.WebhookConfig()
QUEUE = "kueue.x-k8s.io/queue-name"


def _patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


def _job_review(labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "j", "namespace": "team-a", **extra}
    if labels is not None:
        metadata["labels"] = labels
    return {
        "uid": "u1",
        "operation": "CREATE",
        "namespace": "team-a",
        "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": {}}},
    }


def _lookup(*existing: tuple[str, str]) -> webhooks.LocalQueueLookup:
    async def exists(namespace: str, name: str) -> bool:
        return (namespace, name) in existing

    return exists


def _mutate(
    review: dict[str, Any], config: webhooks.WebhookConfig = CONFIG, queues: Any = None
) -> dict[str, Any]:
    return asyncio.run(webhooks.mutate_job(review, config, queues))


def test_queue_named_job_is_suspended() -> None:
    response = _mutate(_job_review({QUEUE: "q"}))
    assert response["allowed"] is True and response["uid"] == "u1"
    assert _patch(response) == [{"op": "add", "path": "/spec/suspend", "value": True}]


def test_job_without_queue_is_untouched_unless_managed_or_defaulted() -> None:
    assert _patch(_mutate(_job_review({"a": "b"}), queues=_lookup())) == []
    managed = webhooks.WebhookConfig(manage_jobs_without_queue_name=True)
    assert _patch(_mutate(_job_review(None), managed)) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ]


def test_default_local_queue_label_is_added_when_it_exists() -> None:
    queues = _lookup(("team-a", "default"))
    assert _patch(_mutate(_job_review({"a": "b"}), queues=queues)) == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"},
        {"op": "add", "path": "/spec/suspend", "value": True},
    ]
    assert _patch(_mutate(_job_review(None), queues=queues))[0] == {
        "op": "add",
        "path": "/metadata/labels",
        "value": {QUEUE: "default"},
    }
    off = webhooks.WebhookConfig(local_queue_defaulting=False)
    assert _patch(_mutate(_job_review(None), off, queues)) == []
    assert _patch(_mutate(_job_review(None), queues=_lookup(("team-b", "default")))) == []


def test_jobs_of_managed_owners_and_updates_are_left_alone() -> None:
    owned = _job_review(
        {QUEUE: "q"},
        ownerReferences=[
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": "js",
                "uid": "1",
                "controller": True,
            }
        ],
    )
    assert _patch(_mutate(owned)) == []
    update = {**_job_review({QUEUE: "q"}), "operation": "UPDATE"}
    assert _patch(_mutate(update)) == []
    already = _job_review({QUEUE: "q"})
    already["object"]["spec"]["suspend"] = True
    assert _patch(_mutate(already)) == []


def _kueue_objects(*docs: dict[str, Any]) -> webhooks.ObjectLookup:
    """What the controller's cache would answer, for the MultiKueue hand-over."""
    by_key = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}

    async def get(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return by_key.get((kind, namespace, name))

    return get


def _multikueue_queues(controller: str = "kueue.x-k8s.io/multikueue") -> webhooks.ObjectLookup:
    """team-a/lq -> ClusterQueue cq with checks [prov, mk]; team-a/plain -> ClusterQueue other without."""

    def obj(kind: str, name: str, spec: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        meta = {"name": name, **({"namespace": namespace} if namespace else {})}
        return {"kind": kind, "metadata": meta, "spec": spec}

    return _kueue_objects(
        obj("LocalQueue", "lq", {"clusterQueue": "cq"}, "team-a"),
        obj("LocalQueue", "plain", {"clusterQueue": "other"}, "team-a"),
        obj("LocalQueue", "default", {"clusterQueue": "cq"}, "team-a"),
        obj(
            "ClusterQueue",
            "cq",
            {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}, {"name": "mk"}]}},
        ),
        obj("ClusterQueue", "other", {}),
        obj("AdmissionCheck", "prov", {"controllerName": "kueue.x-k8s.io/provisioning-request"}),
        obj("AdmissionCheck", "mk", {"controllerName": controller}),
    )


def _mutate_with(review: dict[str, Any], objects: webhooks.ObjectLookup, queues: Any = None) -> list[Any]:
    return _patch(asyncio.run(webhooks.mutate_job(review, CONFIG, queues, objects)))


def test_a_job_queued_for_multikueue_is_handed_to_it_at_creation() -> None:
    objects = _multikueue_queues()
    assert _mutate_with(_job_review({QUEUE: "lq"}), objects) == [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {"op": "add", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"},
    ]
    # The Job controller's own name may be replaced, as upstream does.
    own = _job_review({QUEUE: "lq"})
    own["object"]["spec"]["managedBy"] = "kubernetes.io/job-controller"
    assert {"op": "replace", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"} in _mutate_with(
        own, objects
    )
    # Through the namespace's default LocalQueue too.
    defaulted = _mutate_with(_job_review({"a": "b"}), objects, queues=_lookup(("team-a", "default")))
    assert defaulted[-1] == {"op": "add", "path": "/spec/managedBy", "value": "kueue.x-k8s.io/multikueue"}


def test_other_jobs_keep_their_managed_by() -> None:
    objects = _multikueue_queues()
    managed_by = [
        op for op in _mutate_with(_job_review({QUEUE: "plain"}), objects) if "managedBy" in op["path"]
    ]
    assert managed_by == [], "a ClusterQueue without a MultiKueue check"
    assert _mutate_with(_job_review({QUEUE: "missing"}), objects) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ], "a LocalQueue not created yet"
    assert _mutate_with(_job_review({"a": "b"}), objects) == [], "no queue"
    third = _job_review({QUEUE: "lq"})
    third["object"]["spec"]["managedBy"] = "example.com/my-controller"
    assert _mutate_with(third, objects) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    not_ours = _multikueue_queues(controller="example.com/multikueue-lookalike")
    assert _mutate_with(_job_review({QUEUE: "lq"}), not_ours) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ]
    update = {**_job_review({QUEUE: "lq"}), "operation": "UPDATE"}
    assert _mutate_with(update, objects) == []


def test_kinds_hand_over_through_their_own_managed_by_field() -> None:
    objects = _multikueue_queues()
    review = {
        "uid": "u3",
        "operation": "CREATE",
        "namespace": "team-a",
        "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
        "object": {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": "team-a", "labels": {QUEUE: "lq"}},
            "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {}},
        },
    }
    enabled = webhooks.WebhookConfig(frameworks=("batch/job", "kubeflow.org/pytorchjob"))
    patch = _patch(asyncio.run(webhooks.mutate_job(review, enabled, None, objects)))
    assert {"op": "add", "path": "/spec/runPolicy/managedBy", "value": "kueue.x-k8s.io/multikueue"} in patch
    assert {"op": "add", "path": "/spec/runPolicy/suspend", "value": True} in patch
    # A kind MultiKueue cannot dispatch (a Pod) is only held.
    pod_review = {
        "uid": "u4",
        "operation": "CREATE",
        "namespace": "team-a",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team-a", "labels": {QUEUE: "lq"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    }
    pods = webhooks.WebhookConfig(frameworks=("pod",))
    pod_patch = _patch(asyncio.run(webhooks.mutate_job(pod_review, pods, None, objects)))
    assert pod_patch and not any("managedBy" in op["path"] for op in pod_patch)


def _cq_review(
    spec: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None
) -> dict[str, Any]:
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": spec,
    }
    review: dict[str, Any] = {
        "uid": "u2",
        "operation": operation,
        "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ClusterQueue"},
        "object": obj,
    }
    if old is not None:
        review["oldObject"] = {**obj, "spec": old}
    return review


def _group(cpu: dict[str, str], covered: str = "cpu", flavor: str = "f") -> dict[str, Any]:
    return {
        "coveredResources": [covered],
        "flavors": [{"name": flavor, "resources": [{"name": covered, **cpu}]}],
    }


def _job_update(old_queue: str, new_queue: str, suspend: bool) -> dict[str, Any]:
    def job(queue: str, suspended: bool) -> dict[str, Any]:
        labels = {QUEUE: queue} if queue else {}
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "team-a", "labels": labels},
            "spec": {"suspend": suspended, "template": {}},
        }

    return {
        "uid": "u2",
        "operation": "UPDATE",
        "namespace": "team-a",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "object": job(new_queue, suspend),
        "oldObject": job(old_queue, True),
    }


def _validate_job(review: dict[str, Any], queues: Any = None) -> dict[str, Any]:
    return asyncio.run(webhooks.validate_job(review, CONFIG, queues))


def test_a_running_jobs_queue_name_is_immutable_a_suspended_jobs_is_not() -> None:
    refused = _validate_job(_job_update("a", "b", suspend=False))
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        'Job.batch "j" is invalid: metadata.labels[kueue.x-k8s.io/queue-name]: field is immutable'
    )
    assert _validate_job(_job_update("a", "b", suspend=True))["allowed"] is True
    assert _validate_job(_job_update("a", "a", suspend=False))["allowed"] is True
    # Dropping the label is refused only where the default LocalQueue would put it back.
    assert _validate_job(_job_update("a", "", suspend=True), _lookup())["allowed"] is True
    emptied = _validate_job(_job_update("a", "", suspend=True), _lookup(("team-a", "default")))
    assert emptied["allowed"] is False and "default queue" in emptied["status"]["message"]


def test_validation_denies_with_the_field_path() -> None:
    review = _cq_review(
        {"cohortName": "c", "resourceGroups": [_group({"nominalQuota": "1", "lendingLimit": "2"})]}
    )
    response = webhooks.validate_kueue_object(review, CONFIG)
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422 and status["reason"] == "Invalid"
    path = "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"
    assert status["message"].startswith(f'ClusterQueue.kueue.x-k8s.io "cq" is invalid: {path}: ')
    assert status["details"]["causes"][0]["field"] == path


def test_validation_allows_valid_objects_deletions_and_checks_updates() -> None:
    good = _cq_review({"resourceGroups": [_group({"nominalQuota": "1"})]})
    assert webhooks.validate_kueue_object(good, CONFIG)["allowed"] is True
    deleting = _cq_review({"resourceGroups": [_group({"nominalQuota": "-1"})]})
    deleting["object"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert webhooks.validate_kueue_object(deleting, CONFIG)["allowed"] is True
    lq = {
        "uid": "u3",
        "operation": "UPDATE",
        "kind": {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "LocalQueue"},
        "object": {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "a"},
            "spec": {"clusterQueue": "new"},
        },
        "oldObject": {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "a"},
            "spec": {"clusterQueue": "old"},
        },
    }
    response = webhooks.validate_kueue_object(lq, CONFIG)
    assert response["allowed"] is False
    assert response["status"]["details"]["causes"][0]["field"] == "spec.clusterQueue"


def test_defaulting_adds_missing_defaults_without_rewriting_values() -> None:
    review = _cq_review(
        {
            "resourceGroups": [_group({"nominalQuota": 4})],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        }
    )
    before = copy.deepcopy(review)
    patch = _patch(webhooks.default_kueue_object(review, CONFIG))
    assert review == before
    ops = {op["path"]: op["value"] for op in patch}
    assert ops["/spec/queueingStrategy"] == "BestEffortFIFO"
    assert ops["/spec/preemption/reclaimWithinCohort"] == "Never"
    assert "/spec/preemption/withinClusterQueue" not in ops
    # 4 stays the number 4 (no rewrite to "4").
    assert not any(path.endswith("nominalQuota") for path in ops)
    assert all(op["op"] == "add" for op in patch)
    # Nothing to add once defaulted; bad input is left to validation.
    model = manifests.parse_object(review["object"])
    assert (
        _patch(webhooks.default_kueue_object({**review, "object": manifests.to_manifest(model)}, CONFIG))
        == []
    )
    assert _patch(webhooks.default_kueue_object(_cq_review({"queueingStrategy": "Fastest"}), CONFIG)) == []


# --- conversion -------------------------------------------------------------------------------

V2 = "kueue.x-k8s.io/v1beta2"
V1 = "kueue.x-k8s.io/v1beta1"

ROUND_TRIPS = [
    {
        "apiVersion": V2,
        "kind": "ClusterQueue",
        "metadata": {"name": "a", "labels": {"x": "y"}},
        "spec": {"cohortName": "team", "queueingStrategy": "StrictFIFO"},
        "status": {"pendingWorkloads": 3},
    },
    {
        "apiVersion": V2,
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "n"},
        "spec": {"clusterQueue": "a"},
        "status": {"flavorsUsage": [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]},
    },
    {
        "apiVersion": V2,
        "kind": "MultiKueueCluster",
        "metadata": {"name": "w"},
        "spec": {"clusterSource": {"kubeConfig": {"location": "s", "locationType": "Secret"}}},
    },
    {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "n"},
        "spec": {
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
        },
        "status": {
            "accumulatedPastExecutionTimeSeconds": 7,
            "admission": {
                "clusterQueue": "a",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "topologyAssignment": {
                            "levels": ["rack", "host"],
                            "slices": [
                                {
                                    "domainCount": 2,
                                    "podCounts": {"individual": [1, 3]},
                                    "valuesPerLevel": [
                                        {"universal": "r1"},
                                        {"individual": {"prefix": "node-", "roots": ["a", "b"]}},
                                    ],
                                }
                            ],
                        },
                    }
                ],
            },
        },
    },
]


@pytest.mark.parametrize("doc", ROUND_TRIPS, ids=[d["kind"] for d in ROUND_TRIPS])
def test_v1beta2_survives_a_trip_through_v1beta1(doc: dict[str, Any]) -> None:
    down = conversion_webhook.convert(doc, V1)
    assert down["apiVersion"] == V1 and down["metadata"] == doc["metadata"]
    up = conversion_webhook.convert(down, V2)
    assert up == doc


def test_down_conversion_uses_v1beta1_names() -> None:
    cq, _, mkc, wl = (conversion_webhook.convert(d, V1) for d in ROUND_TRIPS)
    assert cq["spec"] == {"cohort": "team", "queueingStrategy": "StrictFIFO"}
    assert mkc["spec"] == {"kubeConfig": {"location": "s", "locationType": "Secret"}}
    assert wl["spec"] == {
        "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
        "priorityClassName": "high",
    }
    assert wl["status"]["accumulatedPastExexcutionTimeSeconds"] == 7
    topology = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert topology == {
        "levels": ["rack", "host"],
        "domains": [{"values": ["r1", "node-a"], "count": 1}, {"values": ["r1", "node-b"], "count": 3}],
    }


def test_conversion_review_success_and_failure() -> None:
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": V2,
            "objects": [conversion_webhook.convert(ROUND_TRIPS[0], V1)],
        },
    }
    answer = conversion_webhook.review(body)
    assert answer["response"]["uid"] == "c1"
    assert answer["response"]["result"] == {"status": "Success"}
    assert answer["response"]["convertedObjects"] == [ROUND_TRIPS[0]]
    bad = copy.deepcopy(body)
    bad["request"]["objects"] = [
        {"apiVersion": V1, "kind": "ClusterQueue", "metadata": {"name": "x"}, "spec": {"cohortName": "c"}}
    ]
    failed = conversion_webhook.review(bad)["response"]
    assert failed["result"]["status"] == "Failure"
    assert "spec.cohortName" in failed["result"]["message"]
    assert "convertedObjects" not in failed
    other = copy.deepcopy(body)
    other["request"]["desiredAPIVersion"] = "kueue.x-k8s.io/v1alpha1"
    assert "cannot convert" in conversion_webhook.review(other)["response"]["result"]["message"]


def test_config_from_the_deployment_environment() -> None:
    config = webhooks.WebhookConfig.from_env(
        {"POD_NAMESPACE": "queues", "PYKUEUE_WEBHOOK_SECRET": "s", "PYKUEUE_WEBHOOK_SERVICE": "svc"},
        manage_jobs_without_queue_name=True,
    )
    assert (config.certs.namespace, config.certs.secret_name, config.certs.service_name) == (
        "queues",
        "s",
        "svc",
    )
    assert config.certs.service_hosts()[0] == "svc.queues.svc"
    assert config.manage_jobs_without_queue_name is True


# --- /validate-jobs ---------------------------------------------------------------------------

MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
PRIORITY = "kueue.x-k8s.io/priority-class"


def _job(labels: dict[str, str], suspend: bool, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "team-a", "labels": labels}
    if annotations:
        meta["annotations"] = {k.replace("_", "-"): v for k, v in annotations.items()}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"suspend": suspend, "parallelism": 3, "completions": 3, "template": {}},
    }


def _validate(
    new: dict[str, Any],
    old: dict[str, Any] | None = None,
    config: webhooks.WebhookConfig = CONFIG,
    queues: Any = None,
) -> dict[str, Any]:
    review: dict[str, Any] = {
        "uid": "v1",
        "operation": "UPDATE" if old else "CREATE",
        "namespace": "team-a",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "object": new,
    }
    if old:
        review["oldObject"] = old
    return asyncio.run(webhooks.validate_job(review, config, queues))


def _fields(response: dict[str, Any]) -> list[str]:
    assert response["allowed"] is False
    assert response["status"]["message"].startswith('Job.batch "j" is invalid: ')
    return [cause["field"] for cause in response["status"]["details"]["causes"]]


def test_a_new_job_needs_a_valid_queue_name_and_a_positive_time_limit() -> None:
    assert _validate(_job({QUEUE: "user-queue", MAX_EXEC: "60"}, True))["allowed"] is True
    assert _fields(_validate(_job({QUEUE: "User_Queue"}, True))) == [f"metadata.labels[{QUEUE}]"]
    assert _fields(_validate(_job({QUEUE: "q", MAX_EXEC: "0"}, True))) == [f"metadata.labels[{MAX_EXEC}]"]
    assert _fields(_validate(_job({QUEUE: "q", MAX_EXEC: "soon"}, True))) == [f"metadata.labels[{MAX_EXEC}]"]


def test_a_running_job_keeps_its_queue_time_limit_and_priority_class() -> None:
    running = _job({QUEUE: "a", MAX_EXEC: "60"}, False)
    assert _fields(_validate(_job({QUEUE: "b", MAX_EXEC: "60"}, False), running)) == [
        f"metadata.labels[{QUEUE}]"
    ]
    assert _fields(_validate(_job({QUEUE: "a", MAX_EXEC: "90"}, False), running)) == [
        f"metadata.labels[{MAX_EXEC}]"
    ]
    assert _fields(_validate(_job({QUEUE: "a", MAX_EXEC: "60", PRIORITY: "high"}, False), running)) == [
        f"metadata.labels[{PRIORITY}]"
    ]
    # Held, all of them may change; the controller's own resume (held -> running) passes.
    held = _job({QUEUE: "a", MAX_EXEC: "60"}, True)
    assert _validate(_job({QUEUE: "b", MAX_EXEC: "90", PRIORITY: "high"}, True), held)["allowed"] is True
    assert _validate(_job({QUEUE: "a", MAX_EXEC: "60"}, False), held)["allowed"] is True
    # A priority class is never removed.
    with_class = _job({QUEUE: "a", PRIORITY: "high"}, True)
    assert _fields(_validate(_job({QUEUE: "a"}, True), with_class)) == [f"metadata.labels[{PRIORITY}]"]


def test_the_queue_name_stays_in_a_namespace_with_a_default_local_queue() -> None:
    held = _job({QUEUE: "a"}, True)
    assert _validate(_job({}, True), held, queues=_lookup())["allowed"] is True
    refused = _validate(_job({}, True), held, queues=_lookup(("team-a", "default")))
    assert _fields(refused) == [f"metadata.labels[{QUEUE}]"]


def test_partial_admission_and_synced_completions_annotations() -> None:
    ok = _job({QUEUE: "q"}, True, **{"kueue.x-k8s.io/job-min-parallelism": "2"})
    assert _validate(ok)["allowed"] is True
    too_many = _job({QUEUE: "q"}, True, **{"kueue.x-k8s.io/job-min-parallelism": "3"})
    assert _fields(_validate(too_many)) == ["metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"]
    synced = _job({QUEUE: "q"}, True, **{"kueue.x-k8s.io/job-completions-equal-parallelism": "true"})
    assert _fields(_validate(synced)) == [
        "metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism]"
    ]
    synced["spec"]["completionMode"] = "Indexed"
    assert _validate(synced)["allowed"] is True
    synced["spec"]["completions"] = 4
    assert _fields(_validate(synced)) == ["spec.completions"]


def test_kinds_not_enabled_are_not_validated() -> None:
    bad = _job({QUEUE: "Not A Name"}, True)
    bad["apiVersion"], bad["kind"] = "jobset.x-k8s.io/v1alpha2", "JobSet"
    review = {"uid": "v", "operation": "CREATE", "object": bad}
    assert asyncio.run(webhooks.validate_job(review, CONFIG, None))["allowed"] is True
    enabled = webhooks.WebhookConfig(frameworks=("batch/job", "jobset.x-k8s.io/jobset"))
    response = asyncio.run(webhooks.validate_job(review, enabled, None))
    assert response["allowed"] is False
    assert response["status"]["message"].startswith('JobSet.jobset.x-k8s.io "j" is invalid')


def test_the_webhook_refuses_a_bad_flavor_price_naming_the_annotation() -> None:
    def review(price: str) -> dict[str, Any]:
        flavor = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100", "annotations": {"pykueue.io/price": price}},
            "spec": {},
        }
        kind = {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ResourceFlavor"}
        return {"uid": "u3", "operation": "CREATE", "kind": kind, "object": flavor}

    assert (
        webhooks.validate_kueue_object(review("nvidia.com/gpu=2.50,memory=0.005"), CONFIG)["allowed"] is True
    )
    refused = webhooks.validate_kueue_object(review("nvidia.com/gpu=two"), CONFIG)
    assert refused["allowed"] is False
    assert refused["status"]["details"]["causes"][0]["field"] == "metadata.annotations[pykueue.io/price]"
    assert "'nvidia.com/gpu=two' is not RESOURCE=PRICE" in refused["status"]["message"]


PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def test_a_prebuilt_workload_name_is_a_workload_name_fixed_while_the_job_runs() -> None:
    assert _validate(_job({QUEUE: "q", PREBUILT: "made-before"}, True))["allowed"] is True
    assert _fields(_validate(_job({QUEUE: "q", PREBUILT: "Made_Before"}, True))) == [
        f"metadata.labels[{PREBUILT}]"
    ]
    assert _fields(_validate(_job({QUEUE: "q"}, True, **{PREBUILT: "Not/A/Name"}))) == [
        f"metadata.annotations[{PREBUILT}]"
    ]
    running = _job({QUEUE: "q", PREBUILT: "a"}, False)
    assert _fields(_validate(_job({QUEUE: "q", PREBUILT: "b"}, False), running)) == [
        f"metadata.labels[{PREBUILT}]"
    ]
    assert _fields(_validate(_job({QUEUE: "q"}, False), running)) == [f"metadata.labels[{PREBUILT}]"]
    held = _job({QUEUE: "q", PREBUILT: "a"}, True)
    assert _validate(_job({QUEUE: "q", PREBUILT: "b"}, True), held)["allowed"] is True


def test_kinds_upstream_takes_no_prebuilt_workload_for_are_refused() -> None:
    frameworks = webhooks.WebhookConfig(frameworks=("batch/job", "kubeflow.org/jaxjob", "pod"))
    jax = _job({QUEUE: "q", PREBUILT: "w"}, True)
    jax["apiVersion"], jax["kind"] = "kubeflow.org/v1", "JAXJob"
    jax["spec"] = {"jaxReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": []}}}}}
    refused = asyncio.run(
        webhooks.validate_job({"uid": "v", "operation": "CREATE", "object": jax}, frameworks, None)
    )
    assert refused["allowed"] is False
    (cause,) = refused["status"]["details"]["causes"]
    assert cause["field"] == f"metadata.labels[{PREBUILT}]"
    assert 'Is not supported for "kubeflow.org/v1, Kind=JAXJob"' in cause["message"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "labels": {QUEUE: "q", PREBUILT: "w"}},
        "spec": {"containers": [{"name": "c"}]},
    }
    refused = asyncio.run(
        webhooks.validate_job({"uid": "v", "operation": "CREATE", "object": pod}, frameworks, None)
    )
    assert refused["allowed"] is False
    assert "takes no pre-built Workload" in refused["status"]["details"]["causes"][0]["message"]


REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_LEVEL = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"


def _tas_job(**annotations: str) -> dict[str, Any]:
    job = _job({QUEUE: "q"}, True)
    job["spec"]["template"] = {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    return job


def _causes(response: dict[str, Any]) -> list[tuple[str, str]]:
    assert response["allowed"] is False
    return [(c["field"], c["message"]) for c in response["status"]["details"]["causes"]]


def test_topology_annotations_that_cannot_be_meant_are_refused_as_upstream() -> None:
    """Upstream's jobframework ValidateTASPodSetRequest (issue 40, item 8)."""
    at = "spec.template.metadata.annotations"
    fine = _tas_job(**{REQUIRED_TOPOLOGY: "cloud.example.com/rack", SLICE_LEVEL: "kubernetes.io/hostname"})
    fine["spec"]["template"]["metadata"]["annotations"][SLICE_SIZE] = "2"
    assert _validate(fine)["allowed"] is True
    both = _tas_job(
        **{REQUIRED_TOPOLOGY: "cloud.example.com/rack", PREFERRED_TOPOLOGY: "cloud.example.com/block"}
    )
    assert _causes(_validate(both)) == [
        (
            at,
            'Invalid value: must not contain more than one topology annotation: ["kueue.x-k8s.io/podset-'
            'required-topology", "kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-'
            'unconstrained-topology"]',
        )
    ]
    size_only = _tas_job(**{REQUIRED_TOPOLOGY: "cloud.example.com/rack", SLICE_SIZE: "2"})
    assert _causes(_validate(size_only)) == [
        (
            f"{at}[{SLICE_SIZE}]",
            f"Forbidden: may not be set when '{SLICE_LEVEL}' is not specified",
        )
    ]
    level_only = _tas_job(**{SLICE_LEVEL: "kubernetes.io/hostname"})
    assert _causes(_validate(level_only)) == [
        (f"{at}[{SLICE_SIZE}]", f"Required value: must be set when '{SLICE_LEVEL}' is specified")
    ]
    bad_level = _tas_job(**{PREFERRED_TOPOLOGY: "not a label!"})
    [(field, message)] = _causes(_validate(bad_level))
    assert field == f"{at}[{PREFERRED_TOPOLOGY}]"
    assert message.startswith('Invalid value: "not a label!": name part must consist of alphanumeric')
    bad_size = _tas_job(**{SLICE_LEVEL: "kubernetes.io/hostname", SLICE_SIZE: "0"})
    assert _causes(_validate(bad_size)) == [
        (f"{at}[{SLICE_SIZE}]", 'Invalid value: "0": must be greater than or equal to 1')
    ]


def test_topology_annotations_of_every_pod_template_are_checked_with_their_paths() -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "j", "namespace": "team-a", "labels": {QUEUE: "q"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "ok",
                    "replicas": 1,
                    "template": {"spec": {"template": {"spec": {"containers": []}}}},
                },
                {
                    "name": "bad",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "metadata": {"annotations": {SLICE_SIZE: "2"}},
                                "spec": {"containers": [{"name": "c"}]},
                            }
                        }
                    },
                },
            ],
        },
    }
    enabled = webhooks.WebhookConfig(frameworks=("batch/job", "jobset.x-k8s.io/jobset"))
    review = {"uid": "v", "operation": "CREATE", "object": jobset}
    response = asyncio.run(webhooks.validate_job(review, enabled, None))
    assert _causes(response) == [
        (
            f"spec.replicatedJobs[1].template.spec.template.metadata.annotations[{SLICE_SIZE}]",
            f"Forbidden: may not be set when '{SLICE_LEVEL}' is not specified",
        )
    ]


def test_a_pods_own_topology_annotations_are_checked_at_its_metadata() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team-a",
            "labels": {QUEUE: "q"},
            "annotations": {
                REQUIRED_TOPOLOGY: "rack",
                "kueue.x-k8s.io/podset-unconstrained-topology": "true",
            },
        },
        "spec": {"containers": [{"name": "c"}]},
    }
    frameworks = webhooks.WebhookConfig(frameworks=("batch/job", "pod"))
    review = {"uid": "v", "operation": "CREATE", "object": pod}
    causes = _causes(asyncio.run(webhooks.validate_job(review, frameworks, None)))
    assert [field for field, _ in causes] == ["metadata.annotations"]
