"""The ProvisioningRequest admission check's pure planning: names, requests, check states."""

from __future__ import annotations

from typing import Any

import pytest

from pykueue.reconcilers import provisioning as prov
from pykueue.reconcilers.integrations.batch_job import BatchJobAdapter
from pykueue.reconcilers.job_reconciler import _with_check_updates
from pykueue.reconcilers.jobframework import PodSetInfo, PodSetMergeError, workload_for

CHECK = "prov"
CLASS = "check-capacity.autoscaling.x-k8s.io"


def _pod_set(
    name: str, count: int = 1, cpu: str = "1", gpu: str | None = None, **spec: Any
) -> dict[str, Any]:
    requests = {"cpu": cpu}
    if gpu:
        requests["example.com/gpu"] = gpu
    return {
        "name": name,
        "count": count,
        "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
        },
    }


def _workload(*pod_sets: dict[str, Any], admitted: bool = False, **status: Any) -> dict[str, Any]:
    conditions = [{"type": "QuotaReserved", "status": "True"}]
    if admitted:
        conditions.append({"type": "Admitted", "status": "True"})
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "uid": "wl-uid"},
        "spec": {"podSets": list(pod_sets)},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": ps["name"], "flavors": {"cpu": "on-demand"}, "count": ps["count"]}
                    for ps in pod_sets
                ],
            },
            "conditions": conditions,
            **status,
        },
    }


def _config(**spec: Any) -> dict[str, Any]:
    return {
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "cfg"},
        "spec": {"provisioningClassName": CLASS, **spec},
    }


def _request(
    attempt: int, *conditions: tuple[str, str], message: str = "why", **status: Any
) -> dict[str, Any]:
    name = prov.request_name("wl", CHECK, attempt)
    return {
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "provisioningClassName": CLASS,
            "podSets": [{"podTemplateRef": {"name": prov.template_name(name, "main")}, "count": 1}],
        },
        "status": {
            "conditions": [{"type": t, "status": s, "message": message} for t, s in conditions],
            **status,
        },
    }


def _entry(state: str = "Pending", **extra: Any) -> dict[str, Any]:
    return {"name": CHECK, "state": state, "message": "", **extra}


# ------------------------------------------------------------------------ names


def test_names_follow_upstream() -> None:
    assert prov.request_name("wl", "check", 3) == "wl-check-3"
    assert prov.template_name("wl-check-3", "main") == "ppt-wl-check-3-main"
    assert prov.attempt_of("wl-check-12", "wl", "check") == 12
    assert prov.attempt_of("wl-other-1", "wl", "check") is None
    assert prov.attempt_of("wl-check-1x", "wl", "check") is None


def test_long_names_are_cut_with_a_hash() -> None:
    long = "w" * 300
    name = prov.request_name(long, "check", 1)
    assert len(name) == 253
    assert name != prov.request_name(long, "check", 2)
    assert name.startswith("w" * 247 + "-")


# ---------------------------------------------------------------------- backoff


@pytest.mark.parametrize(
    ("retries", "seconds"), [(0, 60), (1, 120), (2, 240), (4, 960), (5, 1800), (30, 1800)]
)
def test_backoff_doubles_from_the_base_up_to_the_max(retries: int, seconds: int) -> None:
    assert prov.backoff_seconds(retries, prov.Retry()) == seconds


def test_retry_strategy_defaults() -> None:
    assert prov.retry_strategy(_config()) == prov.Retry(3, 60, 1800)
    assert prov.retry_strategy(_config(retryStrategy={"backoffLimitCount": 0})) == prov.Retry(0, 60, 1800)


# ---------------------------------------------------------------- what is asked


def test_only_pod_sets_using_a_managed_resource_need_a_request() -> None:
    wl = _workload(_pod_set("driver"), _pod_set("workers", 4, gpu="1"))
    assert prov.request_needed(wl, _config())
    assert prov.request_needed(wl, _config(managedResources=["example.com/gpu"]))
    assert not prov.request_needed(
        _workload(_pod_set("driver")), _config(managedResources=["example.com/gpu"])
    )
    merged = prov.merged_pod_sets(wl, _config(managedResources=["example.com/gpu"]))
    assert [(m.name, m.count) for m in merged] == [("workers", 4)]


def test_a_pod_set_without_an_assignment_is_an_error() -> None:
    wl = _workload(_pod_set("main"))
    wl["status"]["admission"]["podSetAssignments"] = []
    with pytest.raises(prov.InconsistentAssignments):
        prov.request_needed(wl, _config())


def test_merge_policies() -> None:
    a = _pod_set("a", 2)
    b = _pod_set("b", 3)
    b["template"]["metadata"] = {"labels": {"role": "b"}}  # differs in labels only
    c = _pod_set("c", 1, cpu="2")
    wl = _workload(a, b, c)
    assert [(m.name, m.count) for m in prov.merged_pod_sets(wl, _config())] == [("a", 2), ("b", 3), ("c", 1)]
    identical = prov.merged_pod_sets(wl, _config(podSetMergePolicy="IdenticalPodTemplates"))
    assert [(m.name, m.count) for m in identical] == [("a", 2), ("b", 3), ("c", 1)]
    similar = prov.merged_pod_sets(wl, _config(podSetMergePolicy="IdenticalWorkloadSchedulingRequirements"))
    assert [(m.name, m.count) for m in similar] == [("a", 5), ("c", 1)]


def test_the_request_and_its_templates() -> None:
    pod_set = _pod_set("main", 2)
    pod_set["template"]["spec"]["containers"][0]["resources"]["limits"] = {"memory": "1Gi"}
    wl = _workload(pod_set)
    wl["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "30", "other": "x"}
    flavors = {
        "on-demand": {
            "spec": {"nodeLabels": {"pool": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}]}
        }
    }
    request, templates = prov.provisioning_request(
        wl, CHECK, 2, _config(parameters={"ValidUntilSeconds": "60", "Other": "1"}), flavors
    )
    assert request["metadata"]["name"] == "wl-prov-2"
    assert request["metadata"]["ownerReferences"][0]["uid"] == "wl-uid"
    assert request["spec"] == {
        "provisioningClassName": CLASS,
        "parameters": {"ValidUntilSeconds": "30", "Other": "1"},
        "podSets": [{"podTemplateRef": {"name": "ppt-wl-prov-2-main"}, "count": 2}],
    }
    [template] = templates
    spec = template["template"]["spec"]
    assert spec["nodeSelector"] == {"pool": "a"}
    assert spec["tolerations"] == [{"key": "k", "operator": "Exists"}]
    # Limits stand in for missing requests, so the autoscaler sizes the nodes right.
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    # The workload's own template is untouched.
    assert "nodeSelector" not in pod_set["template"]["spec"]


def test_requests_of_a_changed_config_are_not_followed() -> None:
    wl = _workload(_pod_set("main"))
    old = _request(1)
    newer = _request(2)
    newer["spec"]["provisioningClassName"] = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert prov.current_requests(wl, {CHECK: _config()}, [old, newer]) == {CHECK: old}
    assert prov.current_requests(wl, {CHECK: _config(parameters={"a": "b"})}, [old]) == {}
    assert prov.current_requests(wl, {CHECK: None}, [old]) == {}


# ---------------------------------------------------------------- check states


def test_a_check_without_a_config_is_pending_and_says_so() -> None:
    new = prov.check_state(_entry("Ready"), _workload(_pod_set("main")), None, None)
    assert (new["state"], new["message"]) == ("Pending", prov.CHECK_INACTIVE_MESSAGE)


def test_no_request_needed_is_ready_at_once() -> None:
    config = _config(managedResources=["example.com/gpu"])
    new = prov.check_state(_entry(), _workload(_pod_set("main")), config, None)
    assert (new["state"], new["message"]) == ("Ready", prov.NO_REQUEST_NEEDED)


def test_provisioned_is_ready_with_the_consume_annotations() -> None:
    config = _config(
        podSetUpdates={"nodeSelector": [{"key": "pool", "valueFromProvisioningClassDetail": "Pool"}]}
    )
    request = _request(1, ("Provisioned", "True"), message="ready", provisioningClassDetails={"Pool": "p-7"})
    entry = _entry()
    new = prov.check_state(entry, _workload(_pod_set("main")), config, request)
    assert new["state"] == "Ready"
    assert new["message"] == "ready"
    assert new["podSetUpdates"] == [
        {
            "name": "main",
            "annotations": {prov.CONSUME_ANNOTATION: "wl-prov-1", prov.CLASS_ANNOTATION: CLASS},
            "nodeSelector": {"pool": "p-7"},
        }
    ]
    assert entry["state"] == "Pending", "the input entry is left alone"


def test_accepted_shows_the_autoscalers_progress() -> None:
    request = _request(1, ("Accepted", "True"), ("Provisioned", "False"), message="ETA 3m")
    new = prov.check_state(_entry(), _workload(_pod_set("main")), _config(), request)
    assert (new["state"], new["message"]) == ("Pending", "ETA 3m")
    quiet = prov.check_state(_entry(message="old error"), _workload(_pod_set("main")), _config(), _request(1))
    assert (quiet["state"], quiet["message"]) == ("Pending", "")


def test_failed_is_retried_with_backoff_then_rejected() -> None:
    config = _config(retryStrategy={"backoffLimitCount": 2, "backoffBaseSeconds": 10})
    wl = _workload(_pod_set("main"))
    first = prov.check_state(_entry(), wl, config, _request(1, ("Failed", "True"), message="no stock"))
    assert first["state"] == "Retry"
    assert first["message"] == "Retrying after failure: no stock"
    assert first["requeueAfterSeconds"] == 10
    # After the eviction (retryCount 1) the same failed attempt does not retry again.
    again = prov.check_state(_entry(retryCount=1), wl, config, _request(1, ("Failed", "True")))
    assert again["state"] == "Pending"
    second = prov.check_state(_entry(retryCount=1), wl, config, _request(2, ("Failed", "True")))
    assert (second["state"], second["requeueAfterSeconds"]) == ("Retry", 20)
    last = prov.check_state(_entry(retryCount=2), wl, config, _request(3, ("Failed", "True"), message="gone"))
    assert (last["state"], last["message"]) == ("Rejected", "gone")


def test_booking_expired_matters_only_before_admission() -> None:
    request = _request(1, ("Provisioned", "True"), ("BookingExpired", "True"), message="expired")
    before = prov.check_state(_entry("Ready"), _workload(_pod_set("main")), _config(), request)
    assert before["state"] == "Retry"
    assert before["message"] == "Retrying after booking expired: expired"
    after = prov.check_state(_entry("Ready"), _workload(_pod_set("main"), admitted=True), _config(), request)
    assert after["state"] == "Ready"


def test_capacity_revoked_rejects_an_active_workload() -> None:
    request = _request(1, ("Provisioned", "True"), ("CapacityRevoked", "True"), message="revoked")
    wl = _workload(_pod_set("main"), admitted=True)
    new = prov.check_state(_entry("Ready"), wl, _config(), request)
    assert (new["state"], new["message"]) == ("Rejected", "revoked")
    wl["spec"]["active"] = False
    assert prov.check_state(_entry("Ready"), wl, _config(), request)["state"] == "Ready"


def test_which_attempts_to_create() -> None:
    wl = _workload(_pod_set("main"))
    configs: dict[str, dict[str, Any] | None] = {CHECK: _config()}
    assert prov.requests_to_create(wl, {CHECK: _entry()}, configs, {}) == [(CHECK, 1)]
    # The old attempts were cleaned up on eviction: the retry count names the next.
    assert prov.requests_to_create(wl, {CHECK: _entry(retryCount=2)}, configs, {}) == [(CHECK, 3)]
    failed = {CHECK: _request(1, ("Failed", "True"))}
    assert prov.requests_to_create(wl, {CHECK: _entry(retryCount=1)}, configs, failed) == [(CHECK, 2)]
    assert prov.requests_to_create(wl, {CHECK: _entry("Retry")}, configs, failed) == []
    assert prov.requests_to_create(wl, {CHECK: _entry("Ready")}, configs, {}) == []
    waiting = {CHECK: _request(1, ("Accepted", "True"))}
    assert prov.requests_to_create(wl, {CHECK: _entry()}, configs, waiting) == []
    assert prov.requests_to_create(wl, {CHECK: _entry()}, {CHECK: None}, {}) == []


def test_the_transition_time_moves_with_the_state_only() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    entries = [_entry(lastTransitionTime="2020-01-01T00:00:00Z"), {"name": "other", "state": "Ready"}]
    moved = prov.apply_entry(entries, _entry("Ready", lastTransitionTime="2020-01-01T00:00:00Z"), now)
    assert moved[0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    assert moved[1] == entries[1]
    kept = prov.apply_entry(entries, _entry(message="x", lastTransitionTime="2020-01-01T00:00:00Z"), now)
    assert kept[0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"


# --------------------------------------------------------------- the check itself


def test_active_condition() -> None:
    check = {
        "spec": {
            "controllerName": prov.CONTROLLER_NAME,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "cfg"},
        }
    }
    assert prov.active_condition(check, {"cfg": _config()}, 1)["status"] == "True"
    missing = prov.active_condition(check, {}, 1)
    assert (missing["status"], missing["reason"]) == ("False", "BadParametersRef")
    check["spec"]["parameters"]["kind"] = "MultiKueueConfig"
    assert "wrong kind" in prov.active_condition(check, {"cfg": _config()}, 1)["message"]
    del check["spec"]["parameters"]
    assert prov.active_condition(check, {}, 1)["message"] == "missing parameters reference"


# ------------------------------------------------------------- the job's side


def test_the_checks_pod_set_updates_reach_the_job() -> None:
    workload = {
        "status": {
            "admissionChecks": [
                {
                    "name": CHECK,
                    "state": "Ready",
                    "podSetUpdates": [
                        {"name": "main", "annotations": {prov.CONSUME_ANNOTATION: "wl-prov-1"}},
                        {"name": "other", "labels": {"x": "y"}},
                    ],
                }
            ]
        }
    }
    info = _with_check_updates(PodSetInfo("main", 1, {"pool": "a"}), workload)
    assert info.annotations == {prov.CONSUME_ANNOTATION: "wl-prov-1"}
    assert info.node_selector == {"pool": "a"}
    assert info.labels == {}
    with pytest.raises(PodSetMergeError):
        PodSetInfo("main", 1, {"pool": "a"}).with_update({"nodeSelector": {"pool": "b"}}, CHECK)


def test_a_jobs_provreq_annotations_travel_on_its_workload() -> None:
    job = {
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "u",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
            "annotations": {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60", "unrelated": "x"},
        },
        "spec": {"template": {"spec": {"containers": []}}},
    }
    workload = workload_for(BatchJobAdapter(), job)
    assert workload["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60"}
