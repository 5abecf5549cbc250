"""A workload by its name or its job's:

GET  /api/v1/describe/workload/{namespace}/{name}   why it waits, its position
POST /api/v1/{stop|resume}  {"kind": "workload"|"clusterqueue", "namespace", "name"}
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import APIRouter, Request

from pykueue.api import access
from pykueue.standalone.http import inputs
from pykueue.standalone.http.context import ApiError, Caller, Ctx, ServerContext, need_admin
from pykueue.standalone.http.lookups import find_workload
from pykueue.store.base import authored_by
from pykueue.views import rows as views

router = APIRouter()


@router.get("/api/v1/describe/workload/{namespace}/{name}")
async def describe(ctx: Ctx, identity: Caller, namespace: str, name: str) -> dict[str, Any]:
    namespace, name = inputs.namespace_of(namespace), inputs.name_of(name)
    workload, job = await find_workload(ctx, identity, namespace, name)
    return views.describe_workload(ctx.admission, workload, job, ctx.estimates)


@router.post("/api/v1/stop")
async def stop(ctx: Ctx, identity: Caller, request: Request) -> dict[str, str]:
    return await _set_active(ctx, identity, request, False)


@router.post("/api/v1/resume")
async def resume(ctx: Ctx, identity: Caller, request: Request) -> dict[str, str]:
    return await _set_active(ctx, identity, request, True)


async def _set_active(
    ctx: ServerContext, identity: access.Identity, request: Request, active: bool
) -> dict[str, str]:
    """A workload's ``spec.active``, or a ClusterQueue's ``stopPolicy`` (admins only)."""
    body = await inputs.read_body(request, inputs.ActivationRequest)
    if body.kind == "workload":
        workload, _ = await find_workload(ctx, identity, body.namespace, body.name)
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
