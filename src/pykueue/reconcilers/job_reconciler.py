"""The job reconciler: one Workload per queue-labelled job, and the job run or stopped as it says.

    job event ─┐                      ┌─ no Workload yet      ─▶ suspend the job, create its Workload
    Workload ──┴─▶ dirty job keys ──▶ ├─ Workload admitted    ─▶ unsuspend, flavors and checks' podSetUpdates
                                      │                          injected; pods ready?
    event                             ├─ Workload evicted     ─▶ suspend; once no pod is left, tell the
                                      │                          admission controller (quota released)
                                      ├─ Workload not admitted─▶ suspend, clear startTime, restore template
                                      └─ job finished         ─▶ Workload Finished (its quota is released)
    job deleted ─▶ its Workloads deleted;  Workload whose owner job is gone ─▶ deleted

A job labelled (or annotated) ``kueue.x-k8s.io/prebuilt-workload-name`` gets no
Workload of its own: it waits, held, for the Workload of that name, becomes its
controller, and is then run by it as above. A pre-built Workload that another
object controls is left alone, and one that does not describe the job (its pod
sets, its time limit) is finished with reason OutOfSync, as upstream does.

The reconciler is level-triggered, like upstream's jobframework: each pass looks at
the job and its Workload as they are cached now and makes *one* write that brings
them closer to agreement. The write comes back as a watch event, which marks the
job dirty again, so a multi-step change (a Kubernetes Job's template may only
change while it is suspended and has no ``startTime``) is a chain of small,
idempotent passes, and a conflict (someone else wrote first) is no error: the
next event brings the fresh object.

The Workload's pod sets keep the template as it was when the Workload was made, so
stopping a job restores the template from them (nodeSelector, tolerations,
labels, annotations) and the parallelism from their counts. Workloads without an
owner (created directly) are not this reconciler's business: the admission
controller queues and admits them like any other.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pykueue.engine.intake import DEVICE_PROBLEM_ANNOTATION
from pykueue.errors import AlreadyExists, Conflict, InputError, NotFound, StoreError, ValidationError
from pykueue.reconcilers import dra, jobframework
from pykueue.reconcilers.jobframework import JOB_UID_LABEL, JobAdapter, PodSetInfo, Registry
from pykueue.store.base import Key, Manifest, Store, WatchEvent

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def condition(obj: Manifest, kind: str) -> Manifest | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def _true(obj: Manifest, kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def is_admitted(workload: Manifest) -> bool:
    """Quota reserved and every admission check passed: the job may run."""
    return bool((workload.get("status") or {}).get("admission")) and _true(workload, "Admitted")


def _with_check_updates(info: PodSetInfo, workload: Manifest) -> PodSetInfo:
    """What the admission checks ask of this pod set (e.g. the ProvisioningRequest check's
    consume-provisioning-request annotations) added to what its flavors ask."""
    for check in (workload.get("status") or {}).get("admissionChecks") or []:
        for update in check.get("podSetUpdates") or []:
            if update.get("name") == info.name:
                info = info.with_update(update, str(check.get("name", "")))
    return info


# As upstream finishes a pre-built Workload that does not describe its job.
# Upstream's Finished reason for a job that cannot be started (jobframework's FailedToStart).
FAILED_TO_START = "FailedToStart"
OUT_OF_SYNC = jobframework.Finished(
    False, "The prebuilt workload is out of sync with its user job", cause=jobframework.OUT_OF_SYNC
)


def _controller_of(obj: Manifest) -> Manifest | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def _describes(workload: Manifest, adapter: JobAdapter, job: Manifest) -> bool:
    """Whether a pre-built Workload queues the job as it is (pod sets and time limit; upstream's test)."""
    limit = (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
    return jobframework.equivalent_pod_sets(workload, adapter.pod_sets(job)) and (
        limit == jobframework.max_execution_seconds(job)
    )


def _uid(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


@dataclass
class JobReconciler:
    """Keeps every queue-labelled job of the registered kinds in step with its Workload."""

    store: Store
    registry: Registry
    # ResourceFlavor manifests by name, read when a Workload is admitted (the admission cache).
    flavors: Callable[[], Mapping[str, Manifest]]
    clock: Callable[[], datetime] = _utc_now
    # The value of a priority class by (kind, name), None when unknown (the engine's view).
    priority_of: Callable[[str, str], int | None] | None = None
    # False once the API server refused a write of jobs/status (RBAC without it).
    may_write_job_status: bool = True
    # An evicted workload's job has no pod left: the admission controller releases its quota
    # (asynchronous evictions: a victim keeps its quota until it really stopped, as upstream).
    on_job_stopped: Callable[[Key], None] | None = None
    # An admitted workload's pods became ready or stopped being ready (waitForPodsReady).
    on_pods_ready: Callable[[Key, bool], None] | None = None
    # A Kubernetes Event about a job (type, reason, message), as upstream's job reconciler records.
    on_event: Callable[[Manifest, str, str, str], object] | None = None
    _pods_ready: dict[Key, bool] = field(default_factory=dict)
    _stopped: dict[Key, str] = field(default_factory=dict)  # the eviction last reported, per workload
    # Which jobs are managed at all (the configuration's manageJobsWithoutQueueName and
    # managedJobsNamespaceSelector), and the labels of a namespace (None when unknown).
    settings: jobframework.Settings = field(default_factory=jobframework.Settings)
    namespace_labels: Callable[[str], Mapping[str, str] | None] = lambda _: None
    # Feature gate AssignQueueLabelsForPods: a started job's pod templates get its queues' labels.
    assign_queue_labels: bool = True
    jobs: dict[Key, Manifest] = field(default_factory=dict)
    workloads: dict[Key, Manifest] = field(default_factory=dict)
    dirty: set[Key] = field(default_factory=set)
    unserved: set[str] = field(default_factory=set)
    suspect_orphans: set[Key] = field(default_factory=set)
    _job_by_uid: dict[str, Key] = field(default_factory=dict)
    _workloads_by_owner: dict[str, set[Key]] = field(default_factory=dict)
    # A pre-built Workload's key -> the jobs naming it (its events wake them before it is theirs).
    _prebuilt_for: dict[Key, set[Key]] = field(default_factory=dict)

    # ----------------------------------------------------------------- events

    async def sync(self) -> dict[str, str]:
        """List Workloads, then jobs (so no job's Workload is missed); return each kind's version."""
        versions: dict[str, str] = {}
        items, versions["Workload"] = await self.store.list("Workload")
        for obj in items:
            self._put_workload(obj)
        for kind in self.registry.kinds():
            try:
                jobs, versions[kind] = await self.store.list(kind)
            except NotFound:
                # As upstream: an enabled integration whose API the cluster does not serve
                # (its CRD is not installed) is left out until the controller restarts.
                log.warning("not managing %s: the API server does not serve it", kind)
                self.unserved.add(kind)
                continue
            for job in jobs:
                self._put_job(job)
        self.suspect_orphans.update(self.workloads)
        return versions

    def job_by_uid(self, uid: str) -> Manifest | None:
        """The cached job with this uid (a Workload's owner), or None."""
        key = self._job_by_uid.get(uid)
        return None if key is None else self.jobs.get(key)

    def kinds(self) -> list[str]:
        return ["Workload", *(k for k in self.registry.kinds() if k not in self.unserved)]

    def handle(self, event: WatchEvent) -> None:
        obj = event.object
        key = Key.of(obj)
        if key.kind == "Workload":
            if event.type == "DELETED":
                self._drop_workload(key)
            else:
                self._put_workload(obj)
            self.dirty.update(k for k in self._prebuilt_for.get(key, ()) if k in self.jobs)
            owner = self._owner_uid(obj)
            if owner is not None:
                job_key = self._job_by_uid.get(owner)
                if job_key is not None:
                    self.dirty.add(job_key)
                elif event.type != "DELETED":
                    self.suspect_orphans.add(key)
            return
        if self.registry.get(key.kind) is None:
            return
        if event.type == "DELETED":
            self.jobs.pop(key, None)
            uid = _uid(obj)
            self._job_by_uid.pop(uid, None)
            prebuilt = jobframework.prebuilt_workload_name(obj)
            if prebuilt:
                self._prebuilt_for.get(Key("Workload", key.namespace, prebuilt), set()).discard(key)
            # Garbage collection would delete them too; doing it here releases quota at once.
            self.suspect_orphans.update(self._workloads_by_owner.get(uid, ()))
            return
        self._put_job(obj)

    def _put_job(self, job: Manifest) -> None:
        key = Key.of(job)
        self.jobs[key] = job
        self._job_by_uid[_uid(job)] = key
        prebuilt = jobframework.prebuilt_workload_name(job)
        if prebuilt:
            self._prebuilt_for.setdefault(Key("Workload", key.namespace, prebuilt), set()).add(key)
        self.dirty.add(key)

    def _owner_uid(self, workload: Manifest) -> str | None:
        owner = self.registry.owner_of(workload)
        return None if owner is None else str(owner[1].get("uid") or "")

    def _put_workload(self, obj: Manifest) -> None:
        key = Key.of(obj)
        self.workloads[key] = obj
        owner = self._owner_uid(obj)
        if owner is not None:
            self._workloads_by_owner.setdefault(owner, set()).add(key)

    def _drop_workload(self, key: Key) -> None:
        self._stopped.pop(key, None)
        self._pods_ready.pop(key, None)
        obj = self.workloads.pop(key, None)
        owner = None if obj is None else self._owner_uid(obj)
        if owner is not None:
            self._workloads_by_owner.get(owner, set()).discard(key)

    def workload_of(self, job: Manifest) -> Manifest | None:
        keys = sorted(self._workloads_by_owner.get(_uid(job), ()), key=str)
        return self.workloads.get(keys[0]) if keys else None

    # -------------------------------------------------------------- reconcile

    async def reconcile(self) -> int:
        """One pass over every dirty job and suspected orphan; the number of writes made."""
        writes = 0
        orphans, self.suspect_orphans = self.suspect_orphans, set()
        for key in sorted(orphans, key=str):
            writes += await self._collect_orphan(key)
        dirty, self.dirty = self.dirty, set()
        for key in sorted(dirty, key=str):
            job = self.jobs.get(key)
            adapter = self.registry.get(key.kind)
            if job is None or adapter is None:
                continue
            resolve = getattr(adapter, "resolve", None)
            if resolve is not None:
                # A kind whose pod sets live in another object (a TrainJob's runtime) reads it first.
                try:
                    await resolve(job, self.store.get)
                except NotFound as exc:
                    log.info("%s waits for %s", key, exc)
                    continue
            try:
                writes += await self.reconcile_job(adapter, job)
            except (Conflict, NotFound):
                continue  # the watch brings the fresh object and marks it dirty again
            except (StoreError, InputError, jobframework.PodSetMergeError) as exc:
                log.warning("%s: %s", key, exc)
        return writes

    def _managed(self, job: Manifest) -> bool:
        namespace = str((job.get("metadata") or {}).get("namespace") or "")
        if not self.settings.namespace_managed(self.namespace_labels(namespace)):
            return False
        return self.settings.manages(job)

    async def reconcile_job(self, adapter: JobAdapter, job: Manifest) -> int:
        if (job.get("metadata") or {}).get("deletionTimestamp"):
            return 0
        parent = self.registry.managed_owner(job)
        if parent is not None:
            return await self._reconcile_child(adapter, job, parent[1])
        if not self._managed(job):
            return 0  # not queued through Kueue: left alone
        prebuilt = jobframework.prebuilt_workload_name(job)
        adopted = 0
        if prebuilt:
            workload, adopted = await self._prebuilt_workload(adapter, job, prebuilt)
        else:
            workload = self.workload_of(job)
        return adopted + await self._reconcile_with(adapter, job, workload, prebuilt)

    async def _reconcile_with(
        self, adapter: JobAdapter, job: Manifest, workload: Manifest | None, prebuilt: str
    ) -> int:
        finished = adapter.finished(job)
        if finished is not None:
            if workload is not None and not _true(workload, "Finished"):
                written = await self._finish(workload, finished)
                key = Key.of(workload)
                self._event(
                    job, "FinishedWorkload", f"Workload '{key.namespace}/{key.name}' is declared finished"
                )
                return written
            return 0
        if workload is None:
            if not adapter.is_suspended(job):
                if prebuilt:
                    self._event(job, "Stopped", "missing workload")
                else:
                    self._event(job, "Suspended", "Suspended until its Workload is admitted")
                return await self._write_job(job, adapter.suspend)
            if prebuilt:
                return 0  # held until the Workload it names exists: that Workload's event wakes it
            return await self._create_workload(adapter, job)
        if _true(workload, "Finished"):
            return 0
        if _true(workload, "Evicted") and (workload.get("status") or {}).get("admission"):
            return await self._stop_evicted(adapter, job, workload)
        if is_admitted(workload):
            if adapter.is_suspended(job):
                return await self._start(adapter, job, workload)
            self._report_pods_ready(adapter, job, workload)
            return await self._sync_reclaimable(adapter, job, workload)
        self._pods_ready.pop(Key.of(workload), None)
        if adapter.is_suspended(job) and not (workload.get("status") or {}).get("admission"):
            moved = await self._follow_queue_name(adapter, job, workload)
            if moved:
                return moved
        return await self._stop_or_check(adapter, job, workload)

    async def _follow_queue_name(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> int:
        """A waiting job was moved to another LocalQueue: its Workload follows (as upstream).

        Only while the job is suspended and the Workload holds no reservation: the webhook
        refuses the change on a running job, and a reserved Workload's queue is immutable.
        """
        wanted = adapter.queue_name(job)
        spec = workload.get("spec") or {}
        if spec.get("queueName") == wanted:
            return 0
        updated = copy.deepcopy(workload)
        updated["spec"]["queueName"] = wanted
        written = await self.store.update(updated)
        self._put_workload(written)
        log.info("%s moved from LocalQueue %s to %s", Key.of(workload), spec.get("queueName"), wanted)
        return 1

    async def _stop_evicted(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> int:
        """Evicted but still holding its quota: stop the job, and say when its pods are gone."""
        self._pods_ready.pop(Key.of(workload), None)
        if not adapter.is_suspended(job):
            log.info("stopping %s: %s is evicted", Key.of(job), Key.of(workload))
            evicted = condition(workload, "Evicted") or {}
            self._event(job, "Stopped", str(evicted.get("message") or "The workload is evicted"))
            return await self._write_job(job, adapter.suspend)
        if adapter.is_active(job):
            return 0  # its pods are still terminating; their status changes bring it back here
        marker = jobframework.eviction_marker(workload)
        key = Key.of(workload)
        if self.on_job_stopped is not None and self._stopped.get(key) != marker:
            self._stopped[key] = marker
            self.on_job_stopped(key)
        return 0

    def _report_pods_ready(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> None:
        if self.on_pods_ready is None:
            return
        key = Key.of(workload)
        ready = adapter.pods_ready(job)
        if self._pods_ready.get(key) != ready:
            self._pods_ready[key] = ready
            self.on_pods_ready(key, ready)

    async def _reconcile_child(self, adapter: JobAdapter, job: Manifest, parent: Manifest) -> int:
        """A job whose owner is a managed kind (a JobSet's Job) is queued through that owner.

        It never gets a Workload of its own. As upstream, it is held back while its
        parent's Workload exists and is not admitted; the parent's controller usually
        creates it suspended anyway, so this is a safety net.
        """
        if adapter.is_suspended(job) or adapter.finished(job) is not None:
            return 0
        keys = self._workloads_by_owner.get(str(parent.get("uid") or ""), set())
        workloads = [self.workloads[k] for k in sorted(keys, key=str) if k in self.workloads]
        if not workloads or any(is_admitted(w) or _true(w, "Finished") for w in workloads):
            return 0
        log.info(
            "suspending %s: its %s %s is not admitted", Key.of(job), parent.get("kind"), parent.get("name")
        )
        return await self._write_job(job, adapter.suspend)

    async def _prebuilt_workload(
        self, adapter: JobAdapter, job: Manifest, name: str
    ) -> tuple[Manifest | None, int]:
        """The Workload ``job`` names, made its own, and whether that took a write.

        As upstream: none while it does not exist or another object controls it (the job
        is held meanwhile); one that does not describe the job is finished OutOfSync.
        """
        key = Key("Workload", Key.of(job).namespace, name)
        workload = self.workloads.get(key)
        if workload is None:
            return None, 0
        controller = _controller_of(workload)
        if controller is not None and str(controller.get("uid") or "") != _uid(job):
            log.warning(
                "%s names %s, which %s %s controls: it is held",
                Key.of(job),
                key,
                controller.get("kind"),
                controller.get("name"),
            )
            return None, 0
        if controller is not None:
            return workload, 0
        adopted = await self._adopt(adapter, job, workload)
        if _true(adopted, "Finished") or _describes(adopted, adapter, job):
            return adopted, 1
        return None, 1 + await self._finish(adopted, OUT_OF_SYNC)

    async def _adopt(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> Manifest:
        """Make ``job`` the controller of a pre-built Workload (so it goes when the job goes)."""
        updated = copy.deepcopy(workload)
        wl_meta = updated["metadata"]
        references = wl_meta.get("ownerReferences") or []
        wl_meta["ownerReferences"] = [*references, jobframework.controller_reference(adapter, job)]
        wl_meta["labels"] = {**(wl_meta.get("labels") or {}), JOB_UID_LABEL: _uid(job)[:63]}
        written = await self.store.update(updated)
        self._put_workload(written)
        log.info("%s now queues %s, which names it as pre-built", Key.of(written), Key.of(job))
        return written

    async def _claim_template(self, namespace: str, name: str) -> Manifest | None:
        try:
            return await self.store.get("ResourceClaimTemplate", namespace, name)
        except NotFound:
            return None

    async def _wanted(self, adapter: JobAdapter, job: Manifest) -> tuple[Manifest, str] | None:
        """The Workload ``job`` should have with its devices charged, and why they cannot be
        ("" when they are); None while a ResourceClaimTemplate it names does not exist."""
        wanted = jobframework.workload_for(adapter, job, self.priority_of, self.settings.label_keys_to_copy)
        try:
            wanted["spec"]["podSets"] = await dra.charge(
                wanted["spec"]["podSets"],
                wanted["metadata"]["namespace"],
                self.settings.device_classes,
                self._claim_template,
                str(Key.of(job)),
                self.settings.device_class_sources,
            )
        except dra.MissingTemplate as exc:
            # The template's arrival is not watched: the periodic resync looks again.
            log.info("%s; waiting for it", exc)
            return None
        except dra.DeviceRequestError as exc:
            return wanted, str(exc)
        return wanted, ""

    async def _create_workload(self, adapter: JobAdapter, job: Manifest) -> int:
        built = await self._wanted(adapter, job)
        if built is None:
            return 0
        wanted, problem = built
        if problem:
            # As upstream, the job is queued all the same: its Workload, uncharged, is
            # Misconfigured with the problem (the engine reads it from the annotation), so
            # `kubectl describe workload` says why it waits; it is rebuilt once it changes.
            wanted["metadata"].setdefault("annotations", {})[DEVICE_PROBLEM_ANNOTATION] = problem
        ref = wanted["spec"].get("priorityClassRef")
        if ref is not None and self.priority_of is not None and "priority" not in wanted["spec"]:
            # As upstream: no Workload until its priority class exists (it may just not have
            # reached our cache yet); the job is looked at again on the next pass.
            log.debug("%s waits for %s %s", Key.of(job), ref["kind"], ref["name"])
            self.dirty.add(Key.of(job))
            return 0
        try:
            created = await self.store.create(wanted)
        except AlreadyExists:
            created = await self.store.get(
                "Workload", wanted["metadata"]["namespace"], wanted["metadata"]["name"]
            )
        self._put_workload(created)
        log.info("created %s for %s", Key.of(created), Key.of(job))
        meta = created["metadata"]
        self._event(job, "CreatedWorkload", f"Created Workload: {meta.get('namespace')}/{meta['name']}")
        if problem:
            # The engine stamps the Misconfigured condition but records no event for it: the
            # Warning `kubectl describe` shows is recorded here, on the Workload and the job.
            log.warning("%s: its devices cannot be charged: %s", Key.of(job), problem)
            self._event(created, "Pending", problem, kind="Warning")
            self._event(job, "Pending", problem, kind="Warning")
        return 1

    async def _start(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> int:
        if (job.get("status") or {}).get("startTime"):
            return await self._clear_start_time(job)
        flavors = self.flavors()
        by_name = {ps.get("name"): ps for ps in (workload.get("spec") or {}).get("podSets") or []}
        infos = [
            PodSetInfo.from_assignment(
                a,
                flavors,
                int((by_name.get(a.get("name")) or {}).get("count", 1)),
                workload=str(workload["metadata"]["name"]),
            )
            for a in workload["status"]["admission"].get("podSetAssignments") or []
        ]
        if self.assign_queue_labels:
            infos = [jobframework.with_queue_labels(info, workload) for info in infos]
        # As upstream, the checks' updates come last: one that sets a queue label to another
        # value conflicts with it rather than overriding it.
        infos = [_with_check_updates(info, workload) for info in infos]
        try:
            written = await self._write_job(job, lambda j: adapter.run_with_pod_sets(j, infos))
        except ValidationError as exc:
            return await self._failed_to_start(job, workload, exc)
        if written:
            log.info("started %s as %s admits it", Key.of(job), Key.of(workload))
            cluster_queue = workload["status"]["admission"].get("clusterQueue", "")
            self._event(job, "Started", f"Admitted by clusterQueue {cluster_queue}")
        return written

    async def _sync_reclaimable(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> int:
        wanted = adapter.reclaimable_pods(job)
        status = workload.get("status") or {}
        if wanted == (status.get("reclaimablePods") or []):
            return 0
        updated = copy.deepcopy(workload)
        if wanted:
            updated["status"]["reclaimablePods"] = wanted
        else:
            updated["status"].pop("reclaimablePods", None)
        written = await self.store.update_status(updated)
        self._put_workload(written)
        log.info("%s: reclaimable pods %s", Key.of(workload), wanted)
        return 1

    async def _stop_or_check(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> int:
        """The Workload holds no admission: the job must be suspended with its template restored."""
        pod_sets = (workload.get("spec") or {}).get("podSets") or []
        infos = [PodSetInfo.from_pod_set(ps) for ps in pod_sets]
        if not adapter.is_suspended(job):
            log.info("stopping %s: %s has no admission", Key.of(job), Key.of(workload))
            self._event(job, "Stopped", "Not admitted by cluster queue")
            return await self._write_job(job, adapter.suspend)
        if (job.get("status") or {}).get("startTime"):
            return await self._clear_start_time(job)
        if getattr(adapter, "restore_when_inactive", False) and adapter.is_active(job):
            # Its controller refuses the restore while pods still run (a TrainJob's runtime
            # patch, as upstream's Stop waits): the status change that ends them brings it back.
            return 0
        restored = copy.deepcopy(job)
        if adapter.restore_pod_sets(restored, infos):
            return await self._write_job(job, lambda j: adapter.restore_pod_sets(j, infos))
        if await self._device_problem_changed(adapter, job, workload):
            key = Key.of(workload)
            await self.store.delete("Workload", key.namespace, key.name)
            log.info("deleted %s: the charge of %s's devices changed", key, Key.of(job))
            self._event(job, "DeletedWorkload", f"Deleted not matching Workload: {key.namespace}/{key.name}")
            return 1
        if not jobframework.equivalent_to_job(workload, adapter, job):
            if jobframework.prebuilt_workload_name(job):
                return await self._finish(workload, OUT_OF_SYNC)  # nobody here can build it anew
            # The suspended job was changed (its parallelism, its queue): queue it again as it is now.
            key = Key.of(workload)
            await self.store.delete("Workload", key.namespace, key.name)
            log.info("deleted %s: %s changed while it waited", key, Key.of(job))
            self._event(job, "DeletedWorkload", f"Deleted not matching Workload: {key.namespace}/{key.name}")
            return 1
        return 0

    async def _device_problem_changed(self, adapter: JobAdapter, job: Manifest, workload: Manifest) -> bool:
        """Whether a Workload made Misconfigured by its devices would now be built otherwise (a
        mapping added, a template fixed): upstream re-reads the devices of every pending
        Workload; here the charge is part of the Workload, so it is built anew."""
        annotations = (workload.get("metadata") or {}).get("annotations") or {}
        if DEVICE_PROBLEM_ANNOTATION not in annotations or jobframework.prebuilt_workload_name(job):
            return False
        built = await self._wanted(adapter, job)
        return built is not None and built[1] != annotations[DEVICE_PROBLEM_ANNOTATION]

    def _event(self, job: Manifest, reason: str, message: str, kind: str = "Normal") -> None:
        if self.on_event is not None:
            self.on_event(job, kind, reason, message)

    async def _failed_to_start(self, job: Manifest, workload: Manifest, exc: ValidationError) -> int:
        """The API server refuses the admission's update of the job as invalid (its own rules, such
        as a TrainJob's immutable spec.trainer): the same update would be refused for ever, so, as
        upstream does with a job it cannot start, the Workload finishes (FailedToStart), which gives
        its quota back; a Warning on the job and on the Workload says why."""
        key = Key.of(job)
        # The problems without the object each names: the message names it once.
        said = "; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in exc.problems)
        message = f"{key.kind} {key.namespace}/{key.name} refused its admission update: {said}"
        log.warning("%s: %s", Key.of(workload), message)
        self._event(job, FAILED_TO_START, message, kind="Warning")
        self._event(workload, FAILED_TO_START, message, kind="Warning")
        return await self._finish(workload, jobframework.Finished(False, message, cause=FAILED_TO_START))

    async def _write_job(self, job: Manifest, change: Callable[[Manifest], object]) -> int:
        updated = copy.deepcopy(job)
        change(updated)
        if updated == job:
            return 0
        written = await self.store.update(updated)
        self.jobs[Key.of(written)] = written
        return 1

    async def _clear_start_time(self, job: Manifest) -> int:
        # A suspended Job's template may change only without a startTime. Kubernetes' job
        # controller clears it when it sees the suspension; clearing it ourselves (as upstream
        # Kueue does) saves a round, but needs write access to jobs/status. Without it we wait
        # for the job controller, whose status write brings the job back here.
        if not self.may_write_job_status:
            return 0
        updated = copy.deepcopy(job)
        updated["status"].pop("startTime", None)
        try:
            written = await self.store.update_status(updated)
        except (Conflict, NotFound):
            raise
        except StoreError as exc:
            if exc.retryable:
                raise
            log.info("not clearing startTime of %s (%s); the job controller will", Key.of(job), exc)
            self.may_write_job_status = False
            return 0
        self.jobs[Key.of(written)] = written
        return 1

    async def _finish(self, workload: Manifest, finished: jobframework.Finished) -> int:
        updated = finished.on(workload, self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"))
        written = await self.store.update_status(updated)
        self._put_workload(written)
        log.info("%s finished: %s", Key.of(workload), finished.reason)
        return 1

    async def _collect_orphan(self, key: Key) -> int:
        """Delete a job's Workload once that job is gone (checked against the API, not the cache)."""
        workload = self.workloads.get(key)
        if workload is None:
            return 0
        owner = self.registry.owner_of(workload)
        if owner is None:
            return 0
        adapter, ref = owner
        try:
            job = await self.store.get(adapter.kind, key.namespace, str(ref.get("name", "")))
            if _uid(job) == str(ref.get("uid")):
                self._put_job(job)
                return 0
        except NotFound:
            pass
        try:
            await self.store.delete("Workload", key.namespace, key.name)
        except NotFound:
            return 0
        log.info("deleted %s: its %s %s is gone", key, adapter.kind, ref.get("name"))
        return 1
