"""What every route of the standalone API is handed: the server's context and the caller.

    ServerContext   the runtime's parts the routes use (store, engine, executor, ...)
    Ctx             that context, as a FastAPI dependency (the app keeps it in ``app.state``)
    Caller          the caller's `access.Identity`, as a FastAPI dependency (`authenticate`)

A route names ``ctx: Ctx`` and ``identity: Caller`` among its parameters; FastAPI
resolves both before the route runs, so a request without a valid caller is
refused (401/403, or 429 over the tenant's rate) before anything else about it
is looked at.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request

from pykueue.api import access
from pykueue.reconcilers import integrations, jobframework
from pykueue.reconcilers.estimating import StartEstimates
from pykueue.standalone.admission import StandaloneAdmission
from pykueue.standalone.http import auth, inputs, owners, tenant_limits
from pykueue.standalone.http.limits import Limits
from pykueue.standalone.http.peer import PEER_STATE_KEY, Peer
from pykueue.standalone.manager import StandaloneManager
from pykueue.standalone.node.executor import LocalExecutor
from pykueue.standalone.node.machine import Node
from pykueue.store.base import Manifest
from pykueue.store.sqlite import SQLiteStore
from pykueue.views import dashboard_data

# Where `create_app` keeps the context on the app (``app.state``).
STATE_KEY = "pykueue_context"


def _standalone_registry() -> jobframework.Registry:
    return integrations.registry(integrations.STANDALONE_FRAMEWORKS)


@dataclass
class ServerContext:
    """Everything the routes need, owned by the runtime."""

    store: SQLiteStore  # not any Store: apply needs transactions, policy and usage their records
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
    # The job kinds the local executor runs (Jobs and JobSets): whose owner a Workload names.
    registry: jobframework.Registry = field(default_factory=_standalone_registry)

    def __post_init__(self) -> None:
        if self.rates is None:
            self.rates = tenant_limits.RateLimiter(self.limits)


class ApiError(inputs.InputRefused):
    """A refusal decided by a route (same shape as the boundary's)."""


def attach(app: FastAPI, ctx: ServerContext) -> None:
    """Give ``app``'s routes ``ctx`` (through `context`)."""
    setattr(app.state, STATE_KEY, ctx)


def context(request: Request) -> ServerContext:
    """The dependency behind `Ctx`: the context `attach` gave the app."""
    ctx = getattr(request.app.state, STATE_KEY, None)
    if not isinstance(ctx, ServerContext):
        raise RuntimeError("the standalone API app has no ServerContext: build it with create_app")
    return ctx


Ctx = Annotated[ServerContext, Depends(context)]


async def authenticate(request: Request) -> access.Identity:
    """The caller: the Unix socket's peer, or the bearer token's identity; refused otherwise.

    Also the dependency behind `Caller`; each admitted caller counts once against its rate.
    """
    ctx = context(request)
    peer = request.scope.get("state", {}).get(PEER_STATE_KEY)
    if isinstance(peer, Peer):
        identity = await ctx.authenticator.identify_peer(peer.uid)
        if identity is None:
            raise ApiError(
                403,
                f"Unix user uid {peer.uid} has no pykueue identity; an admin can map one: "
                f"pykueue token create NAME --unix-user USER -n NAMESPACE",
            )
    else:
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


Caller = Annotated[access.Identity, Depends(authenticate)]


def need_admin(identity: access.Identity, what: str) -> None:
    if not identity.is_admin:
        raise ApiError(403, f"tenant {identity.name} may not {what}: only admins may")


def may_see(identity: access.Identity, namespace: str) -> bool:
    return identity.is_admin or not namespace or namespace in identity.namespaces


def optional_namespace(value: str | None) -> str | None:
    return None if value is None else inputs.namespace_of(value, where="query")


def shown(obj: Manifest) -> Manifest:
    """A stored object as the API shows it: never a token's hash."""
    if obj.get("kind") == access.IDENTITY_KIND and "tokenSha256" in (obj.get("spec") or {}):
        obj = copy.deepcopy(obj)
        del obj["spec"]["tokenSha256"]
    return obj
