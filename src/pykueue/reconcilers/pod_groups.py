"""Pods queued by Kueue, alone or as groups: one Workload per group, the gate lifted on admission.

    pod event ──▶ its group's Workload key ──▶ dirty ──▶ one pass per dirty group:
        no Workload yet   ─▶ made once the group is complete (every pod of
                             pod-group-total-count exists), or at once for a single pod
                             or a group with fast admission (a StatefulSet's)
        Workload admitted ─▶ each gated pod: flavors' node selector and tolerations added,
                             the kueue.x-k8s.io/admission gate removed; unless MultiKueue
                             runs the group on a worker (``runs_elsewhere``): the pods stay
                             gated here, and their copies' status comes back onto them
        not admitted      ─▶ running pods deleted (evicted); their owner may make new,
                             gated pods, which wait for the next admission
        pods finished     ─▶ Workload Finished (a single pod: when it ends; a group: when
                             total-count pods succeeded; a serving group never)
        pods all gone     ─▶ an unfinished Workload deleted (its quota released)

A group is named by the ``kueue.x-k8s.io/pod-group-name`` label, and its Workload
by the group's name, as upstream does; a single pod's Workload is named like any
job's (``pod-<name>-<hash>``). Only pods the webhook marked
``kueue.x-k8s.io/managed=true`` are looked at. Like the job reconciler this is
level-triggered: one write per group and pass, and a conflict waits for the next event.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pykueue.errors import AlreadyExists, Conflict, InputError, NotFound, StoreError
from pykueue.reconcilers import dra, jobframework
from pykueue.reconcilers.integrations import leaderworkerset as lws
from pykueue.reconcilers.integrations import pod as pods
from pykueue.reconcilers.jobframework import PodSetInfo
from pykueue.store.base import Key, Manifest, Store, WatchEvent

log = logging.getLogger(__name__)

GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _true(obj: Manifest | None, kind: str) -> bool:
    return obj is not None and any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _admitted(workload: Manifest) -> bool:
    return bool((workload.get("status") or {}).get("admission")) and _true(workload, "Admitted")


def group_of(pod: Manifest) -> str:
    """The pod's group: its pod-group-name, or its LeaderWorkerSet replica; "" when alone."""
    return lws.group_name(pod) if lws.belongs(pod) else pods.group_name(pod)


def workload_key(pod: Manifest) -> Key:
    """The Workload that queues a pod: its group's, or its own."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    group = group_of(pod)
    if group:
        return Key("Workload", namespace, group)
    return Key(
        "Workload", namespace, jobframework.workload_name("Pod", str(meta["name"]), str(meta.get("uid", "")))
    )


def _deleting(pod: Manifest) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


@dataclass
class PodGroupReconciler:
    """Keeps every managed pod's group in step with its Workload."""

    store: Store
    flavors: Callable[[], Mapping[str, Manifest]]
    clock: Callable[[], datetime] = _utc_now
    priority_of: Callable[[str, str], int | None] | None = None
    settings: jobframework.Settings = field(default_factory=jobframework.Settings)
    adapter: pods.PodAdapter = field(default_factory=pods.PodAdapter)
    pods: dict[Key, Manifest] = field(default_factory=dict)
    workloads: dict[Key, Manifest] = field(default_factory=dict)
    members: dict[Key, set[Key]] = field(default_factory=dict)
    dirty: set[Key] = field(default_factory=set)
    # An evicted Workload's pods are all stopped: the admission controller releases its quota
    # (asynchronous evictions, as for jobs: a victim holds its quota until it really stopped).
    on_stopped: Callable[[Key], None] | None = None
    _stopped: dict[Key, str] = field(default_factory=dict)  # the eviction last reported, per workload
    # Whether an admitted Workload's pods run on another cluster (a MultiKueue check): never ungated here.
    runs_elsewhere: Callable[[Manifest], bool] = lambda _: False
    # Feature gate AssignQueueLabelsForPods: an ungated pod gets its queues' labels.
    assign_queue_labels: bool = True

    def kinds(self) -> list[str]:
        return ["Workload", "Pod"]

    async def sync(self) -> dict[str, str]:
        versions: dict[str, str] = {}
        items, versions["Workload"] = await self.store.list("Workload")
        for obj in items:
            self._put_workload(obj)
        items, versions["Pod"] = await self.store.list("Pod")
        for obj in items:
            self._put_pod(obj)
        self.dirty.update(k for k in self.workloads if k not in self.members)
        return versions

    def handle(self, event: WatchEvent) -> None:
        obj = event.object
        key = Key.of(obj)
        if key.kind == "Workload":
            if event.type == "DELETED":
                self.workloads.pop(key, None)
            else:
                self._put_workload(obj)
            if key in self.members or key in self.workloads:
                self.dirty.add(key)
            return
        if key.kind != "Pod":
            return
        if event.type == "DELETED":
            old = self.pods.pop(key, None)
            if old is not None:
                group = workload_key(old)
                self.members.get(group, set()).discard(key)
                self.dirty.add(group)
            return
        self._put_pod(obj)

    def _ours(self, workload: Manifest) -> bool:
        meta = workload.get("metadata") or {}
        if (meta.get("annotations") or {}).get(GROUP_WORKLOAD_ANNOTATION) == "true":
            return True
        return any(r.get("kind") == "Pod" and r.get("controller") for r in meta.get("ownerReferences") or [])

    def _put_workload(self, obj: Manifest) -> None:
        if self._ours(obj):
            self.workloads[Key.of(obj)] = obj

    def _put_pod(self, pod: Manifest) -> None:
        if (pod.get("metadata") or {}).get("labels", {}).get(pods.MANAGED_LABEL) != "true":
            return
        key = Key.of(pod)
        self.pods[key] = pod
        group = workload_key(pod)
        self.members.setdefault(group, set()).add(key)
        self.dirty.add(group)

    # ---------------------------------------------------------------- reconcile

    async def reconcile(self) -> int:
        writes = 0
        dirty, self.dirty = self.dirty, set()
        for key in sorted(dirty, key=str):
            try:
                writes += await self.reconcile_group(key)
            except (Conflict, NotFound):
                continue
            except (StoreError, InputError, jobframework.PodSetMergeError) as exc:
                log.warning("%s: %s", key, exc)
        return writes

    def members_of(self, key: Key) -> list[Manifest]:
        """The pods a Workload queues that are not being deleted (oldest first)."""
        return [p for p in self._members(key) if not _deleting(p)]

    def _members(self, key: Key) -> list[Manifest]:
        found = [self.pods[k] for k in sorted(self.members.get(key, ()), key=str) if k in self.pods]
        return sorted(found, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))

    async def reconcile_group(self, key: Key) -> int:
        members = self._members(key)
        workload = self.workloads.get(key)
        live = [p for p in members if not _deleting(p)]
        if not live:
            if workload is not None and not _true(workload, "Finished"):
                await self.store.delete("Workload", key.namespace, key.name)
                self.workloads.pop(key, None)
                log.info("deleted %s: its pods are gone", key)
                return 1
            return 0
        if workload is None:
            return await self._create(key, live)
        if _true(workload, "Finished"):
            return 0
        ended = self._finished(live)
        if ended is not None:
            return await self._finish(workload, ended)
        if _true(workload, "Evicted") and (workload.get("status") or {}).get("admission"):
            return await self._stop_evicted(key, workload, live)
        if _admitted(workload):
            return 0 if self.runs_elsewhere(workload) else await self._ungate(workload, live)
        return await self._evict(key, live)

    async def _stop_evicted(self, key: Key, workload: Manifest, live: list[Manifest]) -> int:
        """Evicted but still holding its quota: stop its pods, and say when none runs any more."""
        stopped = await self._evict(key, live)
        if stopped:
            return stopped  # their deletions come back as events, and this is looked at again
        marker = jobframework.eviction_marker(workload)
        if self.on_stopped is not None and self._stopped.get(key) != marker:
            self._stopped[key] = marker
            self.on_stopped(key)
        return 0

    # -- pieces

    async def _parent(self, pod: Manifest) -> Manifest | None:
        """The LeaderWorkerSet a pod's group is a replica of (None when it is gone)."""
        meta = pod.get("metadata") or {}
        try:
            return await self.store.get(
                "LeaderWorkerSet", str(meta.get("namespace")), meta["labels"][lws.NAME_LABEL]
            )
        except NotFound:
            return None

    async def _pod_sets(self, live: list[Manifest]) -> list[Manifest] | None:
        first = live[0]
        if lws.belongs(first):
            parent = await self._parent(first)
            return None if parent is None else lws.pod_sets(parent)
        if not pods.group_name(first):
            return self.adapter.pod_sets(first)
        total = pods.total_count(first)
        if total is None:
            log.warning(
                "pod group %s: %s is missing or not a positive number",
                pods.group_name(first),
                pods.GROUP_TOTAL_COUNT_ANNOTATION,
            )
            return None
        if pods.fast_admission(first):
            return [{"name": pods.POD_SET, "count": total, "template": pods.template_of(first)}]
        # Failed pods are expected to be replaced (retried in the group): they do not count.
        waiting = [p for p in live if (f := pods.finished(p)) is None or f.succeeded]
        if len(waiting) < total:
            return None  # the group is not complete yet
        roles: dict[str, Manifest] = {}
        for pod in waiting[:total]:
            role = pods.role_hash(pod)
            entry = roles.setdefault(role, {"name": role, "count": 0, "template": pods.template_of(pod)})
            entry["count"] += 1
        return list(roles.values())

    async def _create(self, key: Key, live: list[Manifest]) -> int:
        pod_sets = await self._pod_sets(live)
        if pod_sets is None:
            return 0
        first = live[0]
        wanted = jobframework.workload_for(
            self.adapter, first, self.priority_of, self.settings.label_keys_to_copy
        )
        wanted["metadata"]["name"] = key.name

        async def claim_template(namespace: str, name: str) -> Manifest | None:
            try:
                return await self.store.get("ResourceClaimTemplate", namespace, name)
            except NotFound:
                return None

        try:
            pod_sets = await dra.charge(
                pod_sets,
                key.namespace,
                self.settings.device_classes,
                claim_template,
                str(key),
                self.settings.device_class_sources,
            )
        except (dra.MissingTemplate, dra.DeviceRequestError) as exc:
            log.warning("not queueing %s: %s", key, exc)
            return 0
        jobframework.fill_topology_requests(self.adapter, first, pod_sets)
        wanted["spec"]["podSets"] = pod_sets
        if group_of(first):
            wanted["metadata"]["annotations"] = {GROUP_WORKLOAD_ANNOTATION: "true"}
            wanted["metadata"]["ownerReferences"] = await self._group_owners(live)
            wanted["metadata"]["labels"].pop(jobframework.JOB_UID_LABEL, None)
        try:
            created = await self.store.create(wanted)
        except AlreadyExists:
            created = await self.store.get("Workload", key.namespace, key.name)
        self._put_workload(created)
        log.info("created %s for %d pod(s)", key, len(live))
        return 1

    async def _group_owners(self, live: list[Manifest]) -> list[Manifest]:
        # A group made by one controller (a StatefulSet, a LeaderWorkerSet) lives as long as
        # that controller; its pods come and go. A group of plain pods is owned by every pod in it.
        if lws.belongs(live[0]):
            parent = await self._parent(live[0])
            if parent is not None:
                meta = parent["metadata"]
                return [
                    {
                        "apiVersion": lws.INTEGRATION.api_version,
                        "kind": "LeaderWorkerSet",
                        "name": meta["name"],
                        "uid": meta["uid"],
                    }
                ]
        for ref in (live[0].get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "StatefulSet":
                return [{k: ref[k] for k in ("apiVersion", "kind", "name", "uid")}]
        return [
            {"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
            for p in live
        ]

    def _finished(self, live: list[Manifest]) -> jobframework.Finished | None:
        first = live[0]
        if not group_of(first):
            return pods.finished(first)
        if pods.is_serving(first):
            return None
        total = pods.total_count(first) or 0
        succeeded = sum(1 for p in live if (f := pods.finished(p)) is not None and f.succeeded)
        if total and succeeded >= total:
            return jobframework.Finished(True, f"{succeeded} pods of the group succeeded")
        return None

    async def _finish(self, workload: Manifest, finished: jobframework.Finished) -> int:
        updated = finished.on(workload, self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"))
        written = await self.store.update_status(updated)
        self._put_workload(written)
        log.info("%s finished: %s", Key.of(workload), finished.reason)
        return 1

    async def _ungate(self, workload: Manifest, live: list[Manifest]) -> int:
        flavors = self.flavors()
        by_name = {ps.get("name"): ps for ps in (workload.get("spec") or {}).get("podSets") or []}
        name = str(workload["metadata"]["name"])
        infos = {
            str(a.get("name")): PodSetInfo.from_assignment(
                a, flavors, int((by_name.get(a.get("name")) or {}).get("count", 1)), name
            )
            for a in workload["status"]["admission"].get("podSetAssignments") or []
        }
        if self.assign_queue_labels:
            infos = {n: jobframework.with_queue_labels(i, workload) for n, i in infos.items()}
        writes = 0
        for pod in live:
            if not pods.is_gated(pod):
                continue
            if lws.belongs(pod):
                info = infos.get(lws.pod_set_of(pod))
            elif pods.POD_SET in infos:
                info = infos.get(pods.POD_SET)
            else:
                info = infos.get(pods.role_hash(pod))
            if info is None and len(infos) == 1:
                info = next(iter(infos.values()))
            updated = copy.deepcopy(pod)
            self.adapter.run_with_pod_sets(updated, [info] if info is not None else [])
            written = await self.store.update(updated)
            self.pods[Key.of(written)] = written
            writes += 1
        if writes:
            log.info("admitted %s: %d pod(s) ungated", Key.of(workload), writes)
        return writes

    async def _evict(self, key: Key, live: list[Manifest]) -> int:
        running = [p for p in live if not pods.is_gated(p) and pods.finished(p) is None]
        for pod in running:
            meta = pod["metadata"]
            try:
                await self.store.delete("Pod", meta["namespace"], meta["name"])
            except NotFound:
                continue
        if running:
            log.info("stopped %s: %d pod(s) deleted, its Workload is not admitted", key, len(running))
        return len(running)
