"""GET /api/v1/{clusterqueues|localqueues|workloads|jobs}?namespace=N: rows for `pykueue get`
(jobs: Jobs and JobSets). Included last: its path would shadow /api/v1/identities and the others."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from pykueue.api import access
from pykueue.standalone.http.context import ApiError, Caller, Ctx, optional_namespace
from pykueue.views import rows as views

router = APIRouter()
ROW_KINDS = {
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "workloads": "Workload",
    "jobs": "Job",
}


@router.get("/api/v1/{rows}")
async def rows(ctx: Ctx, identity: Caller, rows: str, namespace: str | None = None) -> list[dict[str, Any]]:
    kind = ROW_KINDS.get(rows)
    if kind is None:
        raise ApiError(404, f"unknown list {rows[:64]!r}: choose one of {', '.join(ROW_KINDS)}")
    items, _ = await ctx.store.list(kind, optional_namespace(namespace))
    if kind == "Job":
        jobsets, _ = await ctx.store.list("JobSet", optional_namespace(namespace))
        items = sorted(
            [*items, *jobsets], key=lambda i: (i["metadata"].get("namespace", ""), i["metadata"]["name"])
        )
    items = [i for i in items if access.may_read(identity, kind, i["metadata"].get("namespace", ""))]
    if kind == "ClusterQueue":
        return [views.cluster_queue_row(ctx.admission, i) for i in items]
    if kind == "LocalQueue":
        return [views.local_queue_row(ctx.admission, i) for i in items]
    if kind == "Workload":
        return [views.workload_row(i, ctx.estimates) for i in items]
    return [views.job_row(i) for i in items]
