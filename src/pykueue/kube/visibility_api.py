"""The visibility API as upstream serves it: an aggregated API behind the API server.

Two APIServices (``v1beta2.visibility.kueue.x-k8s.io`` and ``v1beta1...``) send

    GET /apis/visibility.kueue.x-k8s.io/{version}/clusterqueues/{cq}/pendingworkloads
    GET /apis/visibility.kueue.x-k8s.io/{version}/namespaces/{ns}/localqueues/{lq}/pendingworkloads
    GET /apis, /apis/visibility.kueue.x-k8s.io, /apis/visibility.kueue.x-k8s.io/{version}  (discovery)

to the controller's webhook server, so ``kubectl get --raw /apis/visibility...`` and
upstream's ``kubectl kueue list workload`` (POSITION IN QUEUE) work unchanged. Each
request passes three steps:

1. **authenticate**: only the API server's front proxy is believed (`front_proxy`):
   a client certificate from the request-header CA with an allowed name, the user in
   its headers. Anything else is 401: callers go through the API server;
2. **authorize**: a SubjectAccessReview for that user, ``get`` on
   ``clusterqueues/pendingworkloads`` (cluster scope) or ``localqueues/pendingworkloads``
   in the LocalQueue's namespace, so upstream's roles (``kueue-pending-workloads-cq-viewer-role``
   ...) decide, as upstream's delegated authorizer asks. Discovery needs only step 1;
3. **answer** from the engine (`visibility`), between passes, never during one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from pykueue.engine.state import State
from pykueue.kube import front_proxy
from pykueue.views import visibility

# (user, SubjectAccessReview resourceAttributes) -> allowed?
Authorizer = Callable[[front_proxy.User, dict[str, Any]], Awaitable[bool]]
PREFIX = f"/apis/{visibility.GROUP}"
PENDING = "pendingworkloads"


@dataclass(frozen=True)
class Source:
    """What the routes answer from: the engine (None until synced, or on a standby) and who may ask."""

    state: Callable[[], State | None]
    authorizer: Authorizer
    # pykueue's estimated starts, added to each item as on the metrics port (None: none).
    estimated: visibility.EstimatedStart | None = None


def status(code: int, reason: str, message: str) -> JSONResponse:
    """A ``Status`` as the API server words its own failures."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


def subject_access_reviewer(request: Callable[..., Awaitable[Any]]) -> Authorizer:
    """An `Authorizer` asking the API server (``request`` is `KubernetesStore.request`)."""

    async def allowed(user: front_proxy.User, attributes: dict[str, Any]) -> bool:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "resourceAttributes": attributes,
        }
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra.items()}
        review = await request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        return bool((review.get("status") or {}).get("allowed"))

    return allowed


def _resources() -> list[dict[str, Any]]:
    def resource(name: str, namespaced: bool, kind: str, verbs: list[str]) -> dict[str, Any]:
        singular = "" if "/" in name else name[:-1]
        return {
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": kind,
            "verbs": verbs,
        }

    return [
        resource("clusterqueues", False, "ClusterQueue", []),
        resource(f"clusterqueues/{PENDING}", False, "PendingWorkloadsSummary", ["get"]),
        resource("localqueues", True, "LocalQueue", []),
        resource(f"localqueues/{PENDING}", True, "PendingWorkloadsSummary", ["get"]),
    ]


def api_group() -> dict[str, Any]:
    """The group's discovery document (``APIGroup``), v1beta2 preferred."""
    versions = [{"groupVersion": f"{visibility.GROUP}/{v}", "version": v} for v in visibility.VERSIONS]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": visibility.GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    }


# How a summary is answered from the engine: (engine, offset, limit, apiVersion) -> the body, None if unknown.
Answer = Callable[[State, int, int, str], dict[str, Any] | None]


@dataclass(frozen=True)
class _Routes:
    """What the routes of `create_router` answer from, and the three steps of every request."""

    config: Callable[[], front_proxy.RequestHeaderConfig | None]
    authorizer: Authorizer
    state: Callable[[], State | None]
    estimated: visibility.EstimatedStart | None

    def authenticate(self, request: Request) -> front_proxy.User | JSONResponse:
        """Step 1: the user the API server's front proxy speaks for, or the 503/401 to send."""
        trusted = self.config()
        if trusted is None:
            return status(503, "ServiceUnavailable", "the API server's front-proxy settings are not read yet")
        user = front_proxy.identify(trusted, front_proxy.common_name(request.scope), request.headers)
        if user is None:
            return status(401, "Unauthorized", "only the API server's front proxy may call this server")
        return user

    async def summary(
        self,
        request: Request,
        version: str,
        attributes: dict[str, Any],
        page: tuple[int, int],
        answer: Answer,
    ) -> JSONResponse:
        """Authenticate, check the version and paging, authorize, then answer from the engine."""
        user = self.authenticate(request)
        if isinstance(user, JSONResponse):
            return user
        if version not in visibility.VERSIONS:
            return _no_version(version)
        paged = _paging(*page)
        if isinstance(paged, JSONResponse):
            return paged
        attributes = {"group": visibility.GROUP, "version": version, "verb": "get", **attributes}
        if not await self.authorizer(user, attributes):
            return _forbidden(user, attributes)
        engine = self.state()
        if engine is None:
            return status(
                503, "ServiceUnavailable", "pykueue is not the leader, or its caches are not synced"
            )
        body = answer(engine, *paged, f"{visibility.GROUP}/{version}")
        if body is None:
            # Upstream names the resource in the singular here.
            singular = attributes["resource"][:-1]
            return status(404, "NotFound", f'{singular}.{visibility.GROUP} "{attributes["name"]}" not found')
        return JSONResponse(body)


def _paging(offset: int, limit: int) -> tuple[int, int] | JSONResponse:
    """Upstream's options: ``limit`` 0 (or absent) means the default; negatives are refused."""
    for field, value in (("offset", offset), ("limit", limit)):
        if value < 0:
            return status(400, "BadRequest", f"PendingWorkloadOptions.{field}: must be >= 0, got {value}")
    return offset, limit or visibility.DEFAULT_LIMIT


def _forbidden(user: front_proxy.User, attributes: dict[str, Any]) -> JSONResponse:
    """The API server's words for a SubjectAccessReview that said no."""
    resource, name = attributes["resource"], attributes["name"]
    namespace = attributes.get("namespace")
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return status(
        403,
        "Forbidden",
        f'{resource}.{visibility.GROUP} "{name}" is forbidden: User "{user.name}" cannot get resource '
        f'"{resource}/{PENDING}" in API group "{visibility.GROUP}" {where}',
    )


def _no_version(version: str) -> JSONResponse:
    return status(404, "NotFound", f"the server could not find {visibility.GROUP}/{version}")


def create_router(
    config: Callable[[], front_proxy.RequestHeaderConfig | None],
    authorizer: Authorizer,
    state: Callable[[], State | None],
    estimated: visibility.EstimatedStart | None = None,
) -> APIRouter:
    """The routes; ``config`` None (not read yet) answers 503, as the API server then would."""
    routes = _Routes(config, authorizer, state, estimated)
    router = APIRouter()
    _add_summaries(router, routes)
    _add_discovery(router, routes)
    return router


def _add_summaries(router: APIRouter, routes: _Routes) -> None:
    """The pending workloads of a ClusterQueue, and of a LocalQueue."""

    @router.get(PREFIX + "/{version}/clusterqueues/{name}/" + PENDING)
    async def cluster_queue(
        version: str, name: str, request: Request, offset: int = 0, limit: int = visibility.DEFAULT_LIMIT
    ) -> JSONResponse:
        return await routes.summary(
            request,
            version,
            {"resource": "clusterqueues", "subresource": PENDING, "name": name},
            (offset, limit),
            lambda engine, first, count, api_version: visibility.cluster_queue_summary(
                engine, name, first, count, routes.estimated, api_version
            ),
        )

    @router.get(PREFIX + "/{version}/namespaces/{namespace}/localqueues/{name}/" + PENDING)
    async def local_queue(
        version: str,
        namespace: str,
        name: str,
        request: Request,
        offset: int = 0,
        limit: int = visibility.DEFAULT_LIMIT,
    ) -> JSONResponse:
        return await routes.summary(
            request,
            version,
            {"resource": "localqueues", "subresource": PENDING, "name": name, "namespace": namespace},
            (offset, limit),
            lambda engine, first, count, api_version: visibility.local_queue_summary(
                engine, namespace, name, first, count, routes.estimated, api_version
            ),
        )


def _add_discovery(router: APIRouter, routes: _Routes) -> None:
    """The discovery documents: authenticated, never authorized (they name no data)."""

    @router.get("/apis")
    async def groups(request: Request) -> JSONResponse:
        user = routes.authenticate(request)
        if isinstance(user, JSONResponse):
            return user
        return JSONResponse({"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group()]})

    @router.get(PREFIX)
    async def group(request: Request) -> JSONResponse:
        user = routes.authenticate(request)
        if isinstance(user, JSONResponse):
            return user
        return JSONResponse(api_group())

    @router.get(PREFIX + "/{version}")
    async def resources(version: str, request: Request) -> JSONResponse:
        user = routes.authenticate(request)
        if isinstance(user, JSONResponse):
            return user
        if version not in visibility.VERSIONS:
            return _no_version(version)
        return JSONResponse(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{visibility.GROUP}/{version}",
                "resources": _resources(),
            }
        )
