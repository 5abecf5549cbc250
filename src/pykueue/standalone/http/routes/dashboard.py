"""GET /api/v1/dashboard: the dashboard's document for the caller, and one object's YAML for its
detail page (`views.dashboard` mounts them, with the page, through `document` and `one_object`)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request

from pykueue.errors import NotFound
from pykueue.standalone.http.context import authenticate, context, shown
from pykueue.store.base import Manifest
from pykueue.views import dashboard, dashboard_data


async def document(request: Request) -> dict[str, Any]:
    identity = await authenticate(request)
    ctx = context(request)
    workloads, _ = await ctx.store.list("Workload")
    estimated = ctx.estimates.estimated_start if ctx.estimates is not None else None
    return dashboard_data.build(ctx.admission.state, workloads, identity, ctx.history, time.time(), estimated)


async def one_object(request: Request, kind: str, path: str) -> Any:
    identity = await authenticate(request)
    ctx = context(request)

    async def lookup(found_kind: str, namespace: str, name: str) -> Manifest | None:
        try:
            return shown(await ctx.store.get(found_kind, namespace, name))
        except NotFound:
            return None

    return await dashboard.object_answer(ctx.admission.state, identity, kind, path, lookup)
