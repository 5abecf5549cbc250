"""One tenant cannot take the API from the others: large applies, request floods, object floods."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from ..helpers import Server, job
from .common import tenant, two_teams


def _jobs(prefix: str, count: int, namespace: str = "research") -> list[dict[str, Any]]:
    return [job(f"{prefix}-{i}", "sleep 60", namespace=namespace, cpu="100m") for i in range(count)]


def test_a_large_apply_does_not_hold_up_another_tenants_requests(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server)
    alice = tenant(server, "alice", "research")
    bob = tenant(server, "bob", "product")
    docs = _jobs("big", 4000)
    docs[-1]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs})
    payload = orjson.dumps({"files": [{"name": "big.yaml", "text": text}]})
    sent, answered = threading.Event(), threading.Event()
    result: dict[str, httpx.Response] = {}

    def body() -> Iterator[bytes]:
        half = len(payload) // 2
        yield payload[:half]
        yield payload[half:]
        sent.set()  # runs once the client has handed the last byte to the socket

    def apply() -> None:
        headers = {"Authorization": f"Bearer {alice}", "Content-Type": "application/json"}
        result["apply"] = httpx.post(
            server.url + "/api/v1/apply", content=body(), headers=headers, timeout=600
        )
        answered.set()

    worker = threading.Thread(target=apply)
    worker.start()
    assert sent.wait(120)
    # Three requests one after the other: the first could slip in before the server has
    # read the whole body, the later ones only if the apply leaves the event loop free.
    for _ in range(3):
        assert server.request("GET", "/api/v1/jobs", token=bob).status_code == 200
    assert not answered.is_set(), "the apply finished before another tenant's requests were answered"
    worker.join(600)
    response = result["apply"]
    assert response.status_code == 422, response.text[:500]
    assert "big.yaml#1.4000" in response.text
    assert server.jobs() == {}


def test_a_tenant_over_its_request_rate_gets_429_naming_the_limit(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server, limits={"requestsPerSecond": 0.001, "burst": 3})
    alice = tenant(server, "alice", "research")
    bob = tenant(server, "bob", "product")
    for _ in range(3):
        assert server.request("GET", "/api/v1/jobs", token=alice).status_code == 200
    refused = server.request("GET", "/api/v1/jobs", token=alice)
    assert refused.status_code == 429
    body = refused.json()
    assert "limits.requestsPerSecond" in body["error"] and "alice" in body["error"]
    assert body["problems"] == ["limits.requestsPerSecond: 0.001", "limits.burst: 3"]
    assert int(refused.headers["Retry-After"]) >= 1
    # Others are not slowed down by alice's flood: another tenant, and the admin.
    assert server.request("GET", "/api/v1/jobs", token=bob).status_code == 200
    assert server.request("GET", "/api/v1/jobs", token=server.token).status_code == 200
    assert server.request("GET", "/api/v1/jobs").status_code == 200


def test_a_tenant_over_its_object_count_gets_429_naming_the_limit(
    tmp_path: Path, start_server: Callable[..., Server]
) -> None:
    server = two_teams(tmp_path, start_server, limits={"maxObjects": 3})
    alice = tenant(server, "alice", "research")
    bob = tenant(server, "bob", "product")
    too_many = server.apply(_jobs("flood", 4), token=alice)
    assert too_many.status_code == 429, too_many.text
    assert "limits.maxObjects" in too_many.json()["error"]
    assert too_many.json()["problems"] == ["limits.maxObjects: 3"]
    assert server.jobs() == {}
    assert server.apply(_jobs("first", 2), token=alice).status_code == 200
    more = server.apply(_jobs("second", 2), token=alice)
    assert more.status_code == 429, more.text
    assert "namespace research holds 2" in more.json()["error"]
    # Applying what is stored again holds nothing more.
    assert server.apply(_jobs("first", 2) + _jobs("second", 1), token=alice).status_code == 200
    # Each namespace has its own count, and the admin is not counted.
    assert server.apply(_jobs("other", 3, namespace="product"), token=bob).status_code == 200
    assert server.apply(_jobs("admin", 2)).status_code == 200
    assert len(server.jobs()) == 8
