"""The controller's plain-HTTP side door: probes, Prometheus metrics and the visibility API.

    GET /healthz    200 while the process (its event loop) is alive
    GET /readyz     200 once the caches are synced (or while standing by for the lease)
    GET /metrics    Prometheus text format, `pykueue.reconcilers.metrics`
    GET /apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{name}/pendingworkloads
    GET /apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/{ns}/localqueues/{name}/pendingworkloads
    GET /dashboard, /dashboard/static/{file}, /api/v1/dashboard[/objects/...]
                    the read-only web dashboard (`dashboard`)

It runs on the controller's event loop (uvicorn inside the program, as the
webhook server does), so every handler reads the engine state between passes,
never during one. The visibility routes ask an `visibility.Authorizer` with the
caller's bearer token; `kube_authorizer` is the API server's own answer
(TokenReview, then SubjectAccessReview on ``visibility.kueue.x-k8s.io``
``clusterqueues`` / ``localqueues`` ``pendingworkloads``), so a tenant with a Role
in their namespace reads their LocalQueues there and nothing else. The dashboard
asks the same authorizer (`dashboard.kube_identity`): it shows a tenant the
workloads and LocalQueues of the namespaces where it may read pending workloads.
Its usage charts are sampled when someone looks (`UsageHistory.sample_if_due`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pykueue.api import access
from pykueue.engine.state import State
from pykueue.reconcilers.metrics import Metrics
from pykueue.store.base import Key, Manifest
from pykueue.views import dashboard, dashboard_data, visibility

log = logging.getLogger(__name__)
PREFIX = "/apis/" + visibility.GROUP_VERSION


def _status(code: int, reason: str, message: str) -> JSONResponse:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason}
    return JSONResponse(body, status_code=code)


def kube_authorizer(request: Callable[..., Any]) -> visibility.Authorizer:
    """An authorizer asking the API server (``request`` is `KubernetesStore.request`)."""

    async def allowed(token: str, namespace: str | None, resource: str = "", name: str = "") -> bool:
        review = await request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return False
        user = status.get("user") or {}
        attributes: dict[str, Any] = {
            "group": "visibility.kueue.x-k8s.io",
            "resource": "localqueues" if namespace else "clusterqueues",
            "subresource": "pendingworkloads",
            "verb": "get",
        }
        if namespace:
            attributes["namespace"] = namespace
        sar = await request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": user.get("username", ""),
                    "groups": user.get("groups") or [],
                    "uid": user.get("uid", ""),
                    "resourceAttributes": attributes,
                },
            },
        )
        return bool((sar.get("status") or {}).get("allowed"))

    return allowed


def create_app(
    metrics: Metrics,
    state: Callable[[], State | None],
    ready: Callable[[], bool],
    authorizer: visibility.Authorizer | None = None,
    workloads: Callable[[], list[Manifest]] = list,
    estimated: visibility.EstimatedStart | None = None,
    cached: Callable[[Key], Manifest | None] | None = None,
) -> FastAPI:
    """The app; ``authorizer`` None lets every caller read every queue (tests, trusted networks).

    ``workloads`` gives the Workloads the controller has cached, for the dashboard;
    ``cached`` one cached object by key, for the dashboard's detail pages (None: they
    answer 404).
    """
    app = FastAPI(title="pykueue controller", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/readyz")
    async def readyz() -> PlainTextResponse:
        if ready():
            return PlainTextResponse("ok")
        return PlainTextResponse("caches not synced", status_code=503)

    @app.get("/metrics")
    async def scrape() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def check(request: Request, namespace: str | None) -> JSONResponse | None:
        if authorizer is None:
            return None
        header = request.headers.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else ""
        if not token:
            return _status(401, "Unauthorized", "a bearer token is required")
        if not await authorizer(token, namespace):
            where = f"in namespace {namespace!r}" if namespace else "at the cluster scope"
            return _status(403, "Forbidden", f"may not read pending workloads {where}")
        return None

    def current() -> State | None:
        return state()

    @app.get(PREFIX + "/clusterqueues/{name}/pendingworkloads")
    async def cluster_queue(
        name: str, request: Request, offset: int = 0, limit: int = visibility.DEFAULT_LIMIT
    ) -> JSONResponse:
        denied = await check(request, None)
        if denied is not None:
            return denied
        engine = current()
        if engine is None:
            return _status(503, "ServiceUnavailable", "not the leader, or caches not synced")
        summary = visibility.cluster_queue_summary(engine, name, offset, limit, estimated)
        if summary is None:
            return _status(404, "NotFound", f'clusterqueues.kueue.x-k8s.io "{name}" not found')
        return JSONResponse(summary)

    @app.get(PREFIX + "/namespaces/{namespace}/localqueues/{name}/pendingworkloads")
    async def local_queue(
        namespace: str, name: str, request: Request, offset: int = 0, limit: int = visibility.DEFAULT_LIMIT
    ) -> JSONResponse:
        denied = await check(request, namespace)
        if denied is not None:
            return denied
        engine = current()
        if engine is None:
            return _status(503, "ServiceUnavailable", "not the leader, or caches not synced")
        summary = visibility.local_queue_summary(engine, namespace, name, offset, limit, estimated)
        if summary is None:
            return _status(404, "NotFound", f'localqueues.kueue.x-k8s.io "{namespace}/{name}" not found')
        return JSONResponse(summary)

    history = dashboard_data.UsageHistory()

    async def caller(request: Request) -> tuple[access.Identity, State] | JSONResponse:
        """Who asks the dashboard, and the engine to answer from; or the refusal."""
        engine = current()
        if engine is None:
            return _status(503, "ServiceUnavailable", "not the leader, or caches not synced")
        identity = access.Identity("anyone", access.ADMIN)  # no authorizer: a trusted network
        if authorizer is not None:
            header = request.headers.get("authorization", "")
            token = header[7:] if header.lower().startswith("bearer ") else ""
            if not token:
                return _status(401, "Unauthorized", "a bearer token is required")
            found = await dashboard.kube_identity(authorizer, token, engine)
            if found is None:
                return _status(403, "Forbidden", "may read the pending workloads of no queue")
            identity = found
        return identity, engine

    async def dashboard_document(request: Request) -> Any:
        who = await caller(request)
        if isinstance(who, JSONResponse):
            return who
        identity, engine = who
        now = time.time()
        history.sample_if_due(engine, now)
        return dashboard_data.build(engine, workloads(), identity, history, now, estimated)

    async def one_object(request: Request, kind: str, path: str) -> Any:
        who = await caller(request)
        if isinstance(who, JSONResponse):
            return who

        async def lookup(found_kind: str, namespace: str, name: str) -> Manifest | None:
            return cached(Key(found_kind, namespace, name)) if cached is not None else None

        return await dashboard.object_answer(who[1], who[0], kind, path, lookup)

    dashboard.add_routes(app, dashboard_document, one_object)
    return app


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield  # the controller owns SIGTERM/SIGINT


class HealthServer:
    """The app on plain HTTP inside the running event loop; ``port=0`` picks a free port."""

    def __init__(self, app: FastAPI, host: str = "0.0.0.0", port: int = 8080) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self._socket = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, host=self.host, port=self.port, log_level="warning", lifespan="off")
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="health-server")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("health server stopped during start-up")
            await asyncio.sleep(0.02)
        log.info("metrics, probes and visibility on http://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._socket is not None:
            self._socket.close()
            self._socket = None
