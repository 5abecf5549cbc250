"""GET /api/v1/logs/{namespace}/{name}: a job's (or JobSet's) pod logs; a MultiKueue job's from its worker."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from pykueue.api import access
from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER
from pykueue.errors import NotFound, StoreError
from pykueue.multikueue.standalone_workers import StandaloneMultiKueue
from pykueue.reconcilers import jobframework
from pykueue.standalone.http import inputs
from pykueue.standalone.http.context import ApiError, Caller, Ctx, ServerContext
from pykueue.standalone.http.lookups import find_job
from pykueue.standalone.node.executor import log_folder
from pykueue.store.base import Manifest

router = APIRouter()


@router.get("/api/v1/logs/{namespace}/{name}")
async def logs(ctx: Ctx, identity: Caller, namespace: str, name: str) -> PlainTextResponse:
    namespace, name = inputs.namespace_of(namespace), inputs.name_of(name)
    if not access.may_read(identity, "Job", namespace):
        raise ApiError(403, f"tenant {identity.name} may not read logs in namespace {namespace}")
    job = await find_job(ctx, namespace, name)
    if job is None:
        raise ApiError(404, f"no job named {name} in namespace {namespace}")
    meta = job["metadata"]
    folder = log_folder(ctx.data_dir, namespace, str(meta["name"]), str(meta.get("uid") or ""))
    parts = []
    paths = sorted(folder.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
    for path in paths if folder.is_dir() else []:
        parts.append(path.read_text(errors="replace"))
    if not paths and (job.get("spec") or {}).get("managedBy") == MULTIKUEUE_CONTROLLER:
        return PlainTextResponse(await _worker_logs(ctx, job))
    return PlainTextResponse("".join(parts))


async def _worker_logs(ctx: ServerContext, job: Manifest) -> str:
    """A MultiKueue job's logs, from the worker running it (once it finished, they are kept here)."""
    meta = job["metadata"]
    namespace = str(meta.get("namespace") or "")
    kind = str(job.get("kind") or "Job")  # a Workload's name carries its job's kind
    workload_name = jobframework.workload_name(kind, str(meta["name"]), str(meta.get("uid") or ""))
    try:
        workload = await ctx.store.get("Workload", namespace, workload_name)
    except NotFound:
        return ""
    worker = str((workload.get("status") or {}).get("clusterName") or "")
    checks = ctx.manager.multikueue_checks
    if not worker or not isinstance(checks, StandaloneMultiKueue):
        return ""  # not on a worker yet
    client = checks.clusters.client(worker)
    if client is None:
        raise ApiError(502, f"job {namespace}/{meta['name']} runs on worker {worker}, which does not answer")
    try:
        return await client.logs(namespace, str(meta["name"]))
    except NotFound:
        return ""
    except StoreError as exc:
        raise ApiError(
            502, f"cannot read the logs of job {namespace}/{meta['name']} on worker {worker}: {exc}"
        ) from None
