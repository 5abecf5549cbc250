"""Identities and their tokens, admins only:

GET    /api/v1/identities
POST   /api/v1/identities     {"name", "role", "namespaces", "priorityClasses", "unixUser"} -> a token
POST   /api/v1/identities/{name}/revoke    the identity's token stops working
DELETE /api/v1/identities/{name}
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from pykueue.api import access
from pykueue.errors import NotFound
from pykueue.standalone.http import auth, inputs
from pykueue.standalone.http.context import ApiError, Caller, Ctx, ServerContext, need_admin
from pykueue.standalone.node.accounts import AccountError
from pykueue.store.base import Key, Manifest

router = APIRouter()


@router.get("/api/v1/identities")
async def list_identities(ctx: Ctx, identity: Caller) -> list[dict[str, Any]]:
    need_admin(identity, "list identities")
    items, _ = await ctx.store.list(access.IDENTITY_KIND)
    return [access.Identity.from_manifest(i).as_dict() for i in items]


@router.post("/api/v1/identities")
async def create_identity(ctx: Ctx, identity: Caller, request: Request) -> dict[str, Any]:
    need_admin(identity, "create identities")
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
    await _store_identity(ctx, auth.identity_manifest(new, token))
    return {"identity": new.as_dict(), "token": token}


@router.post("/api/v1/identities/{name}/revoke")
async def revoke_identity(ctx: Ctx, identity: Caller, name: str) -> dict[str, str]:
    need_admin(identity, "revoke tokens")
    name = inputs.name_of(name)
    current = await ctx.store.get(access.IDENTITY_KIND, "", name)
    # A hash of a token nobody was ever shown: the old token stops working, the identity stays.
    await _store_identity(
        ctx, auth.identity_manifest(access.Identity.from_manifest(current), auth.new_token())
    )
    return {"revoked": name}


@router.delete("/api/v1/identities/{name}")
async def delete_identity(ctx: Ctx, identity: Caller, name: str) -> dict[str, str]:
    need_admin(identity, "delete identities")
    name = inputs.name_of(name)
    await ctx.store.delete(access.IDENTITY_KIND, "", name)
    return {"deleted": str(Key(access.IDENTITY_KIND, "", name))}


async def _store_identity(ctx: ServerContext, manifest: Manifest) -> None:
    try:
        current = await ctx.store.get(access.IDENTITY_KIND, "", manifest["metadata"]["name"])
    except NotFound:
        await ctx.store.create(manifest)
    else:
        manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await ctx.store.update(manifest)
