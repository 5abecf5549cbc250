"""The HTTP API of standalone pykueue (FastAPI): everything the CLI does goes through here.

    GET    /healthz                                  no token needed
    GET    /api/v1/whoami | /api/v1/node | /api/v1/events?after=N
    GET    /api/v1/{clusterqueues|localqueues|workloads|jobs}      rows for `pykueue get`
    GET    /api/v1/objects/{kind}[/{namespace}/{name}]             stored manifests ("_" = no namespace)
    DELETE /api/v1/objects/{kind}/{namespace}/{name}
    POST   /api/v1/apply          {"files": [{"name", "text"}]}    all or nothing (see applying)
    GET    /api/v1/describe/workload/{namespace}/{name}            why it waits, its position
    GET    /api/v1/logs/{namespace}/{name}                         a job's pod logs
    POST   /api/v1/{stop|resume}  {"kind": "workload"|"clusterqueue", "namespace", "name"}
    POST   /api/v1/identities     {"name", "role", "namespaces", "priorityClasses"} -> a new token

Every request but /healthz carries ``Authorization: Bearer <token>``. Errors
are JSON ``{"error": "...", "problems": [...]}`` with 400 (bad input), 401
(no or unknown token), 403 (not allowed, and why), 404 and 409; never a
traceback.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from pykueue.api import defaults
from pykueue.controllers import jobframework
from pykueue.controllers.executor import LocalExecutor
from pykueue.controllers.node import Node
from pykueue.controllers.standalone import StandaloneManager
from pykueue.controllers.workloads import StandaloneAdmission
from pykueue.errors import AlreadyExists, Conflict, InputError, NotFound, ValidationError
from pykueue.server import applying, auth, views
from pykueue.store.base import Key, Manifest

ROW_KINDS = {
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "workloads": "Workload",
    "jobs": "Job",
}


@dataclass
class ServerContext:
    """Everything the routes need, owned by the runtime."""

    store: Any  # a SQLiteStore (transactions are needed by apply)
    admission: StandaloneAdmission
    manager: StandaloneManager
    executor: LocalExecutor
    authenticator: auth.Authenticator
    node: Node
    data_dir: Path
    events: list[dict[str, Any]] = field(default_factory=list)


class ApiError(Exception):
    def __init__(self, status: int, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.problems = problems or []


def _error(status: int, message: str, problems: list[str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "problems": problems or []}, status_code=status)


def create_app(ctx: ServerContext) -> FastAPI:
    app = FastAPI(title="pykueue", docs_url=None, redoc_url=None, openapi_url=None)
    registry = jobframework.default_registry()

    async def on_api_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return _error(exc.status, exc.message, exc.problems)

    async def on_refused(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, applying.Refused)
        return _error(403, "refused", exc.problems)

    async def on_input_error(_: Request, exc: Exception) -> Response:
        if isinstance(exc, ValidationError):
            return _error(400, "invalid input", [str(p) for p in exc.problems])
        return _error(400, str(exc), [str(exc)])

    async def on_not_found(_: Request, exc: Exception) -> Response:
        return _error(404, str(exc))

    async def on_conflict(_: Request, exc: Exception) -> Response:
        return _error(409, str(exc))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(applying.Refused, on_refused)
    app.add_exception_handler(InputError, on_input_error)
    app.add_exception_handler(NotFound, on_not_found)
    app.add_exception_handler(Conflict, on_conflict)
    app.add_exception_handler(AlreadyExists, on_conflict)

    async def caller(request: Request) -> auth.Identity:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not token:
            raise ApiError(401, "no token: pass --token, set PYKUEUE_TOKEN, or run `pykueue up` to write one")
        identity = await ctx.authenticator.identify(token)
        if identity is None:
            raise ApiError(401, "unknown token")
        return identity

    def need_admin(identity: auth.Identity, what: str) -> None:
        if not identity.is_admin:
            raise ApiError(403, f"tenant {identity.name} may not {what}: only admins may")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/v1/whoami")
    async def whoami(request: Request) -> dict[str, Any]:
        return (await caller(request)).as_dict()

    @app.get("/api/v1/node")
    async def node(request: Request) -> dict[str, Any]:
        await caller(request)
        return {**ctx.node.describe(), "devicesHeld": dict(ctx.executor.devices.held)}

    @app.get("/api/v1/events")
    async def events(request: Request, after: int = 0) -> list[dict[str, Any]]:
        await caller(request)
        return ctx.events[after:]

    @app.get("/api/v1/{rows}")
    async def rows(request: Request, rows: str, namespace: str | None = None) -> list[dict[str, Any]]:
        identity = await caller(request)
        kind = ROW_KINDS.get(rows)
        if kind is None:
            raise ApiError(404, f"unknown list {rows!r}: choose one of {', '.join(ROW_KINDS)}")
        items, _ = await ctx.store.list(kind, namespace)
        items = [i for i in items if auth.may_read(identity, kind, i["metadata"].get("namespace", ""))]
        if kind == "ClusterQueue":
            return [views.cluster_queue_row(ctx.admission, i) for i in items]
        if kind == "LocalQueue":
            return [views.local_queue_row(ctx.admission, i) for i in items]
        if kind == "Workload":
            return [views.workload_row(i) for i in items]
        return [views.job_row(i) for i in items]

    @app.get("/api/v1/objects/{kind}")
    async def list_objects(request: Request, kind: str, namespace: str | None = None) -> list[Manifest]:
        identity = await caller(request)
        items, _ = await ctx.store.list(kind, namespace)
        return [i for i in items if auth.may_read(identity, kind, i["metadata"].get("namespace", ""))]

    @app.get("/api/v1/objects/{kind}/{namespace}/{name}")
    async def get_object(request: Request, kind: str, namespace: str, name: str) -> Manifest:
        identity = await caller(request)
        ns = "" if namespace == "_" else namespace
        if not auth.may_read(identity, kind, ns):
            raise ApiError(403, f"tenant {identity.name} may not read {kind} objects in namespace {ns}")
        obj: Manifest = await ctx.store.get(kind, ns, name)
        return obj

    @app.delete("/api/v1/objects/{kind}/{namespace}/{name}")
    async def delete_object(request: Request, kind: str, namespace: str, name: str) -> dict[str, str]:
        identity = await caller(request)
        ns = "" if namespace == "_" else namespace
        if not ns and defaults.is_namespaced(kind):
            ns = "default"
        stored = await ctx.store.get(kind, ns, name)
        why = auth.write_refusal(identity, stored)
        if why:
            raise ApiError(403, why)
        await ctx.store.delete(kind, ns, name)
        return {"deleted": str(Key(kind, ns, name))}

    @app.post("/api/v1/apply")
    async def apply(request: Request) -> dict[str, Any]:
        identity = await caller(request)
        body = await request.json()
        files = body.get("files") if isinstance(body, dict) else None
        if not isinstance(files, list):
            raise ApiError(400, 'the body must be {"files": [{"name": ..., "text": ...}]}')
        result = await applying.apply(ctx.store, identity, files)
        return {"results": result.actions}

    async def find_workload(
        identity: auth.Identity, namespace: str, name: str
    ) -> tuple[Manifest, Manifest | None]:
        if not auth.may_read(identity, "Workload", namespace):
            raise ApiError(403, f"tenant {identity.name} may not read workloads in namespace {namespace}")
        try:
            workload: Manifest = await ctx.store.get("Workload", namespace, name)
        except NotFound:
            pass
        else:
            owner = registry.owner_of(workload)
            job = None
            if owner is not None:
                with contextlib.suppress(NotFound):
                    job = await ctx.store.get(owner[0].kind, namespace, str(owner[1].get("name", "")))
            return workload, job
        try:
            job = await ctx.store.get("Job", namespace, name)
        except NotFound:
            raise ApiError(404, f"no workload or job named {name} in namespace {namespace}") from None
        workload_name = jobframework.workload_name("Job", name, str(job["metadata"].get("uid", "")))
        try:
            return await ctx.store.get("Workload", namespace, workload_name), job
        except NotFound:
            raise ApiError(
                404, f"job {namespace}/{name} has no workload yet; try again in a moment"
            ) from None

    @app.get("/api/v1/describe/workload/{namespace}/{name}")
    async def describe(request: Request, namespace: str, name: str) -> dict[str, Any]:
        identity = await caller(request)
        workload, job = await find_workload(identity, namespace, name)
        return views.describe_workload(ctx.admission, workload, job)

    @app.get("/api/v1/logs/{namespace}/{name}")
    async def logs(request: Request, namespace: str, name: str) -> PlainTextResponse:
        identity = await caller(request)
        if not auth.may_read(identity, "Job", namespace):
            raise ApiError(403, f"tenant {identity.name} may not read logs in namespace {namespace}")
        job_name = name
        with contextlib.suppress(NotFound):
            owner = registry.owner_of(await ctx.store.get("Workload", namespace, name))
            job_name = str(owner[1].get("name", name)) if owner is not None else name
        folder = ctx.data_dir / "logs" / namespace / job_name
        if not folder.is_dir():
            try:
                await ctx.store.get("Job", namespace, job_name)
            except NotFound:
                raise ApiError(404, f"no job named {job_name} in namespace {namespace}") from None
            return PlainTextResponse("")
        parts = []
        for path in sorted(folder.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0):
            parts.append(path.read_text(errors="replace"))
        return PlainTextResponse("".join(parts))

    async def set_active(request: Request, active: bool) -> dict[str, str]:
        identity = await caller(request)
        body = await request.json()
        kind = str(body.get("kind", "")).lower()
        name = str(body.get("name", ""))
        if kind == "workload":
            namespace = str(body.get("namespace") or "default")
            workload, _ = await find_workload(identity, namespace, name)
            why = auth.write_refusal(identity, workload)
            if why:
                raise ApiError(403, why)
            updated = copy.deepcopy(workload)
            updated["spec"]["active"] = active
            await ctx.store.update(updated)
            return {"workload": f"{namespace}/{workload['metadata']['name']}", "active": str(active).lower()}
        if kind == "clusterqueue":
            need_admin(identity, "stop or resume ClusterQueues")
            cq = await ctx.store.get("ClusterQueue", "", name)
            updated = copy.deepcopy(cq)
            updated["spec"]["stopPolicy"] = "None" if active else "Hold"
            await ctx.store.update(updated)
            return {"clusterQueue": name, "stopPolicy": updated["spec"]["stopPolicy"]}
        raise ApiError(400, f"cannot stop or resume {kind!r}: choose workload or clusterqueue")

    @app.post("/api/v1/stop")
    async def stop(request: Request) -> dict[str, str]:
        return await set_active(request, False)

    @app.post("/api/v1/resume")
    async def resume(request: Request) -> dict[str, str]:
        return await set_active(request, True)

    @app.post("/api/v1/identities")
    async def create_identity(request: Request) -> dict[str, Any]:
        identity = await caller(request)
        need_admin(identity, "create identities")
        body = await request.json()
        role = str(body.get("role", auth.TENANT))
        if role not in (auth.ADMIN, auth.TENANT):
            raise ApiError(400, f"role must be admin or tenant, not {role!r}")
        new = auth.Identity(
            name=str(body.get("name", "")),
            role=role,
            namespaces=tuple(body.get("namespaces") or ()),
            priority_classes=tuple(body.get("priorityClasses") or ()),
        )
        if not new.name:
            raise ApiError(400, "an identity needs a name")
        token = auth.new_token()
        manifest = auth.identity_manifest(new, token)
        try:
            current = await ctx.store.get(auth.IDENTITY_KIND, "", new.name)
        except NotFound:
            await ctx.store.create(manifest)
        else:
            manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await ctx.store.update(manifest)
        await ctx.authenticator.refresh()
        return {"identity": new.as_dict(), "token": token}

    return app
