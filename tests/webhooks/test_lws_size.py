"""Feature gate LWSImmutableGroupSize (on by default, as upstream): the job webhook refuses to
change a queued LeaderWorkerSet's group size, admitted or not; off, the size may change."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from pykueue.api import configuration, crd
from pykueue.cli import controller_command
from pykueue.kube import deploy, webhooks
from pykueue.reconcilers import integrations

LWS_FRAMEWORKS = (*integrations.DEFAULT_FRAMEWORKS, "leaderworkerset.x-k8s.io/leaderworkerset")
CONFIG = webhooks.WebhookConfig(frameworks=LWS_FRAMEWORKS)
QUEUE = "kueue.x-k8s.io/queue-name"


def _lws(size: int | None, queue: str | None = "user-queue") -> dict[str, Any]:
    template: dict[str, Any] = {"workerTemplate": {"spec": {"containers": [{"name": "w"}]}}}
    if size is not None:
        template["size"] = size
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "team-a", "labels": {QUEUE: queue} if queue else {}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": template},
    }


def _update(
    old: dict[str, Any], new: dict[str, Any], config: webhooks.WebhookConfig = CONFIG
) -> dict[str, Any]:
    review = {
        "uid": "u",
        "operation": "UPDATE",
        "namespace": "team-a",
        "kind": {"group": "leaderworkerset.x-k8s.io", "version": "v1", "kind": "LeaderWorkerSet"},
        "object": new,
        "oldObject": old,
    }
    return asyncio.run(webhooks.validate_job(review, config, None))


def test_a_queued_leaderworkersets_size_is_refused_naming_the_field() -> None:
    response = _update(_lws(3), _lws(4))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        'LeaderWorkerSet.leaderworkerset.x-k8s.io "lws" is invalid: '
        "spec.leaderWorkerTemplate.size: Invalid value: 4: field is immutable"
    )
    # An unset size is 1, as the LeaderWorkerSet API defaults it.
    assert _update(_lws(None), _lws(2))["allowed"] is False
    assert _update(_lws(None), _lws(1))["allowed"] is True


def test_other_changes_unqueued_sets_and_the_gate_off_pass() -> None:
    scaled = _lws(3)
    scaled["spec"]["replicas"] = 5  # more groups, each its own Workload: allowed
    assert _update(_lws(3), scaled)["allowed"] is True
    assert _update(_lws(3, queue=None), _lws(4, queue=None))["allowed"] is True
    off = webhooks.WebhookConfig(frameworks=LWS_FRAMEWORKS, feature_gates={"LWSImmutableGroupSize": False})
    assert _update(_lws(3), _lws(4), off)["allowed"] is True
    deleting = _lws(4)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert _update(_lws(3), copy.deepcopy(deleting))["allowed"] is True


def test_the_validating_webhook_is_registered_for_leaderworkersets() -> None:
    client = crd.WebhookClientConfig(url="https://127.0.0.1:9443")
    config = deploy.validating_webhook_configuration(client, frameworks=LWS_FRAMEWORKS)
    [job_hook] = [w for w in config["webhooks"] if w["name"] == "vjob.pykueue.io"]
    resources = {r for rule in job_hook["rules"] for r in rule["resources"]}
    assert "leaderworkersets" in resources
    # The kinds queued through their pods with no rules of their own are not sent to it.
    assert "deployments" not in resources


def test_the_configurations_gate_reaches_the_webhooks() -> None:
    cfg = configuration.parse_sections({"featureGates": {"LWSImmutableGroupSize": False}}, "config.yaml")
    assert controller_command.jobs_of(cfg).feature_gates == {"LWSImmutableGroupSize": False}
