"""The aggregated visibility API's routes, without a cluster: the order of the checks and the answers.

The front proxy's verified certificate is put into the scope as `front_proxy.PeerCertProtocol`
does; tests/kube/controller/test_visibility_api.py runs the same routes behind a real API server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from pykueue.engine.state import State
from pykueue.kube import front_proxy, visibility_api

from .test_metrics import Harness, _queues, _workload

PATH = "/apis/visibility.kueue.x-k8s.io"
CQ = f"{PATH}/v1beta2/clusterqueues/cq/pendingworkloads"
TRUSTED = front_proxy.RequestHeaderConfig(client_ca=b"unused here", allowed_names=("front-proxy-client",))
ASKED: list[tuple[str, dict[str, Any]]] = []


def _state() -> State:
    async def start() -> State:
        h = Harness()
        await h.start(
            [*_queues("1"), _workload("first", priority=10), _workload("a"), _workload("b", priority=5)]
        )
        return h.manager.admission.state

    return asyncio.run(start())


class Client:
    """Requests to the app in-process (httpx's ASGI transport), one event loop per request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def get(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="https://visibility") as client:
                return await client.get(path, headers=headers)

        return asyncio.run(call())


def _estimate(key: str) -> dict[str, str] | None:
    return {"at": "2026-01-01T13:00:00Z", "low": "", "high": "", "basis": "test"} if key == "team/a" else None


def _client(state: State | None, allowed: bool = True, common_name: str = "front-proxy-client") -> Client:
    async def authorizer(user: front_proxy.User, attributes: dict[str, Any]) -> bool:
        ASKED.append((user.name, attributes))
        return allowed

    app = FastAPI()
    app.include_router(visibility_api.create_router(lambda: TRUSTED, authorizer, lambda: state, _estimate))
    subject = ((("commonName", common_name),),)

    async def with_certificate(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope.setdefault("extensions", {})["tls"] = {"client_cert_subject": subject}
        await app(scope, receive, send)

    return Client(with_certificate)


@pytest.fixture(scope="module")
def state() -> State:
    return _state()


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    ASKED.clear()
    yield


def _get(client: Client, path: str, user: str = "alice") -> Any:
    return client.get(path, headers={"X-Remote-User": user, "X-Remote-Group": "team"})


def test_a_summary_names_its_version_and_the_authorizer_saw_the_request(state: State) -> None:
    answer = _get(_client(state), CQ)
    assert answer.status_code == 200
    body = answer.json()
    assert body["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert [i["metadata"]["name"] for i in body["items"]] == ["b", "a"]
    # pykueue's estimated start rides along, as on the metrics port, where one is known.
    assert [i.get("estimatedStart", {}).get("basis") for i in body["items"]] == [None, "test"]
    assert ASKED == [
        (
            "alice",
            {
                "group": "visibility.kueue.x-k8s.io",
                "version": "v1beta2",
                "verb": "get",
                "resource": "clusterqueues",
                "subresource": "pendingworkloads",
                "name": "cq",
            },
        )
    ]
    old = _get(_client(state), f"{PATH}/v1beta1/namespaces/team/localqueues/lq/pendingworkloads?limit=0")
    assert old.json()["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    assert len(old.json()["items"]) == 2  # limit 0 is the default, as upstream
    assert ASKED[-1][1]["namespace"] == "team"


def test_refusals_read_like_the_api_servers(state: State) -> None:
    denied = _get(_client(state, allowed=False), CQ)
    assert denied.status_code == 403
    assert denied.json()["reason"] == "Forbidden"
    assert 'User "alice" cannot get resource "clusterqueues/pendingworkloads"' in denied.json()["message"]
    missing = _get(_client(state), f"{PATH}/v1beta2/clusterqueues/nope/pendingworkloads")
    assert (missing.status_code, missing.json()["message"]) == (
        404,
        'clusterqueue.visibility.kueue.x-k8s.io "nope" not found',
    )
    negative = _get(_client(state), f"{CQ}?limit=-1")
    assert negative.status_code == 400 and "PendingWorkloadOptions.limit" in negative.json()["message"]
    assert _get(_client(state), f"{PATH}/v2/clusterqueues/cq/pendingworkloads").status_code == 404
    assert _get(_client(None), CQ).status_code == 503


def test_nobody_is_believed_but_the_allowed_proxy(state: State) -> None:
    assert _get(_client(state, common_name="pykueue-admin"), CQ).status_code == 401
    assert _client(state).get(CQ).status_code == 401  # no user header
    assert _get(_client(state, common_name="pykueue-admin"), PATH).status_code == 401
    assert ASKED == []  # never asked about anyone


def test_discovery_lists_both_versions_v1beta2_first(state: State) -> None:
    group = _get(_client(state), PATH).json()
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1beta2"
    resources = _get(_client(state), f"{PATH}/v1beta1").json()["resources"]
    assert {r["name"]: r["verbs"] for r in resources if "/" in r["name"]} == {
        "clusterqueues/pendingworkloads": ["get"],
        "localqueues/pendingworkloads": ["get"],
    }
    assert _get(_client(state), "/apis").json()["groups"][0]["name"] == "visibility.kueue.x-k8s.io"
