"""The dashboard's page and data routes, mounted on the standalone API and on the controller's side door.

    GET /dashboard                   the page (static/dashboard.html): no data, no identity needed
    GET /dashboard/static/{file}     dashboard.js and dashboard.css, nothing else
    GET /api/v1/dashboard            the document `dashboard_data.build` makes for the caller
    GET /api/v1/dashboard/objects/{Kind}/[{namespace}/]{name}
                                     one object's YAML for the detail page (`dashboard_objects`)

Who the caller is differs by mode, so the mounting app passes its own
``document(request)``: standalone asks its token store (`auth`); a cluster asks
the API server (`kube_identity`: TokenReview and SubjectAccessReview, through the
controller's visibility `Authorizer`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse

from pykueue.api import access
from pykueue.engine.state import State
from pykueue.views import dashboard_objects, visibility

STATIC = Path(__file__).parent / "static"
# The page's files, by the name the page asks for (nothing else under static/ is served).
FILES = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
# The page holds no data; the token stays in the page's session storage, never in a URL sent.
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}

# The caller's document, or the refusal (a Response) to send instead.
Document = Callable[[Request], Awaitable[Any]]
# One object's answer for the caller (Kind, the path after it), or the refusal to send instead.
ObjectDocument = Callable[[Request, str, str], Awaitable[Any]]


async def object_answer(
    state: State, identity: access.Identity, kind: str, path: str, lookup: dashboard_objects.Lookup
) -> Any:
    """`dashboard_objects.answer`, or a 404 that reads the same whether absent or hidden."""
    try:
        return await dashboard_objects.answer(state, identity, kind, path, lookup)
    except dashboard_objects.Refused as refused:
        # "error" as the standalone API says it, "message" as a Kubernetes Status does.
        text = str(refused)
        return JSONResponse({"error": text, "message": text, "problems": []}, status_code=404)


def add_routes(app: FastAPI, document: Document, one_object: ObjectDocument) -> None:
    @app.get("/dashboard")
    async def page() -> FileResponse:
        return FileResponse(STATIC / "dashboard.html", media_type="text/html", headers=PAGE_HEADERS)

    @app.get("/dashboard/static/{name}")
    async def asset(name: str) -> Any:
        media = FILES.get(name)
        if media is None:
            message = f"no dashboard file {name[:64]!r}"
            return JSONResponse({"error": message, "problems": []}, status_code=404)
        return FileResponse(STATIC / name, media_type=media, headers=PAGE_HEADERS)

    @app.get("/api/v1/dashboard")
    async def data(request: Request) -> Any:
        return await document(request)

    @app.get("/api/v1/dashboard/objects/{kind}/{path:path}")
    async def detail(kind: str, path: str, request: Request) -> Any:
        return await one_object(request, kind, path)


async def kube_identity(
    authorizer: visibility.Authorizer, token: str, state: State
) -> access.Identity | None:
    """A cluster caller as a dashboard identity, or None when it may read no queue at all.

    Who may read every ClusterQueue's pending workloads is an admin; anyone else is a
    tenant of the namespaces (among those with a LocalQueue) where it may read a
    LocalQueue's pending workloads: the same RBAC rules as the visibility API.
    """
    if await authorizer(token, None):
        return access.Identity("cluster reader", access.ADMIN)
    namespaces = sorted({lq.namespace for lq in state.local_queues.values()})
    allowed = tuple([ns for ns in namespaces if await authorizer(token, ns)])
    if not allowed:
        return None
    return access.Identity("namespace reader", access.TENANT, namespaces=allowed)
