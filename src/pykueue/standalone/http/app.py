"""The HTTP API of standalone pykueue (FastAPI): everything the CLI does goes through here.

    GET    /healthz                                  no identity needed
    GET    /api/v1/whoami | /api/v1/node | /api/v1/events?after=N
    GET    /api/v1/{clusterqueues|localqueues|workloads|jobs}      rows for `pykueue get` (jobs: Jobs and JobSets)
    GET    /api/v1/objects/{kind}[/{namespace}/{name}]             stored manifests ("_" = no namespace)
    DELETE /api/v1/objects/{kind}/{namespace}/{name}
    POST   /api/v1/apply          {"files": [{"name", "text"}]}    all or nothing (see applying)
    GET    /api/v1/describe/workload/{namespace}/{name}            why it waits, its position
    GET    /api/v1/logs/{namespace}/{name}                         a job's (or JobSet's) pod logs (a MultiKueue job's: from its worker)
    POST   /api/v1/{stop|resume}  {"kind": "workload"|"clusterqueue", "namespace", "name"}
    GET    /api/v1/policy/history?kind=K&name=N&limit=L            recorded policy changes (policy)
    GET    /api/v1/policy/revisions/{rev}                          one, with its diff
    POST   /api/v1/policy/rollback  {"revision": N, "apply": bool} what-if; apply: admins only
    GET    /api/v1/dashboard                                       the dashboard's document (dashboard_data)
    GET    /api/v1/dashboard/objects/{kind}/{path}                 one object's YAML (dashboard_objects)
    GET    /dashboard, /dashboard/static/{file}                    the dashboard's page (no data, no identity)
    GET    /api/v1/identities                                      admins only
    POST   /api/v1/identities     {"name", "role", "namespaces", "priorityClasses", "unixUser"} -> a token
    POST   /api/v1/identities/{name}/revoke                        the identity's token stops working
    DELETE /api/v1/identities/{name}

Each group of routes is a router of its own under `routes`; `create_app` includes
them, with the server's `context.ServerContext`, and the error handlers below.

A request on the server's Unix socket is its caller's Unix user (`peer`); any
other request carries ``Authorization: Bearer <token>``. The caller is checked
first (`context.authenticate`), then every input goes through `inputs`; errors
are JSON ``{"error": "...", "problems": [...]}`` with 400, 401, 403, 404, 409,
413, 415 or 422 (`inputs` says which is which); an unexpected failure is a 500
in the same shape, its traceback in the server's log only.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from pykueue.api import manifests
from pykueue.errors import AlreadyExists, Conflict, InputError, NotFound, ParseError, ValidationError
from pykueue.standalone.http import apply_parsing, applying, inputs, tenant_limits
from pykueue.standalone.http.context import ApiError, ServerContext, attach
from pykueue.standalone.http.routes import dashboard as dashboard_routes
from pykueue.standalone.http.routes import (
    health,
    identities,
    logs,
    objects,
    policy,
    rows,
    server,
    usage,
    workloads,
)
from pykueue.views import dashboard

__all__ = ["ApiError", "ServerContext", "create_app"]

log = logging.getLogger(__name__)


def _error(status: int, message: str, problems: list[str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "problems": problems or []}, status_code=status)


def _handlers(app: FastAPI) -> None:
    async def refused_at_boundary(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, inputs.InputRefused)
        return _error(exc.status, exc.message, exc.problems)

    async def too_many(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, tenant_limits.TooManyRequests)
        response = _error(exc.status, exc.message, exc.problems)
        if exc.retry_after:
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    async def refused(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, applying.Refused)
        return _error(403, "refused", exc.problems)

    async def too_large(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, apply_parsing.TooLarge)
        return _error(413, "an object is too large", exc.problems)

    async def input_error(_: Request, exc: Exception) -> Response:
        if isinstance(exc, ValidationError):
            return _error(422, "invalid input", [str(p) for p in exc.problems])
        if isinstance(exc, ParseError):
            return _error(400, "the input cannot be read", [str(exc)])
        return _error(400, str(exc), [str(exc)])

    async def request_values(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = [
            f"{manifests.format_loc(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in exc.errors()
        ]
        return _error(422, "the request's values do not fit this route", problems)

    async def routing(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        return _error(exc.status_code, str(exc.detail))

    async def not_found(_: Request, exc: Exception) -> Response:
        return _error(404, str(exc))

    async def conflict(_: Request, exc: Exception) -> Response:
        return _error(409, str(exc))

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal error: the server's log has the details")

    app.add_exception_handler(inputs.InputRefused, refused_at_boundary)
    app.add_exception_handler(tenant_limits.TooManyRequests, too_many)
    app.add_exception_handler(applying.Refused, refused)
    app.add_exception_handler(apply_parsing.TooLarge, too_large)
    app.add_exception_handler(InputError, input_error)
    app.add_exception_handler(RequestValidationError, request_values)
    app.add_exception_handler(StarletteHTTPException, routing)
    app.add_exception_handler(NotFound, not_found)
    app.add_exception_handler(Conflict, conflict)
    app.add_exception_handler(AlreadyExists, conflict)
    app.add_exception_handler(Exception, unexpected)


def create_app(ctx: ServerContext) -> FastAPI:
    """The API over ``ctx``: every router, in an order where no path shadows another."""
    app = FastAPI(title="pykueue", docs_url=None, redoc_url=None, openapi_url=None)
    attach(app, ctx)
    _handlers(app)
    for routes in (health, server, usage, objects, workloads, logs, identities, policy):
        app.include_router(routes.router)
    dashboard.add_routes(app, dashboard_routes.document, dashboard_routes.one_object)
    # Last: a catch-all path must not shadow /api/v1/identities and the other fixed routes.
    app.include_router(rows.router)
    return app
