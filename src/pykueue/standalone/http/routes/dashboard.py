"""GET /api/v1/dashboard: the dashboard's document for the caller (`views.dashboard` mounts it,
with the page, through `document`)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request

from pykueue.standalone.http.context import authenticate, context
from pykueue.views import dashboard_data


async def document(request: Request) -> dict[str, Any]:
    identity = await authenticate(request)
    ctx = context(request)
    workloads, _ = await ctx.store.list("Workload")
    estimated = ctx.estimates.estimated_start if ctx.estimates is not None else None
    return dashboard_data.build(ctx.admission.state, workloads, identity, ctx.history, time.time(), estimated)
