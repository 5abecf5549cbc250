"""`KubernetesStore` without a cluster: retries, the error tree, 410 Gone re-lists, kubeconfig reading.

An `httpx.MockTransport` plays the API server, so the answers a real one gives
rarely (429, 503, 410 in a watch) are tested every time. The normal paths run
against the real API server in tests/kube/controller/test_kubernetes_store.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from pykueue.errors import AlreadyExists, Conflict, NotFound, StoreError, Unavailable, ValidationError
from pykueue.store import kubernetes
from pykueue.store.base import Key

CONFIG = kubernetes.KubeConfig(server="https://kube.test", token="t0ken")
FAST = kubernetes.Retry(attempts=4, first=0.001, cap=0.002)
LR_PATH = "/api/v1/namespaces/ns/limitranges"


def _store(handler: Callable[[httpx.Request], httpx.Response]) -> kubernetes.KubernetesStore:
    return kubernetes.KubernetesStore(CONFIG, retry=FAST, transport=httpx.MockTransport(handler))


def _status(code: int, reason: str = "", **extra: Any) -> httpx.Response:
    return httpx.Response(
        code, json={"kind": "Status", "code": code, "reason": reason, "message": reason, **extra}
    )


def _lr(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "spec": {"limits": []}}


def test_429_and_503_are_retried_then_succeed() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers["Authorization"])
        if len(calls) == 1:
            return _status(429, "TooManyRequests")
        if len(calls) == 2:
            return _status(503, "ServiceUnavailable")
        return httpx.Response(200, json=_lr("a", "7"))

    obj = asyncio.run(_store(handler).get("LimitRange", "ns", "a"))
    assert obj["kind"] == "LimitRange" and obj["apiVersion"] == "v1"
    assert calls == ["Bearer t0ken"] * 3


def test_retries_spent_is_unavailable() -> None:
    attempts = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal attempts
        attempts += 1
        return _status(500, "InternalError")

    with pytest.raises(Unavailable):
        asyncio.run(_store(handler).get("LimitRange", "ns", "a"))
    assert attempts == FAST.attempts


@pytest.mark.parametrize(
    ("method", "response", "error"),
    [
        ("get", _status(404, "NotFound"), NotFound),
        ("update", _status(409, "Conflict"), Conflict),
        ("create", _status(409, "AlreadyExists"), AlreadyExists),
        ("get", _status(403, "Forbidden"), StoreError),
    ],
)
def test_status_codes_map_onto_the_error_tree(
    method: str, response: httpx.Response, error: type[Exception]
) -> None:
    store = _store(lambda request: response)
    call = {
        "get": lambda: store.get("LimitRange", "ns", "a"),
        "update": lambda: store.update({"kind": "LimitRange", **_lr("a", "1")}),
        "create": lambda: store.create({"kind": "LimitRange", **_lr("a", "")}),
    }[method]
    with pytest.raises(error) as caught:
        asyncio.run(call())
    assert not isinstance(caught.value, Unavailable)


def test_422_names_the_field_paths() -> None:
    causes = [
        {"field": "spec.queueingStrategy", "message": "Unsupported value", "reason": "FieldValueNotSupported"}
    ]
    store = _store(lambda request: _status(422, "Invalid", details={"causes": causes}))
    with pytest.raises(ValidationError) as err:
        asyncio.run(store.create({"kind": "ClusterQueue", "metadata": {"name": "x"}}))
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("spec.queueingStrategy", "Unsupported value")
    ]


def test_list_pages_through_continue_tokens() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("continue") == "next":
            return httpx.Response(200, json={"metadata": {"resourceVersion": "9"}, "items": [_lr("b", "8")]})
        return httpx.Response(200, json={"metadata": {"continue": "next"}, "items": [_lr("a", "5")]})

    items, version = asyncio.run(_store(handler).list("LimitRange", "ns"))
    assert [i["metadata"]["name"] for i in items] == ["a", "b"] and version == "9"


def _watch_lines(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in events)


def test_410_gone_lists_again_reporting_deleted_and_changed_objects_then_resumes() -> None:
    watches: list[str] = []
    listed = {"metadata": {"resourceVersion": "100"}, "items": [_lr("kept", "50"), _lr("changed", "90")]}

    def handler(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if params.get("watch") != "1":
            return httpx.Response(200, json=listed)
        watches.append(params.get("resourceVersion", ""))
        if params.get("resourceVersion") == "10":
            return _status(410, "Expired")
        if params.get("resourceVersion") == "100":
            # A stream that reports expiry mid-way, as the API server does with an ERROR event.
            return httpx.Response(
                200, content=_watch_lines(("ADDED", _lr("new", "101")), ("ERROR", {"code": 410}))
            )
        return httpx.Response(
            200, content=_watch_lines(("BOOKMARK", {"metadata": {"resourceVersion": "200"}}))
        )

    async def scenario() -> list[tuple[str, str]]:
        store = _store(handler)
        store._listed["LimitRange"] = {
            Key("LimitRange", "ns", "kept"): "50",
            Key("LimitRange", "ns", "changed"): "60",
            Key("LimitRange", "ns", "deleted"): "70",
        }
        seen = []
        async for event in store.watch("LimitRange", "10"):
            seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == 4:
                break
        return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert seen == [("DELETED", "deleted"), ("MODIFIED", "changed"), ("ADDED", "new"), ("DELETED", "new")]
    assert watches[:2] == ["10", "100"]


def test_kubeconfig_with_inline_certificates_and_token_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "test",
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": "https://127.0.0.1:6443/",
                    "certificate-authority-data": base64.b64encode(b"CA").decode(),
                },
            }
        ],
        "users": [
            {
                "name": "u",
                "user": {
                    "client-certificate-data": base64.b64encode(b"CERT").decode(),
                    "client-key-data": base64.b64encode(b"KEY").decode(),
                    "tokenFile": "token",
                },
            }
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    config = kubernetes.load_kubeconfig(path)
    assert config.server == "https://127.0.0.1:6443"
    assert (config.ca_data, config.cert_data, config.key_data) == (b"CA", b"CERT", b"KEY")
    assert config.bearer_token() == "from-file"
    with pytest.raises(StoreError):
        kubernetes.load_kubeconfig(path, context="other")


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(StoreError):
        kubernetes.resource_of("Gadget")
    assert (
        kubernetes.resource_of("Workload").path("ns", "w")
        == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/w"
    )
    assert kubernetes.resource_of("Namespace").path(None, "x") == "/api/v1/namespaces/x"
