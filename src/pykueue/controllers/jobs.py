"""Job integration: one Workload per job, and the job started or stopped as the Workload says.

A job kind plugs in through one small protocol, `JobAdapter` (as upstream's
jobframework ``GenericJob``): how to read its pod sets and queue, how to run
it with an admission, how to stop it, and whether it finished. The registry is
explicit (`ADAPTERS`); nothing registers itself on import.

`JobReconciler` is the generic loop, for any adapter:

    Job created (suspended) ──▶ Workload created, owned by the Job
    Workload admitted       ──▶ adapter.run(job, admission): unsuspended, counts and flavors injected
    Workload evicted        ──▶ adapter.stop(job): suspended again (the executor stops its pods)
    Job finished            ──▶ Workload Finished condition (Succeeded / Failed): quota released
    Job deleted             ──▶ its Workload deleted

It never starts processes itself: the local executor runs an unsuspended Job,
as kubelet and the job controller do in a cluster. Every write carries the
resourceVersion last seen; a conflict just means the next event brings the
fresh object and the job is reconciled again.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pykueue.controllers.workload_status import is_finished
from pykueue.errors import AlreadyExists, Conflict, NotFound
from pykueue.store.base import Key, Manifest, Store, WatchEvent

log = logging.getLogger(__name__)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
FLAVORS_ANNOTATION = "pykueue.io/flavors"
STOP_REASON_ANNOTATION = "pykueue.io/stop-reason"


def _now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: Manifest, kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions", []):
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_admitted(workload: Manifest) -> bool:
    status = workload.get("status") or {}
    admitted = condition(workload, "Admitted")
    return bool(status.get("admission")) and admitted is not None and admitted.get("status") == "True"


class JobAdapter(Protocol):
    """What the reconciler needs to know about one job kind."""

    kind: str
    api_version: str

    def workload_name(self, job: Manifest) -> str: ...

    def queue_name(self, job: Manifest) -> str: ...

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        """The Workload's podSets: name, count, template (and minCount for partial admission)."""
        ...

    def priority_class_ref(self, job: Manifest) -> Manifest | None: ...

    def is_suspended(self, job: Manifest) -> bool: ...

    def run(self, job: Manifest, admission: Manifest) -> Manifest:
        """The job as it should be to run with ``admission`` (unsuspended, counts and flavors set)."""
        ...

    def stop(self, job: Manifest, reason: str) -> Manifest:
        """The job suspended again."""
        ...

    def finished(self, job: Manifest) -> tuple[bool, bool, str]:
        """(finished, succeeded, message)."""
        ...


class BatchJobAdapter:
    """batch/v1 Job: one pod set, ``count = parallelism`` (capped by completions)."""

    kind = "Job"
    api_version = "batch/v1"

    def workload_name(self, job: Manifest) -> str:
        return f"job-{job['metadata']['name']}"[:253]

    def queue_name(self, job: Manifest) -> str:
        return str((job["metadata"].get("labels") or {}).get(QUEUE_LABEL, ""))

    def pod_sets(self, job: Manifest) -> list[Manifest]:
        spec = job.get("spec") or {}
        parallelism = int(spec["parallelism"]) if spec.get("parallelism") is not None else 1
        completions = spec.get("completions")
        count = min(parallelism, int(completions)) if completions is not None else parallelism
        pod_set: Manifest = {
            "name": "main",
            "count": count,
            "template": copy.deepcopy(spec.get("template", {})),
        }
        minimum = (job["metadata"].get("annotations") or {}).get(MIN_PARALLELISM)
        if minimum is not None and str(minimum).isdigit() and 0 < int(minimum) < count:
            pod_set["minCount"] = int(minimum)
        return [pod_set]

    def priority_class_ref(self, job: Manifest) -> Manifest | None:
        name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if name:
            return {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
        pod_class = ((job.get("spec") or {}).get("template") or {}).get("spec", {}).get("priorityClassName")
        if pod_class:
            return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pod_class}
        return None

    def is_suspended(self, job: Manifest) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def run(self, job: Manifest, admission: Manifest) -> Manifest:
        updated = copy.deepcopy(job)
        assignments = admission.get("podSetAssignments") or [{}]
        first = assignments[0]
        updated["spec"]["suspend"] = False
        if first.get("count") is not None:
            # Partial admission: the job runs with the count it was admitted with.
            updated["spec"]["parallelism"] = int(first["count"])
        annotations = updated["metadata"].setdefault("annotations", {})
        annotations[FLAVORS_ANNOTATION] = json.dumps(first.get("flavors") or {}, sort_keys=True)
        annotations.pop(STOP_REASON_ANNOTATION, None)
        return updated

    def stop(self, job: Manifest, reason: str) -> Manifest:
        updated = copy.deepcopy(job)
        updated["spec"]["suspend"] = True
        updated["metadata"].setdefault("annotations", {})[STOP_REASON_ANNOTATION] = reason
        return updated

    def finished(self, job: Manifest) -> tuple[bool, bool, str]:
        for kind, succeeded in (("Complete", True), ("Failed", False)):
            cond = condition(job, kind)
            if cond is not None and cond.get("status") == "True":
                return True, succeeded, str(cond.get("message") or cond.get("reason") or kind)
        return False, False, ""


ADAPTERS: dict[str, JobAdapter] = {"Job": BatchJobAdapter()}


def owner_of(workload: Manifest) -> Key | None:
    for ref in workload["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ADAPTERS and ref.get("controller", True):
            return Key(str(ref["kind"]), str(workload["metadata"].get("namespace") or ""), str(ref["name"]))
    return None


@dataclass
class JobReconciler:
    """Keeps every job and its Workload in step."""

    store: Store
    adapters: dict[str, JobAdapter] = field(default_factory=lambda: dict(ADAPTERS))
    record: Callable[[str], None] = lambda message: None
    jobs: dict[Key, Manifest] = field(default_factory=dict)
    workloads: dict[Key, Manifest] = field(default_factory=dict)
    _dirty: set[Key] = field(default_factory=set)

    async def sync(self) -> dict[str, str]:
        versions: dict[str, str] = {}
        for kind in self.adapters:
            items, versions[kind] = await self.store.list(kind)
            for job in items:
                self.jobs[Key.of(job)] = job
                self._dirty.add(Key.of(job))
        items, versions["Workload"] = await self.store.list("Workload")
        for wl in items:
            self.workloads[Key.of(wl)] = wl
        return versions

    def handle(self, event: WatchEvent) -> None:
        obj = event.object
        key = Key.of(obj)
        table = self.workloads if key.kind == "Workload" else self.jobs
        if event.type == "DELETED":
            table.pop(key, None)
        else:
            current = table.get(key)
            if current is not None and _version(current) > _version(obj):
                return
            table[key] = obj
        if key.kind == "Workload":
            owner = owner_of(obj)
            if owner is not None:
                self._dirty.add(owner)
        else:
            self._dirty.add(key)

    async def reconcile_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty, key=str):
            try:
                await self.reconcile(key)
            except (Conflict, NotFound):
                pass  # a newer version is on its way through the watch
            except AlreadyExists:
                pass

    async def reconcile(self, key: Key) -> None:
        adapter = self.adapters[key.kind]
        job = self.jobs.get(key)
        if job is None:
            for wl_key, wl in list(self.workloads.items()):
                if owner_of(wl) == key:
                    with contextlib.suppress(NotFound):
                        await self.store.delete("Workload", wl_key.namespace, wl_key.name)
            return
        wl_key = Key("Workload", key.namespace, adapter.workload_name(job))
        workload = self.workloads.get(wl_key)
        done, succeeded, message = adapter.finished(job)
        if workload is None:
            if done:
                return
            if not adapter.is_suspended(job):
                self._put_job(await self.store.update(adapter.stop(job, "no workload")))
                return
            created = await self.store.create(self._new_workload(adapter, job))
            self.workloads[wl_key] = created
            return
        if done:
            if not is_finished(workload):
                await self._finish(workload, succeeded, message)
            return
        if is_finished(workload):
            return
        admitted = is_admitted(workload)
        if admitted and adapter.is_suspended(job):
            self._put_job(await self.store.update(adapter.run(job, workload["status"]["admission"])))
            self.record(
                f"{key.namespace}/{key.name}: admitted to {workload['status']['admission']['clusterQueue']}"
            )
        elif not admitted and not adapter.is_suspended(job):
            evicted = condition(workload, "Evicted") or {}
            reason = str(evicted.get("message") or evicted.get("reason") or "quota reservation lost")
            self._put_job(await self.store.update(adapter.stop(job, reason)))
            self.record(f"{key.namespace}/{key.name}: stopped ({reason})")

    def _put_job(self, job: Manifest) -> None:
        self.jobs[Key.of(job)] = job

    def _new_workload(self, adapter: JobAdapter, job: Manifest) -> Manifest:
        meta = job["metadata"]
        spec: Manifest = {"queueName": adapter.queue_name(job), "podSets": adapter.pod_sets(job)}
        ref = adapter.priority_class_ref(job)
        if ref is not None:
            spec["priorityClassRef"] = ref
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": adapter.workload_name(job),
                "namespace": meta.get("namespace") or "default",
                "labels": {QUEUE_LABEL: adapter.queue_name(job)},
                "ownerReferences": [
                    {
                        "apiVersion": adapter.api_version,
                        "kind": adapter.kind,
                        "name": meta["name"],
                        "uid": meta.get("uid", ""),
                        "controller": True,
                    }
                ],
            },
            "spec": spec,
        }

    async def _finish(self, workload: Manifest, succeeded: bool, message: str) -> None:
        updated = copy.deepcopy(workload)
        status = updated.setdefault("status", {})
        conditions = [c for c in status.get("conditions", []) if c.get("type") != "Finished"]
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded" if succeeded else "Failed",
                "message": message[:32768],
                "lastTransitionTime": _now_text(),
            }
        )
        status["conditions"] = conditions
        written = await self.store.update_status(updated)
        self.workloads[Key.of(written)] = written
        name = workload["metadata"]["name"]
        self.record(
            f"{workload['metadata']['namespace']}/{name}: finished ({'succeeded' if succeeded else 'failed'})"
        )

    async def run(self, stop: asyncio.Event, tick_seconds: float = 0.5) -> None:
        versions = await self.sync()
        await self.reconcile_dirty()
        events: asyncio.Queue[WatchEvent] = asyncio.Queue()
        followers = [
            asyncio.create_task(_follow(self.store, kind, version, events))
            for kind, version in versions.items()
        ]
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    self.handle(await asyncio.wait_for(events.get(), timeout=tick_seconds))
                while not events.empty():
                    self.handle(events.get_nowait())
                await self.reconcile_dirty()
        finally:
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)


async def _follow(store: Store, kind: str, since: str, events: asyncio.Queue[WatchEvent]) -> None:
    async for event in store.watch(kind, since):
        await events.put(event)


def _version(obj: Manifest) -> int:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0
