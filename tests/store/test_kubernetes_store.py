"""`KubernetesStore` without a cluster: retries, the error tree, 410 Gone re-lists, kubeconfig reading.

A scripted HTTP server (tests/store/scripted_server.py) plays the API server, so the
answers a real one gives rarely (429, 503, 410 in a watch) are tested every time over
real HTTP. The normal paths run against the real API server in
tests/kube/controller/test_kubernetes_store.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from aiohttp import web

from pykueue.errors import AlreadyExists, Conflict, NotFound, StoreError, Unavailable, ValidationError
from pykueue.store import base, kubernetes
from pykueue.store.base import Key

from .scripted_server import Handler, serving, status

FAST = kubernetes.Retry(attempts=4, first=0.001, cap=0.002)
T = TypeVar("T")


def _lr(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "spec": {"limits": []}}


def _against(handler: Handler, use: Callable[[kubernetes.KubernetesStore], Awaitable[T]]) -> T:
    """Run ``use`` with a store whose API server is ``handler``."""

    async def scenario() -> T:
        async with serving(handler) as url:
            store = kubernetes.KubernetesStore(kubernetes.KubeConfig(server=url, token="t0ken"), retry=FAST)
            try:
                return await use(store)
            finally:
                await store.close()

    return asyncio.run(asyncio.wait_for(scenario(), 20))


def test_429_and_503_are_retried_then_succeed() -> None:
    calls: list[str] = []

    def handler(request: web.Request) -> web.Response:
        calls.append(request.headers["Authorization"])
        if len(calls) == 1:
            return status(429, "TooManyRequests")
        if len(calls) == 2:
            return status(503, "ServiceUnavailable")
        return web.json_response(_lr("a", "7"))

    obj = _against(handler, lambda store: store.get("LimitRange", "ns", "a"))
    assert obj["kind"] == "LimitRange" and obj["apiVersion"] == "v1"
    assert calls == ["Bearer t0ken"] * 3


def test_retries_spent_is_unavailable() -> None:
    attempts = 0

    def handler(request: web.Request) -> web.Response:
        nonlocal attempts
        attempts += 1
        return status(500, "InternalError")

    with pytest.raises(Unavailable):
        _against(handler, lambda store: store.get("LimitRange", "ns", "a"))
    assert attempts == FAST.attempts


def test_a_refused_connection_is_unavailable_after_the_retries() -> None:
    async def scenario() -> None:
        async with serving(lambda request: status(200)) as url:
            pass  # the server is gone again: its port refuses connections
        store = kubernetes.KubernetesStore(kubernetes.KubeConfig(server=url), retry=FAST)
        try:
            await store.get("LimitRange", "ns", "a")
        finally:
            await store.close()

    with pytest.raises(Unavailable):
        asyncio.run(scenario())


@pytest.mark.parametrize(
    ("method", "code", "reason", "error"),
    [
        ("get", 404, "NotFound", NotFound),
        ("update", 409, "Conflict", Conflict),
        ("create", 409, "AlreadyExists", AlreadyExists),
        ("get", 403, "Forbidden", StoreError),
    ],
)
def test_status_codes_map_onto_the_error_tree(
    method: str, code: int, reason: str, error: type[Exception]
) -> None:
    def call(store: kubernetes.KubernetesStore) -> Awaitable[Any]:
        if method == "get":
            return store.get("LimitRange", "ns", "a")
        if method == "update":
            return store.update({"kind": "LimitRange", **_lr("a", "1")})
        return store.create({"kind": "LimitRange", **_lr("a", "")})

    with pytest.raises(error) as caught:
        _against(lambda request: status(code, reason), call)
    assert not isinstance(caught.value, Unavailable)


def test_422_names_the_field_paths() -> None:
    causes = [
        {"field": "spec.queueingStrategy", "message": "Unsupported value", "reason": "FieldValueNotSupported"}
    ]
    with pytest.raises(ValidationError) as err:
        _against(
            lambda request: status(422, "Invalid", details={"causes": causes}),
            lambda store: store.create({"kind": "ClusterQueue", "metadata": {"name": "x"}}),
        )
    assert [(p.path, p.message) for p in err.value.problems] == [
        ("spec.queueingStrategy", "Unsupported value")
    ]


def test_list_pages_through_continue_tokens() -> None:
    def handler(request: web.Request) -> web.Response:
        if request.query.get("continue") == "next":
            return web.json_response({"metadata": {"resourceVersion": "9"}, "items": [_lr("b", "8")]})
        return web.json_response({"metadata": {"continue": "next"}, "items": [_lr("a", "5")]})

    items, version = _against(handler, lambda store: store.list("LimitRange", "ns"))
    assert [i["metadata"]["name"] for i in items] == ["a", "b"] and version == "9"


def _watch_lines(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(json.dumps({"type": t, "object": o}).encode() + b"\n" for t, o in events)


def test_410_gone_lists_again_reporting_deleted_and_changed_objects_then_resumes() -> None:
    watches: list[str] = []
    listed = {"metadata": {"resourceVersion": "100"}, "items": [_lr("kept", "50"), _lr("changed", "90")]}

    def handler(request: web.Request) -> web.Response:
        params = request.query
        if params.get("watch") != "1":
            return web.json_response(listed)
        watches.append(params.get("resourceVersion", ""))
        if params.get("resourceVersion") == "10":
            return status(410, "Expired")
        if params.get("resourceVersion") == "100":
            # A stream that reports expiry mid-way, as the API server does with an ERROR event.
            return web.Response(body=_watch_lines(("ADDED", _lr("new", "101")), ("ERROR", {"code": 410})))
        return web.Response(body=_watch_lines(("BOOKMARK", {"metadata": {"resourceVersion": "200"}})))

    async def use(store: kubernetes.KubernetesStore) -> list[tuple[str, str]]:
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

    seen = _against(handler, use)
    assert seen == [("DELETED", "deleted"), ("MODIFIED", "changed"), ("ADDED", "new"), ("DELETED", "new")]
    assert watches[:2] == ["10", "100"]


def test_a_watch_event_larger_than_any_read_buffer_arrives_whole() -> None:
    big = _lr("big", "11")
    big["spec"]["limits"] = [{"type": "Container", "max": {f"example.com/r{i}": "1"}} for i in range(20000)]

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "1":
            return web.json_response({"metadata": {"resourceVersion": "10"}, "items": []})
        # Sent in small pieces, as a slow link delivers them.
        response = web.StreamResponse()
        await response.prepare(request)
        line = _watch_lines(("ADDED", big))
        for start in range(0, len(line), 7000):
            await response.write(line[start : start + 7000])
        await response.write_eof()
        return response

    async def use(store: kubernetes.KubernetesStore) -> dict[str, Any]:
        async for event in store.watch("LimitRange", "10"):
            return event.object
        raise AssertionError("no event")

    got = _against(handler, use)
    assert len(json.dumps(big)) > 500_000
    assert got["spec"]["limits"] == big["spec"]["limits"]


def test_requests_are_rate_limited_but_answers_unchanged() -> None:
    calls: list[float] = []

    def handler(request: web.Request) -> web.Response:
        calls.append(time.monotonic())
        return web.json_response({"kind": "Namespace", "metadata": {"name": "x"}})

    async def scenario() -> float:
        async with serving(handler) as url:
            store = kubernetes.KubernetesStore(kubernetes.KubeConfig(server=url, token="t"), qps=20, burst=4)
            started = time.monotonic()
            try:
                await asyncio.gather(*(store.get("Namespace", "", "x") for _ in range(14)))
            finally:
                await store.close()
            return started

    started = asyncio.run(scenario())
    assert len(calls) == 14
    assert time.monotonic() - started >= 0.45  # 4 at once, then 10 at 20/s


def test_each_api_resource_has_its_own_rate_limit() -> None:
    """As client-go under controller-runtime: one limiter per kind, status counted with its kind."""
    calls: list[tuple[str, float]] = []

    def handler(request: web.Request) -> web.Response:
        calls.append((request.path, time.monotonic()))
        return web.json_response({"kind": "Namespace", "metadata": {"name": "x"}})

    async def scenario() -> float:
        async with serving(handler) as url:
            # A slow refill (2/s) keeps "at once" and "waited for a token" far apart on a busy machine.
            store = kubernetes.KubernetesStore(kubernetes.KubeConfig(server=url, token="t"), qps=2, burst=3)
            started = time.monotonic()
            try:
                await asyncio.gather(
                    *(store.get("Namespace", "", "x") for _ in range(3)),
                    *(store.get("ClusterQueue", "", "x") for _ in range(3)),
                    *(
                        store.request("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/x/status")
                        for _ in range(2)
                    ),
                )
            finally:
                await store.close()
            return started

    started = asyncio.run(scenario())
    namespaces = [at - started for path, at in calls if path.startswith("/api/v1/")]
    queues = sorted(at - started for path, at in calls if "clusterqueues" in path)
    assert len(namespaces) == 3 and max(namespaces) < 0.4  # their own burst of 3, at once
    assert len(queues) == 5
    assert max(queues[:3]) < 0.4  # the ClusterQueue bucket's burst, status included
    assert queues[-1] >= 0.9  # two more at 2/s: the status requests share that bucket


def test_a_request_says_when_it_has_passed_the_rate_limit_before_its_answer() -> None:
    """The hook of `base.request_on_its_way` fires once the token is taken, not on the answer."""
    answer = asyncio.Event()
    on_way: dict[str, float] = {}
    answered: dict[str, float] = {}

    async def handler(request: web.Request) -> web.Response:
        await answer.wait()  # a slow API server: nothing is answered until the test says so
        return web.json_response({"kind": "Namespace", "metadata": {"name": "x"}})

    async def scenario() -> float:
        async with serving(handler) as url:
            # One token at once, the next after 0.5 s.
            store = kubernetes.KubernetesStore(kubernetes.KubeConfig(server=url, token="t"), qps=2, burst=1)
            started = time.monotonic()

            async def get(name: str) -> None:
                base.request_on_its_way.set(lambda: on_way.setdefault(name, time.monotonic() - started))
                await store.get("Namespace", "", "x")
                answered[name] = time.monotonic() - started

            try:
                calls = [asyncio.create_task(get("first")), asyncio.create_task(get("second"))]
                await asyncio.sleep(0.2)
                assert set(on_way) == {"first"} and not answered  # travelling, not answered
                await asyncio.sleep(0.6)
                assert set(on_way) == {"first", "second"} and not answered
                answer.set()
                await asyncio.gather(*calls)
            finally:
                await store.close()
            return started

    asyncio.run(asyncio.wait_for(scenario(), 20))
    assert on_way["first"] < 0.2 <= 0.4 <= on_way["second"] < 0.8
    assert min(answered.values()) >= 0.8


def test_waiting_requests_get_tokens_by_rank_not_by_arrival() -> None:
    async def scenario() -> list[str]:
        bucket = kubernetes.TokenBucket(rate=100, burst=1)
        order: list[str] = []

        async def request(name: str, rank: tuple[int, ...]) -> None:
            base.request_rank.set(rank)
            await bucket.take()
            order.append(name)

        await bucket.take()  # the burst is spent: everyone below waits
        await asyncio.gather(
            request("explanation", (2, 0)),
            request("small admission", (1, -50)),
            request("unranked", (0,)),
            request("large admission", (1, -200)),
        )
        return order

    assert asyncio.run(scenario()) == ["unranked", "large admission", "small admission", "explanation"]


def test_a_spare_only_request_leaves_half_the_burst_for_the_others() -> None:
    async def scenario() -> tuple[list[str], int]:
        now = [0.0]
        bucket = kubernetes.TokenBucket(rate=10, burst=10, clock=lambda: now[0])
        order: list[str] = []

        async def request(name: str, spare_only: bool) -> None:
            base.request_spare_only.set(spare_only)
            await bucket.take()
            order.append(name)

        for _ in range(4):
            await request("admission", False)  # 10 -> 6 tokens: more than half is left
        await request("explanation", True)  # 6 >= 1 + 5: it may go (5 left)
        waiting = asyncio.create_task(request("late explanation", True))  # 5 < 6: waits
        await asyncio.sleep(0)
        await request("admission", False)  # never behind a spare-only waiter (4 left)
        assert order == ["admission"] * 4 + ["explanation", "admission"]
        now[0] = 0.15  # 5.5 tokens: still not the 6 it needs
        await asyncio.sleep(0.2)
        held = len(order)
        now[0] = 1.0  # 4 + 10 tokens a second, capped at the burst
        await asyncio.wait_for(waiting, 2)
        return order, held

    order, held = asyncio.run(scenario())
    assert held == 6 and order[-1] == "late explanation"


def test_a_request_that_arrives_after_a_spare_only_waiter_is_not_held_by_its_timer() -> None:
    async def scenario() -> float:
        bucket = kubernetes.TokenBucket(rate=20, burst=4)
        base.request_spare_only.set(False)
        for _ in range(4):
            await bucket.take()  # empty: a spare-only request needs 3 tokens (0.15 s)

        async def spare() -> None:
            base.request_spare_only.set(True)
            await bucket.take()

        waiting = asyncio.create_task(spare())
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await bucket.take()  # one token: 0.05 s, not the spare-only waiter's 0.15 s
        took = loop.time() - started
        await waiting
        return took

    assert asyncio.run(scenario()) < 0.12


def test_a_cancelled_waiter_gives_its_turn_to_the_next() -> None:
    async def scenario() -> list[str]:
        bucket = kubernetes.TokenBucket(rate=100, burst=1)
        order: list[str] = []

        async def request(name: str) -> None:
            await bucket.take()
            order.append(name)

        await bucket.take()
        first = asyncio.create_task(request("gone"))
        second = asyncio.create_task(request("next"))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        return order

    assert asyncio.run(scenario()) == ["next"]


def test_a_controllers_list_is_served_from_the_watch_cache_at_once() -> None:
    seen: list[dict[str, str]] = []

    def handler(request: web.Request) -> web.Response:
        seen.append(dict(request.query))
        return web.json_response(
            {
                "kind": "NamespaceList",
                "metadata": {"resourceVersion": "42"},
                "items": [{"metadata": {"name": "a"}}],
            }
        )

    async def use(store: kubernetes.KubernetesStore) -> tuple[list[Any], str]:
        store.list_from_watch_cache = True
        return await store.list("Namespace")

    items, version = _against(handler, use)
    assert [obj["metadata"]["name"] for obj in items] == ["a"] and version == "42"
    assert seen == [{"resourceVersion": "0"}]  # no pages: the cache answers with everything


def test_resource_of_an_api_path() -> None:
    assert kubernetes.resource_of_path("/api/v1/namespaces/a") == "/namespaces"
    assert kubernetes.resource_of_path("/api/v1/namespaces/a/pods/p?x=1") == "/pods"
    assert (
        kubernetes.resource_of_path("/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w/status")
        == "kueue.x-k8s.io/workloads"
    )
    assert (
        kubernetes.resource_of_path("/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
        == "kueue.x-k8s.io/clusterqueues"
    )
    assert kubernetes.resource_of_path("/apis/coordination.k8s.io/v1/namespaces/n/leases/l") == (
        "coordination.k8s.io/leases"
    )


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
