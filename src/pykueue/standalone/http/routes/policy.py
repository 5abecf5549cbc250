"""Policy history (`http.policy`):

    GET  /api/v1/policy/history?kind=K&name=N&limit=L    recorded policy changes
    GET  /api/v1/policy/revisions/{rev}                  one, with its diff
    POST /api/v1/policy/rollback  {"revision": N, "apply": bool}   what-if; apply: admins only

Policy objects are readable by every identity, as their manifests are.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from pykueue.api import policy_history
from pykueue.engine import runtimes
from pykueue.standalone.http import inputs
from pykueue.standalone.http import policy as records
from pykueue.standalone.http.context import ApiError, Caller, Ctx, authenticate, need_admin

router = APIRouter()


@router.get("/api/v1/policy/history", dependencies=[Depends(authenticate)])
async def policy_history_rows(
    ctx: Ctx, kind: str | None = None, name: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    if kind is not None:
        kind = inputs.kind_of(kind, set(policy_history.POLICY_KINDS))
    if name is not None:
        name = inputs.name_of(name)
    if limit is not None and limit < 1:
        raise ApiError(422, "limit must be 1 or more", ["query.limit: at least 1"])
    return records.history(ctx.store, kind, name, limit)


@router.get("/api/v1/policy/revisions/{rev}", dependencies=[Depends(authenticate)])
async def policy_revision(ctx: Ctx, rev: int) -> dict[str, Any]:
    return records.show(ctx.store, rev)


@router.post("/api/v1/policy/rollback")
async def policy_rollback(ctx: Ctx, identity: Caller, request: Request) -> dict[str, Any]:
    body = await inputs.read_body(request, inputs.RollbackRequest)
    if body.apply:
        need_admin(identity, "change policies")
    model = ctx.estimates.model if ctx.estimates is not None else runtimes.Model()
    return await records.rollback(ctx.store, ctx.admission.state, model, identity, body.revision, body.apply)
