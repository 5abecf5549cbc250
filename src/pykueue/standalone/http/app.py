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
    GET    /dashboard, /dashboard/static/{file}                    the dashboard's page (no data, no identity)
    GET    /api/v1/identities                                      admins only
    POST   /api/v1/identities     {"name", "role", "namespaces", "priorityClasses", "unixUser"} -> a token
    POST   /api/v1/identities/{name}/revoke                        the identity's token stops working
    DELETE /api/v1/identities/{name}

A request on the server's Unix socket is its caller's Unix user (`peer`); any
other request carries ``Authorization: Bearer <token>``. Every input goes
through `inputs` first; errors are JSON ``{"error": "...", "problems": [...]}``
with 400, 401, 403, 404, 409, 413, 415 or 422 (`inputs` says which is which);
an unexpected failure is a 500 in the same shape, its traceback in the
server's log only.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from pykueue.api import access, defaults, manifests, policy_history, usage
from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER
from pykueue.engine import runtimes
from pykueue.errors import (
    AlreadyExists,
    Conflict,
    InputError,
    NotFound,
    ParseError,
    StoreError,
    ValidationError,
)
from pykueue.multikueue.standalone_workers import StandaloneMultiKueue
from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.estimating import StartEstimates
from pykueue.standalone.admission import StandaloneAdmission
from pykueue.standalone.http import apply_parsing, applying, auth, inputs, owners, policy, tenant_limits
from pykueue.standalone.http.limits import Limits
from pykueue.standalone.http.peer import PEER_STATE_KEY, Peer
from pykueue.standalone.manager import StandaloneManager
from pykueue.standalone.node.accounts import AccountError
from pykueue.standalone.node.executor import RUNNABLE_KINDS, LocalExecutor, log_folder
from pykueue.standalone.node.machine import Node
from pykueue.store.base import Key, Manifest, authored_by
from pykueue.views import dashboard, dashboard_data
from pykueue.views import rows as views

log = logging.getLogger(__name__)

ROW_KINDS = {
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "workloads": "Workload",
    "jobs": "Job",
}
OBJECT_KINDS = {*manifests.KNOWN_KINDS, access.IDENTITY_KIND}
HIDDEN_HOLDER = "a job of another namespace"


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
    owners: owners.Owners = field(default_factory=owners.Owners)
    events: list[dict[str, Any]] = field(default_factory=list)
    history: dashboard_data.UsageHistory = field(default_factory=dashboard_data.UsageHistory)
    # Estimated start times of pending workloads (refreshed in the background); None: off.
    estimates: StartEstimates | None = None
    limits: Limits = field(default_factory=Limits)
    rates: tenant_limits.RateLimiter | None = None  # made from ``limits`` when None

    def __post_init__(self) -> None:
        if self.rates is None:
            self.rates = tenant_limits.RateLimiter(self.limits)


class ApiError(inputs.InputRefused):
    """A refusal decided by a route (same shape as the boundary's)."""


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
    app = FastAPI(title="pykueue", docs_url=None, redoc_url=None, openapi_url=None)
    registry = integrations.registry(integrations.STANDALONE_FRAMEWORKS)
    _handlers(app)

    async def caller(request: Request) -> access.Identity:
        peer = request.scope.get("state", {}).get(PEER_STATE_KEY)
        if isinstance(peer, Peer):
            identity = await ctx.authenticator.identify_peer(peer.uid)
            if identity is None:
                raise ApiError(
                    403,
                    f"Unix user uid {peer.uid} has no pykueue identity; an admin can map one: "
                    f"pykueue token create NAME --unix-user USER -n NAMESPACE",
                )
            assert ctx.rates is not None
            ctx.rates.admit(identity)
            return identity
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not token:
            raise ApiError(401, "no token: pass --token, set PYKUEUE_TOKEN, or use the server's Unix socket")
        identity = await ctx.authenticator.identify(token)
        if identity is None:
            raise ApiError(401, "unknown or revoked token")
        assert ctx.rates is not None
        ctx.rates.admit(identity)
        return identity

    def need_admin(identity: access.Identity, what: str) -> None:
        if not identity.is_admin:
            raise ApiError(403, f"tenant {identity.name} may not {what}: only admins may")

    def may_see(identity: access.Identity, namespace: str) -> bool:
        return identity.is_admin or not namespace or namespace in identity.namespaces

    def optional_namespace(value: str | None) -> str | None:
        return None if value is None else inputs.namespace_of(value, where="query")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/v1/whoami")
    async def whoami(request: Request) -> dict[str, Any]:
        return (await caller(request)).as_dict()

    @app.get("/api/v1/node")
    async def node(request: Request) -> dict[str, Any]:
        identity = await caller(request)
        held = {
            device: holder if may_see(identity, _holder_namespace(holder)) else HIDDEN_HOLDER
            for device, holder in ctx.executor.devices.held.items()
        }
        return {**ctx.node.describe(), "devicesHeld": held}

    @app.get("/api/v1/events")
    async def events(request: Request, after: int = 0) -> list[dict[str, Any]]:
        identity = await caller(request)
        if after < 0:
            raise ApiError(422, "after must be 0 or more", ["query.after: at least 0"])
        return [e for e in ctx.events[after:] if may_see(identity, e.get("namespace", ""))]

    @app.get("/api/v1/usage")
    async def usage_ledger(
        request: Request, since: float = 0.0, until: float | None = None
    ) -> dict[str, Any]:
        """The usage ledger's runs in the window, with prices and quotas (`pykueue report`)."""
        identity = await caller(request)
        end = time.time() if until is None else until
        if not (math.isfinite(since) and math.isfinite(end)):
            raise ApiError(
                422, "the window is not a time", [f"query.since {since}, until {end}: seconds since 1970"]
            )
        if since < 0 or end < since:
            raise ApiError(
                422, "the window is empty", [f"query.since {since} must be 0 or more and before until {end}"]
            )
        runs = [
            r for r in ctx.store.usage_runs(since, end) if access.may_read(identity, "Workload", r.namespace)
        ]
        flavors, _ = await ctx.store.list("ResourceFlavor")
        queues, _ = await ctx.store.list("ClusterQueue")
        jobs, _ = await ctx.store.list("Job")
        readable = [j for j in jobs if access.may_read(identity, "Job", j["metadata"].get("namespace", ""))]
        return usage.document(runs, flavors, queues, usage.ran_seconds(readable), since, end, "standalone")

    @app.get("/api/v1/objects/{kind}")
    async def list_objects(request: Request, kind: str, namespace: str | None = None) -> list[Manifest]:
        identity = await caller(request)
        kind = inputs.kind_of(kind, OBJECT_KINDS)
        items, _ = await ctx.store.list(kind, optional_namespace(namespace))
        readable = [i for i in items if access.may_read(identity, kind, i["metadata"].get("namespace", ""))]
        return [_shown(i) for i in readable]

    @app.get("/api/v1/objects/{kind}/{namespace}/{name}")
    async def get_object(request: Request, kind: str, namespace: str, name: str) -> Manifest:
        identity = await caller(request)
        kind = inputs.kind_of(kind, OBJECT_KINDS)
        ns, name = inputs.namespace_of(namespace, allow_none=True), inputs.name_of(name)
        if not access.may_read(identity, kind, ns):
            raise ApiError(403, f"tenant {identity.name} may not read {kind} objects in namespace {ns}")
        return _shown(await ctx.store.get(kind, ns, name))

    @app.delete("/api/v1/objects/{kind}/{namespace}/{name}")
    async def delete_object(request: Request, kind: str, namespace: str, name: str) -> dict[str, str]:
        identity = await caller(request)
        kind = inputs.kind_of(kind, OBJECT_KINDS)
        ns, name = inputs.namespace_of(namespace, allow_none=True), inputs.name_of(name)
        if not ns and defaults.is_namespaced(kind):
            ns = "default"
        stored = await ctx.store.get(kind, ns, name)
        why = access.write_refusal(identity, stored)
        if why:
            raise ApiError(403, why)
        with authored_by(access.author(identity)):
            await ctx.store.delete(kind, ns, name)
        return {"deleted": str(Key(kind, ns, name))}

    @app.post("/api/v1/apply")
    async def apply(request: Request) -> dict[str, Any]:
        identity = await caller(request)
        body = await inputs.read_body(request, inputs.ApplyRequest)
        files = [(f.name, f.text) for f in body.files]
        result = await applying.apply(ctx.store, identity, files, ctx.owners, limits=ctx.limits)
        return {"results": result.actions}

    async def find_job(namespace: str, name: str) -> Manifest | None:
        """The Job (or JobSet) called ``name``, or the one that owns the Workload called ``name``."""
        for kind in RUNNABLE_KINDS:
            with contextlib.suppress(NotFound):
                return await ctx.store.get(kind, namespace, name)  # type: ignore[no-any-return]
        with contextlib.suppress(NotFound, inputs.InputRefused):
            owner = registry.owner_of(await ctx.store.get("Workload", namespace, name))
            owner_name = str(owner[1].get("name", "")) if owner is not None else ""
            if owner is not None and owner[0].kind in RUNNABLE_KINDS and owner_name:
                # An owner reference is written by whoever wrote the Workload: only a job
                # that exists, in the same namespace, with the referenced uid, counts.
                job: Manifest = await ctx.store.get(owner[0].kind, namespace, inputs.name_of(owner_name))
                if str(job["metadata"].get("uid", "")) == str(owner[1].get("uid", "")):
                    return job
        return None

    async def find_workload(
        identity: access.Identity, namespace: str, name: str
    ) -> tuple[Manifest, Manifest | None]:
        if not access.may_read(identity, "Workload", namespace):
            raise ApiError(403, f"tenant {identity.name} may not read workloads in namespace {namespace}")
        try:
            workload: Manifest = await ctx.store.get("Workload", namespace, name)
        except NotFound:
            pass
        else:
            owner = registry.owner_of(workload)
            job = None
            if owner is not None:
                with contextlib.suppress(NotFound, inputs.InputRefused):
                    job = await ctx.store.get(
                        owner[0].kind, namespace, inputs.name_of(str(owner[1].get("name", "")))
                    )
            return workload, job
        job = await find_job(namespace, name)
        if job is None:
            raise ApiError(404, f"no workload or job named {name} in namespace {namespace}")
        workload_name = jobframework.workload_name(
            str(job["kind"]), name, str(job["metadata"].get("uid", ""))
        )
        try:
            return await ctx.store.get("Workload", namespace, workload_name), job
        except NotFound:
            raise ApiError(
                404, f"job {namespace}/{name} has no workload yet; try again in a moment"
            ) from None

    @app.get("/api/v1/describe/workload/{namespace}/{name}")
    async def describe(request: Request, namespace: str, name: str) -> dict[str, Any]:
        identity = await caller(request)
        namespace, name = inputs.namespace_of(namespace), inputs.name_of(name)
        workload, job = await find_workload(identity, namespace, name)
        return views.describe_workload(ctx.admission, workload, job, ctx.estimates)

    @app.get("/api/v1/logs/{namespace}/{name}")
    async def logs(request: Request, namespace: str, name: str) -> PlainTextResponse:
        identity = await caller(request)
        namespace, name = inputs.namespace_of(namespace), inputs.name_of(name)
        if not access.may_read(identity, "Job", namespace):
            raise ApiError(403, f"tenant {identity.name} may not read logs in namespace {namespace}")
        job = await find_job(namespace, name)
        if job is None:
            raise ApiError(404, f"no job named {name} in namespace {namespace}")
        meta = job["metadata"]
        folder = log_folder(ctx.data_dir, namespace, str(meta["name"]), str(meta.get("uid") or ""))
        parts = []
        paths = sorted(folder.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
        for path in paths if folder.is_dir() else []:
            parts.append(path.read_text(errors="replace"))
        if not paths and (job.get("spec") or {}).get("managedBy") == MULTIKUEUE_CONTROLLER:
            return PlainTextResponse(await worker_logs(job))
        return PlainTextResponse("".join(parts))

    async def worker_logs(job: Manifest) -> str:
        """A MultiKueue job's logs, from the worker running it (once it finished, they are kept here)."""
        meta = job["metadata"]
        namespace = str(meta.get("namespace") or "")
        kind = str(job.get("kind") or "Job")  # a Workload's name carries its job's kind
        workload_name = jobframework.workload_name(kind, str(meta["name"]), str(meta.get("uid") or ""))
        try:
            workload = await ctx.store.get("Workload", namespace, workload_name)
        except NotFound:
            return ""
        worker = str((workload.get("status") or {}).get("clusterName") or "")
        checks = ctx.manager.multikueue_checks
        if not worker or not isinstance(checks, StandaloneMultiKueue):
            return ""  # not on a worker yet
        client = checks.clusters.client(worker)
        if client is None:
            raise ApiError(
                502, f"job {namespace}/{meta['name']} runs on worker {worker}, which does not answer"
            )
        try:
            return await client.logs(namespace, str(meta["name"]))
        except NotFound:
            return ""
        except StoreError as exc:
            raise ApiError(
                502, f"cannot read the logs of job {namespace}/{meta['name']} on worker {worker}: {exc}"
            ) from None

    async def set_active(request: Request, active: bool) -> dict[str, str]:
        identity = await caller(request)
        body = await inputs.read_body(request, inputs.ActivationRequest)
        if body.kind == "workload":
            workload, _ = await find_workload(identity, body.namespace, body.name)
            why = access.write_refusal(identity, workload)
            if why:
                raise ApiError(403, why)
            updated = copy.deepcopy(workload)
            updated["spec"]["active"] = active
            await ctx.store.update(updated)
            return {
                "workload": f"{body.namespace}/{workload['metadata']['name']}",
                "active": str(active).lower(),
            }
        need_admin(identity, "stop or resume ClusterQueues")
        cq = await ctx.store.get("ClusterQueue", "", body.name)
        updated = copy.deepcopy(cq)
        updated["spec"]["stopPolicy"] = "None" if active else "Hold"
        with authored_by(access.author(identity)):
            await ctx.store.update(updated)
        return {"clusterQueue": body.name, "stopPolicy": updated["spec"]["stopPolicy"]}

    @app.post("/api/v1/stop")
    async def stop(request: Request) -> dict[str, str]:
        return await set_active(request, False)

    @app.post("/api/v1/resume")
    async def resume(request: Request) -> dict[str, str]:
        return await set_active(request, True)

    @app.get("/api/v1/identities")
    async def list_identities(request: Request) -> list[dict[str, Any]]:
        need_admin(await caller(request), "list identities")
        items, _ = await ctx.store.list(access.IDENTITY_KIND)
        return [access.Identity.from_manifest(i).as_dict() for i in items]

    @app.post("/api/v1/identities")
    async def create_identity(request: Request) -> dict[str, Any]:
        need_admin(await caller(request), "create identities")
        body = await inputs.read_body(request, inputs.IdentityRequest)
        unix_user = ""
        if body.unixUser is not None:
            try:
                unix_user = ctx.owners.check_mapping(body.unixUser).name
            except AccountError as exc:
                raise ApiError(422, "invalid input", [f"body.unixUser: {exc}"]) from None
            taken = await ctx.authenticator.identify_peer(ctx.owners.check_mapping(unix_user).uid)
            if taken is not None and taken.name != body.name:
                raise ApiError(409, f"Unix user {unix_user} is already mapped to identity {taken.name}")
        new = access.Identity(
            name=body.name,
            role=body.role,
            namespaces=tuple(body.namespaces),
            priority_classes=tuple(body.priorityClasses),
            unix_user=unix_user,
        )
        token = auth.new_token()
        await _store_identity(auth.identity_manifest(new, token))
        return {"identity": new.as_dict(), "token": token}

    async def _store_identity(manifest: Manifest) -> None:
        try:
            current = await ctx.store.get(access.IDENTITY_KIND, "", manifest["metadata"]["name"])
        except NotFound:
            await ctx.store.create(manifest)
        else:
            manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await ctx.store.update(manifest)

    @app.post("/api/v1/identities/{name}/revoke")
    async def revoke_identity(request: Request, name: str) -> dict[str, str]:
        need_admin(await caller(request), "revoke tokens")
        name = inputs.name_of(name)
        current = await ctx.store.get(access.IDENTITY_KIND, "", name)
        # A hash of a token nobody was ever shown: the old token stops working, the identity stays.
        await _store_identity(
            auth.identity_manifest(access.Identity.from_manifest(current), auth.new_token())
        )
        return {"revoked": name}

    @app.delete("/api/v1/identities/{name}")
    async def delete_identity(request: Request, name: str) -> dict[str, str]:
        need_admin(await caller(request), "delete identities")
        name = inputs.name_of(name)
        await ctx.store.delete(access.IDENTITY_KIND, "", name)
        return {"deleted": str(Key(access.IDENTITY_KIND, "", name))}

    @app.get("/api/v1/policy/history")
    async def policy_history_rows(
        request: Request, kind: str | None = None, name: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        await caller(request)  # policy objects are readable by every identity, as their manifests are
        if kind is not None:
            kind = inputs.kind_of(kind, set(policy_history.POLICY_KINDS))
        if name is not None:
            name = inputs.name_of(name)
        if limit is not None and limit < 1:
            raise ApiError(422, "limit must be 1 or more", ["query.limit: at least 1"])
        return policy.history(ctx.store, kind, name, limit)

    @app.get("/api/v1/policy/revisions/{rev}")
    async def policy_revision(request: Request, rev: int) -> dict[str, Any]:
        await caller(request)
        return policy.show(ctx.store, rev)

    @app.post("/api/v1/policy/rollback")
    async def policy_rollback(request: Request) -> dict[str, Any]:
        identity = await caller(request)
        body = await inputs.read_body(request, inputs.RollbackRequest)
        if body.apply:
            need_admin(identity, "change policies")
        model = ctx.estimates.model if ctx.estimates is not None else runtimes.Model()
        return await policy.rollback(
            ctx.store, ctx.admission.state, model, identity, body.revision, body.apply
        )

    async def dashboard_document(request: Request) -> dict[str, Any]:
        identity = await caller(request)
        workloads, _ = await ctx.store.list("Workload")
        estimated = ctx.estimates.estimated_start if ctx.estimates is not None else None
        return dashboard_data.build(
            ctx.admission.state, workloads, identity, ctx.history, time.time(), estimated
        )

    dashboard.add_routes(app, dashboard_document)

    # Last: a catch-all path must not shadow /api/v1/identities and the other fixed routes.
    @app.get("/api/v1/{rows}")
    async def rows(request: Request, rows: str, namespace: str | None = None) -> list[dict[str, Any]]:
        identity = await caller(request)
        kind = ROW_KINDS.get(rows)
        if kind is None:
            raise ApiError(404, f"unknown list {rows[:64]!r}: choose one of {', '.join(ROW_KINDS)}")
        items, _ = await ctx.store.list(kind, optional_namespace(namespace))
        if kind == "Job":
            jobsets, _ = await ctx.store.list("JobSet", optional_namespace(namespace))
            items = sorted(
                [*items, *jobsets], key=lambda i: (i["metadata"].get("namespace", ""), i["metadata"]["name"])
            )
        items = [i for i in items if access.may_read(identity, kind, i["metadata"].get("namespace", ""))]
        if kind == "ClusterQueue":
            return [views.cluster_queue_row(ctx.admission, i) for i in items]
        if kind == "LocalQueue":
            return [views.local_queue_row(ctx.admission, i) for i in items]
        if kind == "Workload":
            return [views.workload_row(i, ctx.estimates) for i in items]
        return [views.job_row(i) for i in items]

    return app


def _holder_namespace(holder: str) -> str:
    """The namespace of a device holder, ``Job/<namespace>/<name>#<index>``."""
    parts = holder.split("/")
    return parts[1] if len(parts) >= 3 else ""


def _shown(obj: Manifest) -> Manifest:
    """A stored object as the API shows it: never a token's hash."""
    if obj.get("kind") == access.IDENTITY_KIND and "tokenSha256" in (obj.get("spec") or {}):
        obj = copy.deepcopy(obj)
        del obj["spec"]["tokenSha256"]
    return obj
