"""The MultiKueue admission check (``kueue.x-k8s.io/multikueue``): run a manager's jobs on worker clusters.

A ClusterQueue of the manager names an AdmissionCheck of this controller, whose
parameters name a MultiKueueConfig, which lists MultiKueueClusters (the workers). Each
poll (``poll_seconds``) walks the steps below; every step reads the manager's informer
caches and lists the workers, so a step missed (a conflict, a worker that did not
answer) is simply made again on the next poll:

    1. connect     MultiKueueCluster Active conditions (`multikueue.clusters`)
    2. checks      AdmissionCheck Active: its MultiKueueConfig exists and a cluster is active
    3. observe     each active worker: the job copies labelled with our origin, their Workloads
    4. dispatch    a Workload with quota reserved and the check Pending is sent to every
                   eligible worker (the dispatcher decides which: `dispatching.eligible`), as upstream:
                   the Workload alone, pre-built, which the worker's Kueue queues; a kind
                   without pre-built Workloads (a pod group) sends its job copies instead
    5. elect       the first worker whose copy reserves quota wins (`dispatching.winner`): the check
                   turns Ready, ``status.clusterName`` names the worker; the engine admits;
                   the winner then gets the job, naming the Workload sent before, so a
                   loser never holds a copy of the job
    6. mirror      the winner's job status is copied onto the manager's job, which therefore
                   finishes (and finishes its Workload) when the copy does
    7. lose        a winner unreachable for ``worker_lost_timeout``, or whose copy is gone,
                   sends the check to Retry: the engine evicts and requeues, step 4 again
    8. collect     every copy that should not exist is deleted with its Workload: the losers,
                   copies of finished, evicted or deleted Workloads, a lost worker's copies once
                   it is back, and copies no Workload of the manager knows (orphans)

The manager's job says ``kueue.x-k8s.io/multikueue`` in its managed-by field (``spec.managedBy``,
a Kubeflow job's ``spec.runPolicy.managedBy``), so its own cluster's job controller never
runs it; a job without it is rejected by the check.
Which job kinds can be dispatched is `jobframework.MultiKueueAdapter`'s business. A
Workload of a composable kind (a pod group) queues several objects (``members``): each
gets its copy, each copy's status comes back onto its original, and all go together.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from pykueue.api import configuration
from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER
from pykueue.engine import intake
from pykueue.errors import AlreadyExists, Conflict, NotFound, StoreError, Unavailable, ValidationError
from pykueue.multikueue.clusters import ClusterConnections, WorkerStore
from pykueue.multikueue.dispatching import (
    ALL_AT_ONCE,
    CONFIG_KIND,
    INCREMENTAL,
    Dispatcher,
    check_active,
    condition,
    conditions_of,
    config_name,
    copy_wanted,
    eligible,
    is_true,
    out_of_sync,
    winner,
)
from pykueue.reconcilers import jobframework
from pykueue.store.base import Key, Manifest, Store

if TYPE_CHECKING:
    from pykueue.reconcilers.manager import Manager

log = logging.getLogger(__name__)

CONTROLLER_NAME = MULTIKUEUE_CONTROLLER
# The reason of the Events on the manager's Workload, as upstream's.
EVENT_REASON = "MultiKueue"


@dataclass(frozen=True)
class Settings:
    """The Configuration's ``multiKueue`` section (and where the kubeconfig Secrets are)."""

    namespace: str = "kueue-system"
    origin: str = "multikueue"
    worker_lost_timeout: timedelta = timedelta(minutes=15)
    dispatcher: Dispatcher = "AllAtOnce"
    poll_seconds: float = 1.0
    allow_path: bool = True


def settings_of(section: configuration.MultiKueue, namespace: str = "kueue-system") -> Settings:
    """`Settings` from a Configuration's ``multiKueue`` section (already validated)."""
    name = section.dispatcher_name or ALL_AT_ONCE
    dispatcher: Dispatcher = (
        "AllAtOnce" if name == ALL_AT_ONCE else "Incremental" if name == INCREMENTAL else "External"
    )
    lost = duration(section.worker_lost_timeout) if section.worker_lost_timeout else timedelta(minutes=15)
    return Settings(
        namespace=namespace,
        origin=section.origin or "multikueue",
        worker_lost_timeout=lost,
        dispatcher=dispatcher,
    )


def duration(text: str) -> timedelta:
    """A Go duration of the Configuration (``15m``, ``1h30m``, ``250ms``), already checked by
    `pykueue.api.configuration`."""
    return timedelta(microseconds=intake.parse_duration(text))


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


# ------------------------------------------------------------------ controller


@dataclass
class Remote:
    """What one worker holds for us: job copies by the manager Workload they run for (a pod
    group's are several), and their Workloads."""

    jobs: dict[Key, list[Manifest]] = field(default_factory=dict)
    workloads: dict[Key, Manifest] = field(default_factory=dict)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def no_members(_: Key) -> list[Manifest]:
    return []


@dataclass
class MultiKueueController:
    """Dispatches the manager's Workloads to workers; see the module's docstring for the steps."""

    store: Store
    registry: jobframework.Registry
    # The manager's informer cache (Workloads, AdmissionChecks) and its jobs by uid.
    cache: Mapping[Key, Manifest]
    job_by_uid: Callable[[str], Manifest | None]
    settings: Settings = field(default_factory=Settings)
    clock: Callable[[], datetime] = _utc_now
    # The objects of a composable kind a Workload queues (a pod group's pods, from the manager's cache).
    members: Callable[[Key], list[Manifest]] = no_members
    # The names of the AdmissionChecks that may be ours (any controller), when the caller
    # keeps them: a poll then looks those up instead of scanning the whole cache, which
    # holds every Workload (None: scan).
    check_names: Callable[[], Iterable[str]] | None = None
    # Kubernetes Events (object, type, reason, message): a worker's refusal is told on the
    # manager's Workload, where its owner looks (None: logged only).
    on_event: Callable[[Manifest, str, str, str], object] | None = None
    clusters: ClusterConnections = field(init=False)
    polls: int = 0

    def __post_init__(self) -> None:
        self.clusters = self.cluster_connections()

    def cluster_connections(self) -> ClusterConnections:
        """How workers are reached: API servers by kubeconfig (standalone mode reaches its own kind)."""
        return ClusterConnections(self.store, self.settings.namespace, self.clock, self.settings.allow_path)

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set."""
        try:
            while not stop.is_set():
                try:
                    await self.poll()
                except StoreError as exc:
                    log.warning("multikueue: poll failed: %s", exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.settings.poll_seconds)
        finally:
            await self.clusters.close()

    def _ours(self) -> dict[str, Manifest]:
        if self.check_names is None:
            found = {key.name: obj for key, obj in self.cache.items() if key.kind == "AdmissionCheck"}
        else:
            found = {}
            for name in self.check_names():
                obj = self.cache.get(Key("AdmissionCheck", "", name))
                if obj is not None:
                    found[name] = obj
        return {
            name: obj
            for name, obj in found.items()
            if (obj.get("spec") or {}).get("controllerName") == CONTROLLER_NAME
        }

    async def poll(self) -> None:
        self.polls += 1
        checks = self._ours()
        if not checks:
            await self.clusters.close()
            return
        await self.clusters.refresh()
        active = {name for name, c in self.clusters.connections.items() if c.active}
        configs = {str(c["metadata"]["name"]): c for c in (await self.store.list(CONFIG_KIND))[0]}
        known = set(self.clusters.connections)
        for check in checks.values():
            await self._write_check_active(check, configs, active, known)
        remote: dict[str, Remote] = {}
        for name in sorted(active):
            seen = await self._observe(name)
            if seen is not None:
                remote[name] = seen
        for key, workload in sorted(self.cache.items(), key=lambda kv: str(kv[0])):
            if key.kind != "Workload":
                continue
            entry = self._entry(workload, checks)
            if entry is None:
                continue
            config = configs.get(config_name(checks[str(entry["name"])]) or "")
            order = list((config or {}).get("spec", {}).get("clusters") or [])
            try:
                await self._reconcile(workload, entry, order, remote)
            except (Conflict, NotFound):
                pass  # a newer object is on its way through the watch; next poll
            except StoreError as exc:
                log.warning("multikueue: %s: %s", key, exc)
        await self._collect(remote, checks, configs)

    def _entry(self, workload: Manifest, checks: Mapping[str, Manifest]) -> Manifest | None:
        for entry in (workload.get("status") or {}).get("admissionChecks") or []:
            if entry.get("name") in checks:
                return dict(entry)
        return None

    # -------------------------------------------------------------- observe

    async def _observe(self, cluster: str) -> Remote | None:
        """The worker's copies and their Workloads; None (and the worker left alone) when it does not answer."""
        store = self.clusters.active(cluster)
        if store is None:
            return None
        seen = Remote()
        try:
            uids: dict[str, Key] = {}
            for kind in self.registry.multikueue_kinds():
                try:
                    items, _ = await store.list_selected(
                        kind, label_selector=f"{jobframework.MULTIKUEUE_ORIGIN_LABEL}={self.settings.origin}"
                    )
                except NotFound:
                    continue  # the worker does not serve this kind: no copy of it can be there
                for job in items:
                    owner = _annotation(job, jobframework.MULTIKUEUE_WORKLOAD_ANNOTATION)
                    if owner is None:
                        continue
                    seen.jobs.setdefault(owner, []).append(job)
                    uids[str(job["metadata"].get("uid"))] = owner
            if uids:
                workloads, _ = await store.list("Workload")
                for wl in workloads:
                    for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
                        owner = uids.get(str(ref.get("uid")))
                        if owner is not None:
                            seen.workloads[owner] = wl
            if self.prebuilds_any():
                # The Workloads sent before any job (pre-built), job or not: labelled with our origin.
                copies, _ = await store.list_selected(
                    "Workload",
                    label_selector=f"{jobframework.MULTIKUEUE_ORIGIN_LABEL}={self.settings.origin}",
                )
                for wl in copies:
                    owner = _annotation(wl, jobframework.MULTIKUEUE_WORKLOAD_ANNOTATION)
                    if owner is not None:
                        seen.workloads[owner] = wl
        except StoreError as exc:
            log.warning("multikueue: cannot list worker %s: %s", cluster, exc)
            return None
        return seen

    # ------------------------------------------------------------ reconcile

    async def _reconcile(
        self, workload: Manifest, entry: Manifest, order: list[str], remote: Mapping[str, Remote]
    ) -> None:
        key = Key.of(workload)
        state = entry.get("state")
        if is_true(workload, "Finished"):
            return
        found = self._objects(workload)
        if found is None:
            return  # the job reconciler has not seen it yet, or it is gone (then collected)
        kind, objects = found
        job = objects[0]
        adapter = self.registry.multikueue(kind)
        if adapter is None or not all(adapter.managed(obj) for obj in objects):
            if state == "Pending" and (workload.get("status") or {}).get("admission"):
                reason = (
                    f"{kind} {key.namespace}/{job['metadata']['name']}: {adapter.managed_by_field} must be "
                    f"{jobframework.MULTIKUEUE_MANAGED_BY!r} for MultiKueue to dispatch it"
                    if adapter is not None
                    else f"MultiKueue cannot dispatch the kind {kind}"
                )
                await self._set_check(workload, entry, "Rejected", reason)
            return
        for obj in objects:
            await self._forget_mirrored(obj, adapter, state)
        if not (workload.get("status") or {}).get("admission") or is_true(workload, "Evicted"):
            # Until the eviction completes the reservation stays, and the old winner's copy with
            # it: electing it again would undo the eviction. The collect step removes it.
            return
        if state == "Pending":
            await self._dispatch_or_elect(workload, entry, objects, adapter, order, remote)
        elif state == "Ready":
            await self._follow_winner(workload, entry, objects, adapter, remote)

    def _objects(self, workload: Manifest) -> tuple[str, list[Manifest]] | None:
        """The kind and the manager's objects a Workload queues: its job, or a composable
        kind's group (a pod group); None while they are not known.

        A group's kind is its Workload's owner's: Pod for plain pods, StatefulSet or
        LeaderWorkerSet for theirs (an LWS has no adapter: its pods alone cannot run there).
        """
        owner = self.registry.owner_of(workload)
        if owner is not None:
            job = self.job_by_uid(str(owner[1].get("uid") or ""))
            return None if job is None else (owner[0].kind, [job])
        members = self.members(Key.of(workload))
        if not members:
            return None
        refs = (workload.get("metadata") or {}).get("ownerReferences") or []
        return str(refs[0].get("kind") if refs else members[0].get("kind")), members

    async def _dispatch_or_elect(
        self,
        workload: Manifest,
        entry: Manifest,
        objects: list[Manifest],
        adapter: jobframework.MultiKueueAdapter,
        order: list[str],
        remote: Mapping[str, Remote],
    ) -> None:
        key = Key.of(workload)
        # Only a nominated worker may win (the Workload rules refuse any other clusterName); a
        # copy on a worker nominated no more waits until the nomination names it again.
        nominated = set((workload.get("status") or {}).get("nominatedClusterNames") or [])
        found = winner(
            {name: seen.workloads.get(key) for name, seen in remote.items() if name in nominated}, order
        )
        if found is not None:
            await self._set_check(
                workload, entry, "Ready", f'The workload got reservation on "{found}"', found
            )
            return
        reserved_at = _parse_time(
            str((condition(workload, "QuotaReserved") or {}).get("lastTransitionTime", ""))
        )
        waited = self.clock() - reserved_at if reserved_at is not None else timedelta(0)
        targets = eligible(self.settings.dispatcher, order, set(remote), workload, waited)
        if self.settings.dispatcher != "External" and not await self._nominate(workload, targets):
            return  # copies follow once the nomination is written: a winner must have been nominated
        for cluster in targets:
            if self._prebuilds(objects):
                await self._create_workload_copy(cluster, workload, remote[cluster])
            else:
                await self._create_copies(cluster, key, objects, remote[cluster], adapter)

    def prebuilds_any(self) -> bool:
        """Whether any kind is dispatched as a pre-built Workload first (see `_prebuilds`)."""
        return any(self.registry.prebuilt(kind) for kind in self.registry.multikueue_kinds())

    def _prebuilds(self, objects: Sequence[Manifest]) -> bool:
        """Whether a Workload is sent to the workers alone, its job only to the one that wins.

        As upstream: for every kind that takes a pre-built Workload, so a loser never runs a
        copy. Not for a pod group (several objects per Workload) nor a kind without it; their
        copies go to every nominated worker and the losers' are deleted after the election.
        """
        return len(objects) == 1 and self.registry.prebuilt(str(objects[0].get("kind") or ""))

    def _as_queued(self, job: Manifest, workload: Manifest) -> Manifest:
        """The job as its Workload queued it: by now the manager has started it with its own
        flavors' node selectors and admitted counts, which are no business of the worker's."""
        restored = copy.deepcopy(job)
        job_adapter = self.registry.get(str(job.get("kind") or ""))
        if job_adapter is not None:
            pod_sets = (workload.get("spec") or {}).get("podSets") or []
            job_adapter.restore_pod_sets(
                restored, [jobframework.PodSetInfo.from_pod_set(ps) for ps in pod_sets]
            )
        return restored

    async def _create_workload_copy(self, cluster: str, workload: Manifest, seen: Remote) -> None:
        """Send the Workload (its spec, without status or owner) to ``cluster``, unless it is there."""
        key = Key.of(workload)
        store = self.clusters.active(cluster)
        if store is None or key in seen.workloads or key in seen.jobs:
            return
        meta = workload.get("metadata") or {}
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != jobframework.JOB_UID_LABEL}
        labels[jobframework.MULTIKUEUE_ORIGIN_LABEL] = self.settings.origin
        body = {
            "apiVersion": jobframework.WORKLOAD_API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": key.name,
                "namespace": key.namespace,
                "labels": labels,
                "annotations": {jobframework.MULTIKUEUE_WORKLOAD_ANNOTATION: key.name},
            },
            "spec": copy.deepcopy(workload.get("spec") or {}),
        }
        if await _create_on(store, body, key, cluster):
            log.info("multikueue: %s sent to %s", key, cluster)

    async def _create_copies(
        self,
        cluster: str,
        key: Key,
        objects: list[Manifest],
        seen: Remote,
        adapter: jobframework.MultiKueueAdapter,
    ) -> None:
        """Copy to ``cluster`` each object that has no copy there yet (a group's, one by one)."""
        there = {str(c["metadata"].get("name")) for c in seen.jobs.get(key, [])}
        for obj in objects:
            if str(obj["metadata"].get("name")) not in there:
                await self._create_copy(cluster, key, obj, adapter)

    async def _nominate(self, workload: Manifest, targets: Sequence[str]) -> bool:
        """Name the workers that get a copy in ``status.nominatedClusterNames`` (as upstream's
        dispatchers do; the Workload rules let only a nominated worker become ``clusterName``).
        True when the Workload already said so, False when it was written now."""
        wanted = sorted(targets)
        status = workload.get("status") or {}
        if sorted(status.get("nominatedClusterNames") or []) == wanted:
            return True
        updated = copy.deepcopy(workload)
        if wanted:
            updated.setdefault("status", {})["nominatedClusterNames"] = wanted
        else:
            updated.setdefault("status", {}).pop("nominatedClusterNames", None)
        await self.store.update_status(updated)
        return False

    async def _create_copy(
        self,
        cluster: str,
        key: Key,
        job: Manifest,
        adapter: jobframework.MultiKueueAdapter,
        prebuilt: str = "",
    ) -> str:
        """Copy ``job`` to ``cluster``; what the worker answered when it refused it, else ""."""
        store = self.clusters.active(cluster)
        if store is None:
            return ""
        body = adapter.remote_copy(job)
        meta = body.setdefault("metadata", {})
        meta.setdefault("labels", {})[jobframework.MULTIKUEUE_ORIGIN_LABEL] = self.settings.origin
        meta.setdefault("annotations", {})[jobframework.MULTIKUEUE_WORKLOAD_ANNOTATION] = key.name
        if prebuilt:
            # A label, as v0.17 workers read it; a name too long for one goes in the annotation.
            where = meta["labels"] if len(prebuilt) <= 63 else meta["annotations"]
            where[jobframework.PREBUILT_WORKLOAD_KEY] = prebuilt
        try:
            created = await _create_on(store, body, key, cluster, refusals=True)
        except Refused as exc:
            log.warning("multikueue: %s: %s refused its %s: %s", key, cluster, body.get("kind"), exc)
            return str(exc)
        if created:
            log.info("multikueue: %s dispatched to %s", key, cluster)
        return ""

    async def _follow_winner(
        self,
        workload: Manifest,
        entry: Manifest,
        objects: list[Manifest],
        adapter: jobframework.MultiKueueAdapter,
        remote: Mapping[str, Remote],
    ) -> None:
        key = Key.of(workload)
        elected = str((workload.get("status") or {}).get("clusterName") or "")
        if not elected:
            return  # Ready before our write of clusterName came back through the watch
        connection = self.clusters.connections.get(elected)
        if connection is None or not connection.active:
            since = None if connection is None else connection.unreachable_since
            if since is None or self.clock() - since >= self.settings.worker_lost_timeout:
                await self._lose(workload, entry, f'The worker "{elected}" is lost')
            return
        seen = remote.get(elected)
        copies = None if seen is None else seen.jobs.get(key)
        refused = None if seen is None else out_of_sync(seen.workloads.get(key))
        if refused is not None:
            # As upstream: the worker will never run it; dispatch again rather than hold the
            # manager's quota for a job that waits there for ever.
            message = (
                f'Remote workload on worker cluster "{elected}" is out of sync with its user job, '
                f"resetting for re-dispatch: {refused}"
            )
            await self._lose(workload, entry, message)
            self._warn(workload, message)
            return
        if seen is not None and not copies and self._prebuilds(objects) and key in seen.workloads:
            # The winner holds the Workload sent before: now the job, which it queues.
            sent = str(seen.workloads[key]["metadata"]["name"])
            problem = await self._create_copy(
                elected, key, self._as_queued(objects[0], workload), adapter, prebuilt=sent
            )
            if problem:
                await self._refused(workload, entry, elected, problem)
            return
        if seen is not None and not copies:
            await self._lose(workload, entry, f'The workload\'s copy on "{elected}" is gone')
            return
        if seen is None or not copies:
            return
        # A group's pod made since (a failed one replaced, a StatefulSet's next) gets its copy
        # on the winner too; one gone from the group (scaled down) takes its copy with it.
        await self._create_copies(elected, key, objects, seen, adapter)
        names = {str(obj["metadata"].get("name")) for obj in objects}
        gone = [c for c in copies if str(c["metadata"].get("name")) not in names]
        if gone:
            await self._delete_copy(elected, key, gone, None)
        by_name = {str(c["metadata"].get("name")): c for c in copies}
        for job in objects:
            copy_ = by_name.get(str(job["metadata"].get("name")))
            mirrored = None if copy_ is None else adapter.mirror_status(job, copy_)
            if mirrored is not None and not (job.get("spec") or {}).get("suspend"):
                await self.store.update_status(mirrored)

    async def _refused(self, workload: Manifest, entry: Manifest, cluster: str, problem: str) -> None:
        """The winner refused the job (its webhook, its validation): say so on the check's message
        and in an Event; the copy is tried again each poll, as upstream retries it."""
        message = f'The worker "{cluster}" refused the job: {problem}'
        if entry.get("message") != message[:32768]:
            await self._set_check(workload, entry, str(entry.get("state")), message)
        self._warn(workload, message)

    def _warn(self, workload: Manifest, message: str) -> None:
        if self.on_event is not None:
            self.on_event(workload, "Warning", EVENT_REASON, message)

    async def _lose(self, workload: Manifest, entry: Manifest, message: str) -> None:
        """Send the check to Retry (the engine evicts and requeues) and forget the worker elected."""
        log.warning("multikueue: %s: %s; dispatching it again", Key.of(workload), message)
        await self._set_check(workload, entry, "Retry", message, "")

    async def _forget_mirrored(
        self, job: Manifest, adapter: jobframework.MultiKueueAdapter, state: object
    ) -> None:
        """Clear the status a copy no longer elected left on the manager's job, which never ran
        here: with that copy's counts it would look active for ever, its eviction never complete."""
        if state == "Ready":
            return
        cleared = adapter.status_forgotten(job)
        if cleared is not None:
            await self.store.update_status(cleared)

    async def _set_check(
        self, workload: Manifest, entry: Manifest, state: str, message: str, cluster: str | None = None
    ) -> None:
        updated = copy.deepcopy(workload)
        status = updated.setdefault("status", {})
        now = _time(self.clock())
        checks = []
        for current in status.get("admissionChecks") or []:
            if current.get("name") == entry.get("name"):
                current = {**current, "state": state, "message": message[:32768]}
                if entry.get("state") != state:
                    current["lastTransitionTime"] = now
            checks.append(current)
        status["admissionChecks"] = checks
        if cluster is not None:
            # The elected worker replaces the nomination; a lost one clears both, as an eviction does.
            status.pop("nominatedClusterNames", None)
            if cluster:
                status["clusterName"] = cluster
            else:
                status.pop("clusterName", None)
        await self.store.update_status(updated)
        log.info("multikueue: %s: check %s %s (%s)", Key.of(workload), entry.get("name"), state, message)

    async def _write_check_active(
        self, check: Manifest, configs: Mapping[str, Manifest], active: set[str], known: set[str]
    ) -> None:
        status, reason, message = check_active(check, configs, active, known)
        text = "True" if status else "False"
        conditions = conditions_of(check)
        current = condition(check, "Active")
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
            text,
            reason,
            message,
        ):
            return
        wanted = {
            "type": "Active",
            "status": text,
            "reason": reason,
            "message": message,
            "observedGeneration": int((check.get("metadata") or {}).get("generation") or 0),
            "lastTransitionTime": _time(self.clock())
            if current is None or current.get("status") != text
            else current.get("lastTransitionTime"),
        }
        updated = copy.deepcopy(check)
        updated.setdefault("status", {})["conditions"] = [
            c for c in conditions if c.get("type") != "Active"
        ] + [wanted]
        with contextlib.suppress(Conflict, NotFound):
            await self.store.update_status(updated)

    # -------------------------------------------------------------- collect

    async def _collect(
        self, remote: Mapping[str, Remote], checks: Mapping[str, Manifest], configs: Mapping[str, Manifest]
    ) -> None:
        for cluster, seen in remote.items():
            # A pre-built Workload may be there without a job (a loser's, or the job not sent yet).
            for key in sorted(set(seen.jobs) | set(seen.workloads), key=str):
                if self._unwanted(key, cluster, remote, checks, configs):
                    await self._delete_copy(cluster, key, seen.jobs.get(key, []), seen.workloads.get(key))

    def _unwanted(
        self,
        key: Key,
        cluster: str,
        remote: Mapping[str, Remote],
        checks: Mapping[str, Manifest],
        configs: Mapping[str, Manifest],
    ) -> bool:
        """Whether the copy ``cluster`` shows of the manager's Workload ``key`` is to be deleted.

        As upstream: when the Workload is gone (or not MultiKueue's); else only through a worker
        of its check's MultiKueueConfig, when it no longer wants a copy there (finished, evicted,
        assigned to another worker). A worker is known by its objects, not its name: two
        MultiKueueClusters may reach the same API server (a worker being renamed), and the
        copy one of them shows may be the very object the elected one runs.
        """
        workload = self.cache.get(key)
        entry = None if workload is None else self._entry(workload, checks)
        if workload is None or entry is None:
            return True
        config = configs.get(config_name(checks[str(entry["name"])]) or "")
        if cluster not in ((config or {}).get("spec") or {}).get("clusters", []):
            return False  # not a worker of its config: another name's business, or an orphan later
        if copy_wanted(workload, cluster, str(entry.get("state"))):
            return False
        elected = str((workload.get("status") or {}).get("clusterName") or "")
        if elected and elected != cluster and elected in remote:
            # The elected worker under another name: its own pass decides for this object.
            return not _uids(remote[elected], key) & _uids(remote[cluster], key)
        return True

    async def _delete_copy(
        self, cluster: str, key: Key, jobs: list[Manifest], workload: Manifest | None
    ) -> None:
        store = self.clusters.active(cluster)
        if store is None:
            return
        targets: Iterable[Manifest] = jobs if workload is None else [*jobs, workload]
        for obj in targets:
            meta = obj["metadata"]
            try:
                await store.delete(str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta["name"]))
            except NotFound:
                continue  # gone already: the worker deletes a job's Workload with the job
            except StoreError as exc:
                log.warning("multikueue: cannot delete %s in %s: %s", Key.of(obj), cluster, exc)
                return
        log.info("multikueue: removed the copy of %s from %s", key, cluster)


class Refused(Exception):
    """A worker's API server answered a create with a refusal (invalid, forbidden, no such
    namespace), not a passing failure: trying again gives the same answer."""


async def _create_on(
    store: WorkerStore, body: Manifest, key: Key, cluster: str, refusals: bool = False
) -> bool:
    """Create ``body`` (a copy for the manager's Workload ``key``) on a worker; False if it was not.

    With ``refusals``, a refusal is raised as `Refused` (the caller tells it on the manager).
    """
    try:
        await store.create(body)
    except AlreadyExists:
        return False  # made by an earlier poll, not listed yet; or someone else's: never overwritten
    except (Unavailable, Conflict) as exc:
        log.warning("multikueue: %s: cannot create its %s in %s now: %s", key, body.get("kind"), cluster, exc)
        return False
    except (StoreError, ValidationError) as exc:
        if refusals:
            raise Refused(str(exc)) from exc
        log.warning("multikueue: %s: cannot create its %s in %s: %s", key, body.get("kind"), cluster, exc)
        return False
    return True


def _uids(seen: Remote, key: Key) -> set[str]:
    """The uids of the objects a worker holds for the manager's Workload ``key``."""
    found = [*seen.jobs.get(key, []), *([seen.workloads[key]] if key in seen.workloads else [])]
    return {str(obj["metadata"].get("uid")) for obj in found if (obj.get("metadata") or {}).get("uid")}


def _annotation(job: Manifest, name: str) -> Key | None:
    meta = job.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(name)
    return None if not value else Key("Workload", str(meta.get("namespace") or ""), str(value))


def for_manager(
    settings: Settings | None, controller: type[MultiKueueController] = MultiKueueController
) -> Callable[[Manager], MultiKueueController] | None:
    """What `Manager.multikueue` takes: the check's controller over the manager's store, caches
    and events (None without settings: MultiKueue checks stay unanswered)."""
    if settings is None:
        return None

    def build(manager: Manager) -> MultiKueueController:
        pods = manager.pods
        return controller(
            manager.store,
            manager.registry,
            manager.admission.cache,
            manager.jobs.job_by_uid,
            settings,
            manager.clock,
            members=pods.members_of if pods is not None else no_members,
            # The engine holds every AdmissionCheck the cache does (a pass behind at most).
            check_names=lambda: list(manager.admission.state.admission_checks),
            on_event=None if manager.events is None else manager.events.record,
        )

    return build
