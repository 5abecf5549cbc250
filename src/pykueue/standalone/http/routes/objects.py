"""Stored manifests, and apply:

GET    /api/v1/objects/{kind}[/{namespace}/{name}]   stored manifests ("_" = no namespace)
DELETE /api/v1/objects/{kind}/{namespace}/{name}
POST   /api/v1/apply   {"files": [{"name", "text"}]}  all or nothing (`applying`)
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from pykueue.api import access, defaults, manifests
from pykueue.standalone.http import applying, inputs
from pykueue.standalone.http.context import ApiError, Caller, Ctx, optional_namespace, shown
from pykueue.store.base import Key, Manifest, authored_by

router = APIRouter()
OBJECT_KINDS = {*manifests.KNOWN_KINDS, access.IDENTITY_KIND}


@router.get("/api/v1/objects/{kind}")
async def list_objects(ctx: Ctx, identity: Caller, kind: str, namespace: str | None = None) -> list[Manifest]:
    kind = inputs.kind_of(kind, OBJECT_KINDS)
    items, _ = await ctx.store.list(kind, optional_namespace(namespace))
    readable = [i for i in items if access.may_read(identity, kind, i["metadata"].get("namespace", ""))]
    return [shown(i) for i in readable]


@router.get("/api/v1/objects/{kind}/{namespace}/{name}")
async def get_object(ctx: Ctx, identity: Caller, kind: str, namespace: str, name: str) -> Manifest:
    kind = inputs.kind_of(kind, OBJECT_KINDS)
    ns, name = inputs.namespace_of(namespace, allow_none=True), inputs.name_of(name)
    if not access.may_read(identity, kind, ns):
        raise ApiError(403, f"tenant {identity.name} may not read {kind} objects in namespace {ns}")
    return shown(await ctx.store.get(kind, ns, name))


@router.delete("/api/v1/objects/{kind}/{namespace}/{name}")
async def delete_object(ctx: Ctx, identity: Caller, kind: str, namespace: str, name: str) -> dict[str, str]:
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


@router.post("/api/v1/apply")
async def apply(ctx: Ctx, identity: Caller, request: Request) -> dict[str, Any]:
    body = await inputs.read_body(request, inputs.ApplyRequest)
    files = [(f.name, f.text) for f in body.files]
    result = await applying.apply(ctx.store, identity, files, ctx.owners, limits=ctx.limits)
    return {"results": result.actions}
