"""GET /api/v1/usage?since=S&until=U: the usage ledger's runs in the window (`pykueue report`)."""

from __future__ import annotations

import math
import time
from typing import Any

from fastapi import APIRouter

from pykueue.api import access, usage
from pykueue.standalone.http.context import ApiError, Caller, Ctx

router = APIRouter()


@router.get("/api/v1/usage")
async def usage_ledger(
    ctx: Ctx, identity: Caller, since: float = 0.0, until: float | None = None
) -> dict[str, Any]:
    """The usage ledger's runs in the window, with prices and quotas (`pykueue report`)."""
    end = time.time() if until is None else until
    if not (math.isfinite(since) and math.isfinite(end)):
        raise ApiError(
            422, "the window is not a time", [f"query.since {since}, until {end}: seconds since 1970"]
        )
    if since < 0 or end < since:
        raise ApiError(
            422, "the window is empty", [f"query.since {since} must be 0 or more and before until {end}"]
        )
    runs = [r for r in ctx.store.usage_runs(since, end) if access.may_read(identity, "Workload", r.namespace)]
    flavors, _ = await ctx.store.list("ResourceFlavor")
    queues, _ = await ctx.store.list("ClusterQueue")
    jobs, _ = await ctx.store.list("Job")
    readable = [j for j in jobs if access.may_read(identity, "Job", j["metadata"].get("namespace", ""))]
    return usage.document(runs, flavors, queues, usage.ran_seconds(readable), since, end, "standalone")
