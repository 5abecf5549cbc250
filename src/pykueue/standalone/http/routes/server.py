"""The caller and the server: GET /api/v1/whoami, /api/v1/node, /api/v1/events?after=N."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from pykueue.standalone.http.context import ApiError, Caller, Ctx, may_see

router = APIRouter()
# Who holds a device, as a tenant sees it when the holder is not in its namespaces.
HIDDEN_HOLDER = "a job of another namespace"


@router.get("/api/v1/whoami")
async def whoami(identity: Caller) -> dict[str, Any]:
    return identity.as_dict()


@router.get("/api/v1/node")
async def node(ctx: Ctx, identity: Caller) -> dict[str, Any]:
    held = {
        device: holder if may_see(identity, holder_namespace(holder)) else HIDDEN_HOLDER
        for device, holder in ctx.executor.devices.held.items()
    }
    return {**ctx.node.describe(), "devicesHeld": held}


@router.get("/api/v1/events")
async def events(ctx: Ctx, identity: Caller, after: int = 0) -> list[dict[str, Any]]:
    if after < 0:
        raise ApiError(422, "after must be 0 or more", ["query.after: at least 0"])
    return [e for e in ctx.events[after:] if may_see(identity, e.get("namespace", ""))]


def holder_namespace(holder: str) -> str:
    """The namespace of a device holder, ``Job/<namespace>/<name>#<index>``."""
    parts = holder.split("/")
    return parts[1] if len(parts) >= 3 else ""
