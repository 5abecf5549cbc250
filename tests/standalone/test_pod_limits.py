"""Pods without requests: the config's default requests, a cap on pods per job, and `pods` quota."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pykueue.errors import InputError
from pykueue.standalone.runtime import Config

from .helpers import Server, flavor_and_queue, job, wait_until, write_config


def _config(tmp_path: Path, queue: dict[str, Any], **limits: Any) -> Path:
    path = write_config(
        tmp_path, flavor_and_queue("default", "team", "default") + "---\n" + yaml.safe_dump(queue)
    )
    if limits:
        raw = yaml.safe_load(path.read_text())
        raw["limits"] = limits
        path.write_text(yaml.safe_dump(raw))
    return path


def _queue(resources: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": list(resources),
                    "flavors": [
                        {
                            "name": "default",
                            "resources": [{"name": n, "nominalQuota": q} for n, q in resources.items()],
                        }
                    ],
                }
            ],
        },
    }


def _bare(name: str, parallelism: int) -> dict[str, Any]:
    """A Job whose container asks for nothing, as a first-day user writes it."""
    manifest = job(name, "sleep 30", parallelism=parallelism)
    del manifest["spec"]["template"]["spec"]["containers"][0]["resources"]
    return manifest


def _used(server: Server) -> dict[str, str]:
    row = server.api("GET", "/api/v1/clusterqueues")[0]
    return {u["resource"]: str(u["used"]) for u in row["usage"]}


def test_a_container_without_requests_gets_the_default_requests_and_uses_quota(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server(_config(tmp_path, _queue({"cpu": "2", "memory": "8Gi"})))
    limited = _bare("limited", 2)
    limited["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "500m"}}
    response = server.apply([_bare("bare", 3), limited])
    assert response.status_code == 200, response.text
    stored = server.api("GET", "/api/v1/objects/Job/default/bare")
    assert stored["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "100m",
        "memory": "128Mi",
    }
    # A limit stands in for its request: only memory is defaulted.
    stored = server.api("GET", "/api/v1/objects/Job/default/limited")
    assert stored["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m"},
        "requests": {"memory": "128Mi"},
    }
    wait_until(lambda: _used(server).get("cpu") == "1300m", 60)  # 3 x 100m + 2 x 500m
    assert _used(server)["memory"] == "640Mi"


def test_a_job_over_the_pod_cap_is_refused_naming_the_field(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server(_config(tmp_path, _queue({"cpu": "2"})))
    response = server.apply([_bare("huge", 100_000)])
    assert response.status_code == 422, response.text
    problems = response.json()["problems"]
    assert any(
        "spec.parallelism" in p and "limits.maxPodsPerJob: 256" in p and "100000" in p for p in problems
    )
    assert server.jobs() == {}


def test_only_resources_the_queue_covers_are_defaulted(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    # A memory request on a CPU-only queue could never be admitted there.
    server = start_server(_config(tmp_path, _queue({"cpu": "2"})))
    assert server.apply([_bare("bare", 2)]).status_code == 200
    stored = server.api("GET", "/api/v1/objects/Job/default/bare")
    assert stored["spec"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m"}}
    wait_until(lambda: _used(server).get("cpu") == "200m", 60)


def test_the_limits_are_read_from_the_config(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    config = _config(
        tmp_path, _queue({"cpu": "2", "memory": "8Gi"}), maxPodsPerJob=4, defaultRequests={"cpu": "250m"}
    )
    server = start_server(config)
    response = server.apply([_bare("five", 5)])
    assert response.status_code == 422, response.text
    assert "limits.maxPodsPerJob: 4" in response.text
    assert server.apply([_bare("four", 4)]).status_code == 200
    stored = server.api("GET", "/api/v1/objects/Job/default/four")
    assert stored["spec"]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "250m"}}
    wait_until(lambda: _used(server).get("cpu") == "1", 60)


def test_bad_limits_in_the_config_are_refused_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    for text, key in [
        ("limits: {maxPodsPerJob: 0}", "limits.maxPodsPerJob"),
        ("limits: {burst: many}", "limits.burst"),
        ("limits: {defaultRequests: {cpu: lots}}", "limits.defaultRequests.cpu"),
        ("limits: {requestRate: 5}", "limits.requestRate"),
    ]:
        path.write_text(text + "\n")
        with pytest.raises(InputError, match=key.replace(".", r"\.")):
            Config.load(path)
    assert Config.load(None).limits.max_pods_per_job == 256


def test_pods_are_counted_against_a_pods_quota(tmp_path: Path, start_server: Callable[..., Server]) -> None:
    server = start_server(_config(tmp_path, _queue({"cpu": "100", "memory": "100Gi", "pods": "4"})))
    assert server.apply([_bare("three", 3), _bare("six", 6)]).status_code == 200
    wait_until(lambda: server.jobs().get("default/three", {}).get("state") == "Running", 60)
    assert _used(server)["pods"] == "3"
    explanation = wait_until(lambda: server.explanation("default", "six"), 30)
    assert "pods" in str(explanation)
    assert server.jobs()["default/six"]["state"] != "Running"
