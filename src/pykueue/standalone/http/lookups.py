"""Finding what a request names: a job by its name or its Workload's, a Workload by its name or its job's.

`find_job` serves ``logs``; `find_workload` serves ``describe``, ``stop`` and ``resume``
(a user names whichever of the two they know).
"""

from __future__ import annotations

import contextlib

from pykueue.api import access
from pykueue.errors import NotFound
from pykueue.reconcilers import jobframework
from pykueue.standalone.http import inputs
from pykueue.standalone.http.context import ApiError, ServerContext
from pykueue.standalone.node.executor import RUNNABLE_KINDS
from pykueue.store.base import Manifest


async def find_job(ctx: ServerContext, namespace: str, name: str) -> Manifest | None:
    """The Job (or JobSet) called ``name``, or the one that owns the Workload called ``name``."""
    for kind in RUNNABLE_KINDS:
        with contextlib.suppress(NotFound):
            return await ctx.store.get(kind, namespace, name)
    with contextlib.suppress(NotFound, inputs.InputRefused):
        owner = ctx.registry.owner_of(await ctx.store.get("Workload", namespace, name))
        owner_name = str(owner[1].get("name", "")) if owner is not None else ""
        if owner is not None and owner[0].kind in RUNNABLE_KINDS and owner_name:
            # An owner reference is written by whoever wrote the Workload: only a job
            # that exists, in the same namespace, with the referenced uid, counts.
            job: Manifest = await ctx.store.get(owner[0].kind, namespace, inputs.name_of(owner_name))
            if str(job["metadata"].get("uid", "")) == str(owner[1].get("uid", "")):
                return job
    return None


async def find_workload(
    ctx: ServerContext, identity: access.Identity, namespace: str, name: str
) -> tuple[Manifest, Manifest | None]:
    """The Workload called ``name`` and its job, or the Workload of the job called ``name``."""
    if not access.may_read(identity, "Workload", namespace):
        raise ApiError(403, f"tenant {identity.name} may not read workloads in namespace {namespace}")
    try:
        workload: Manifest = await ctx.store.get("Workload", namespace, name)
    except NotFound:
        pass
    else:
        owner = ctx.registry.owner_of(workload)
        job = None
        if owner is not None:
            with contextlib.suppress(NotFound, inputs.InputRefused):
                job = await ctx.store.get(
                    owner[0].kind, namespace, inputs.name_of(str(owner[1].get("name", "")))
                )
        return workload, job
    job = await find_job(ctx, namespace, name)
    if job is None:
        raise ApiError(404, f"no workload or job named {name} in namespace {namespace}")
    workload_name = jobframework.workload_name(str(job["kind"]), name, str(job["metadata"].get("uid", "")))
    try:
        return await ctx.store.get("Workload", namespace, workload_name), job
    except NotFound:
        raise ApiError(404, f"job {namespace}/{name} has no workload yet; try again in a moment") from None
