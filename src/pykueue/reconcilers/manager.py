"""The reconcilers as one asyncio program over a store: one watch per kind, six reconcilers.

Kubernetes mode runs it on the API server (`pykueue.kube`), standalone mode on its SQLite
file (`pykueue.standalone.manager`).

    API server ──watch──▶ events ─┬─▶ AdmissionController  (queueing kinds + Workloads → engine;
                                  │                         with TAS: Topologies, Nodes, Pods)
    (one stream per kind)         ├─▶ JobReconciler        (Jobs + Workloads)
                                  ├─▶ ProvisioningController (Workloads, AdmissionChecks, their
                                  │                         configs, the autoscaler's requests)
                                  └─▶ TopologyUngater      (Workloads + the pods of TAS workloads)
                 then, per batch of events (or every ``resync_seconds``), one pass:
                    1. admission.reconcile()   scheduling cycles; Workload admission/conditions sent
                    2. statuses.write()        ClusterQueue / LocalQueue / Cohort status, when changed
                    3. jobs.reconcile()        Workloads created, Jobs started / stopped / finished
                    4. provisioning.reconcile() ProvisioningRequests per attempt, check states written
                    5. ungater.reconcile()     gated pods of TAS workloads sent to their domains
                    6. node_failures.reconcile() failed nodes into TAS Workloads' unhealthyNodes
                    7. policy.flush()          policy revisions seen on the watches, as ConfigMaps

The status writes of steps 1 and 2 travel in the background: a pass decides and
starts them, and the next pass can run while they are on the wire (one write per
object at a time). Under load that keeps a release-then-admit from waiting behind
the previous pass's round trips. What a write learns (a newer object after a
conflict) comes back on the event queue and is applied between passes.

Everything runs on one event loop, so the reconcilers never race each other;
they only race other writers of the API server, which optimistic concurrency
settles (a conflict is skipped and the next event retries). The engine sees the
informer caches only: the API server is read at start (list) and followed
(watch) after that.

A change of a queue object that touches only its ``status`` (most often our own
status write coming back) is stored in the cache without re-applying the object
to the engine, so status writes do not feed back into scheduling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from pykueue.api import manifests
from pykueue.api.admission_check import MULTIKUEUE_CONTROLLER
from pykueue.engine import loading
from pykueue.engine.config import EngineConfig
from pykueue.engine.state import State
from pykueue.errors import InputError, PykueueError, StoreError
from pykueue.reconcilers import admission, integrations, jobframework, retention, workload_status
from pykueue.reconcilers.admission import AdmissionController
from pykueue.reconcilers.events import WORKLOAD_CONTROLLER, EventRecorder, job_controller, record_decisions
from pykueue.reconcilers.job_reconciler import JobReconciler
from pykueue.reconcilers.node_failures import NodeFailures
from pykueue.reconcilers.pod_groups import PodGroupReconciler
from pykueue.reconcilers.policy_recorder import PolicyRecorder
from pykueue.reconcilers.provisioning_controller import ProvisioningController
from pykueue.reconcilers.queue_status import QueueStatusWriter
from pykueue.reconcilers.topology_ungater import TopologyUngater
from pykueue.store.base import Key, Manifest, Store, WatchEvent, resource_version

log = logging.getLogger(__name__)

# Kinds whose status we write: a status-only change of these does not concern the engine.
STATUS_WRITTEN = frozenset({"ClusterQueue", "LocalQueue", "Cohort"})
# What the ProvisioningRequest admission check looks at.
PROVISIONING_KINDS = frozenset(
    {"Workload", "AdmissionCheck", "ProvisioningRequestConfig", "ProvisioningRequest"}
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _without_status(obj: Manifest) -> tuple[object, object]:
    meta = obj.get("metadata") or {}
    return ({k: v for k, v in obj.items() if k not in ("metadata", "status")}, meta.get("generation"))


class CheckController(Protocol):
    """An admission check's controller that runs its own loop beside the manager's passes."""

    async def run(self, stop: asyncio.Event) -> None: ...


@dataclass
class Manager:
    """Admission, job integration and queue status over one store."""

    store: Store
    config: EngineConfig = field(default_factory=EngineConfig)
    registry: jobframework.Registry = field(default_factory=integrations.registry)
    settings: jobframework.Settings = field(default_factory=jobframework.Settings)
    clock: Callable[[], datetime] = _utc_now
    resync_seconds: float = 1.0
    # At most one pass per this many seconds: events that arrive meanwhile are batched into
    # the next pass. Writes no longer hold a pass back (they travel in the background), so
    # without it a stream of events would run a pass per event, each paying the engine's
    # per-pass work (requeueing a cohort's parked workloads) again.
    min_pass_seconds: float = 0.1
    # Admissions and evictions decided ahead of their writes, at most (AdmissionController.reconcile).
    max_admissions_ahead: int = 64
    # Status writes in the background (see the module's docstring); standalone mode, on a
    # local SQLite file, keeps them inline.
    pipeline_writes: bool = True
    full_resync_seconds: float = 30.0
    # The ProvisioningRequest admission check: a cluster's autoscaler answers it; standalone
    # mode has none and turns it off.
    provisioning_checks: bool = True
    # The first list is retried while the API server is unreachable: first after this many
    # seconds, doubling up to the maximum (see `_first_sync`).
    sync_retry_seconds: float = 1.0
    sync_retry_max_seconds: float = 30.0
    # The MultiKueue admission check: builds its controller for this manager (this controller
    # as a manager dispatching to worker clusters, `pykueue.multikueue.controller.for_manager`);
    # None leaves such checks unanswered. A factory, so the reconcilers need not know MultiKueue.
    multikueue: Callable[[Manager], CheckController] | None = None
    multikueue_checks: CheckController | None = field(init=False, default=None)
    admission: AdmissionController = field(init=False)
    jobs: JobReconciler = field(init=False)
    # Pods queued alone or in groups (the "pod" framework); None when it is not enabled.
    pods: PodGroupReconciler | None = field(init=False, default=None)
    statuses: QueueStatusWriter = field(init=False)
    provisioning: ProvisioningController = field(init=False)
    # Topology-aware scheduling's pod side; None when the TopologyAwareScheduling gate is off.
    ungater: TopologyUngater | None = field(init=False, default=None)
    node_failures: NodeFailures | None = field(init=False, default=None)
    passes: int = 0
    # Called after each admission step with the engine state (metrics count its events);
    # the events are dropped afterwards either way, so they never pile up.
    on_pass: Callable[[State], None] | None = None
    # Kubernetes Events for the engine's decisions and the jobs' changes (Kubernetes mode).
    events: EventRecorder | None = None
    # Policy history (Kubernetes mode): revisions kept as ConfigMaps in this namespace; "": off.
    policy_history_namespace: str = ""
    policy: PolicyRecorder | None = field(init=False, default=None)
    # objectRetentionPolicies.workloads; the deleter exists only when a period is set.
    retention_policy: retention.Policy = field(default_factory=retention.Policy)
    retainer: retention.WorkloadRetention | None = field(init=False, default=None)
    _policy_problem: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.admission = self.admission_controller()
        self.admission.max_ahead = self.max_admissions_ahead
        # On by default, as upstream: admitted pods carry their queues' names as labels.
        queue_labels = self.config.gate("AssignQueueLabelsForPods")
        self.jobs = JobReconciler(
            self.store,
            self.registry,
            self.flavors,
            self.clock,
            self.priority_of,
            settings=self.settings,
            namespace_labels=self.namespace_labels,
            assign_queue_labels=queue_labels,
        )
        self.jobs.on_job_stopped = self.admission.complete_eviction
        if self.events is not None:
            self.jobs.on_event = self._job_event
        if self.config.wait_for_pods_ready is not None:
            # As upstream's job reconciler: PodsReady is kept only with waitForPodsReady.
            self.jobs.on_pods_ready = self.admission.report_pods_ready
        if self.registry.enabled("pod"):
            self.pods = PodGroupReconciler(
                self.store,
                self.flavors,
                self.clock,
                self.priority_of,
                settings=self.settings,
                assign_queue_labels=queue_labels,
            )
            self.pods.on_stopped = self.admission.complete_eviction
            self.pods.runs_elsewhere = self._runs_on_a_worker
        self.statuses = QueueStatusWriter(self.store, self.clock)
        self.provisioning = ProvisioningController(self.store, self.config, self.flavors, self.clock)
        self.ungater = self.topology_ungater()
        if self.ungater is not None:
            self.node_failures = NodeFailures(self.store, self.admission.cache, self.clock)
        if self.policy_history_namespace:
            self.policy = PolicyRecorder(self.store, self.policy_history_namespace, self.clock)
        if self.multikueue is not None:
            self.multikueue_checks = self.multikueue(self)
        if self.retention_policy.enabled:
            self.retainer = retention.WorkloadRetention(self.store, self.retention_policy, self.clock)
            if self.events is not None:
                self.retainer.on_event = self._retention_event

    def _job_event(self, job: Manifest, kind: str, reason: str, message: str) -> None:
        """An event about a job, reported as upstream's reconciler of its framework reports it."""
        assert self.events is not None
        framework = self.registry.framework_of(job)
        component = job_controller(framework) if framework else ""
        self.events.record(job, kind, reason, message, component)

    def _retention_event(self, target: Manifest, kind: str, reason: str, message: str) -> None:
        """A deleted finished Workload (upstream's workload controller) or deactivated job."""
        if target.get("kind") == "Workload":
            assert self.events is not None
            self.events.record(target, kind, reason, message, WORKLOAD_CONTROLLER)
        else:
            self._job_event(target, kind, reason, message)

    def _runs_on_a_worker(self, workload: Manifest) -> bool:
        """A Workload with a MultiKueue check runs on a worker cluster: its pods never start here
        (as upstream, whether or not this controller answers MultiKueue checks)."""
        for entry in (workload.get("status") or {}).get("admissionChecks") or []:
            check = self.admission.cache.get(Key("AdmissionCheck", "", str(entry.get("name") or "")))
            if ((check or {}).get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
                return True
        return False

    def _stored_workload(self, engine_key: str) -> Manifest | None:
        namespace, _, name = engine_key.partition("/")
        return self.admission.cache.get(Key("Workload", namespace, name))

    def admission_controller(self) -> AdmissionController:
        """The admission controller this manager runs (standalone mode runs its own kind)."""
        return AdmissionController(self.store, self.config, self.clock)

    def topology_ungater(self) -> TopologyUngater | None:
        """TAS's pod side: the engine follows Topologies, Nodes and Pods, and gated pods are let go.

        None with the TopologyAwareScheduling gate off (and in standalone mode, which has no
        nodes nor pods of its own to place).
        """
        if not self.config.gate("TopologyAwareScheduling"):
            return None
        self.admission.kinds = admission.with_topology_kinds(self.admission.kinds)
        return TopologyUngater(self.store, self.admission.cache.get)

    def priority_of(self, kind: str, name: str) -> int | None:
        return self.admission.state.priority_values.get((kind, name))

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        namespace = self.admission.cache.get(Key("Namespace", "", name))
        return None if namespace is None else ((namespace.get("metadata") or {}).get("labels") or {})

    def flavors(self) -> Mapping[str, Manifest]:
        return {key.name: obj for key, obj in self.admission.cache.items() if key.kind == "ResourceFlavor"}

    # ------------------------------------------------------------------- events

    def dispatch(self, event: WatchEvent) -> None:
        kind = str(event.object.get("kind", ""))
        if kind in self.admission.kinds:
            key = Key.of(event.object)
            previous = self.admission.cache.get(key)
            if (
                kind in STATUS_WRITTEN
                and event.type != "DELETED"
                and previous is not None
                and _without_status(previous) == _without_status(event.object)
            ):
                self.admission.cache[key] = event.object
            else:
                self.admission.handle(event)
                if kind == "Workload" and previous is not None and event.type != "DELETED":
                    self._reapply_reclaimable(previous, event.object)
        if kind in self.jobs.kinds():
            self.jobs.handle(event)
        if kind in PROVISIONING_KINDS and self.provisioning_checks:
            self.provisioning.handle(event)
        if self.pods is not None and kind in self.pods.kinds():
            self.pods.handle(event)
        if self.ungater is not None and kind in self.ungater.kinds():
            self.ungater.handle(event)
        if self.node_failures is not None and kind in self.node_failures.kinds():
            self.node_failures.handle(event)
        if self.policy is not None:
            self.policy.handle(event)
        if self.retainer is not None:
            self.retainer.handle(event)

    # --------------------------------------------------------------------- pass

    async def reconcile(self) -> int:
        """One pass of all six reconcilers; the number of writes made."""
        self.passes += 1
        try:
            writes = await self.admission.reconcile()
        finally:
            # Events first: on_pass (metrics) empties the engine's event list.
            if self.events is not None:
                record_decisions(self.events, self.admission.state, self._stored_workload)
            if self.on_pass is not None:
                self.on_pass(self.admission.state)
            self.admission.state.clear_events()
            self._forget_gone()
        writes += await self.statuses.write(
            self.admission.state, self.admission.cache, self.admission.rejected
        )
        writes += await self.jobs.reconcile()
        if self.provisioning_checks:
            writes += await self.provisioning.reconcile()
        if self.pods is not None:
            writes += await self.pods.reconcile()
        if self.ungater is not None:
            writes += await self.ungater.reconcile()
        if self.node_failures is not None:
            writes += await self.node_failures.reconcile()
        if self.policy is not None:
            writes += await self._record_policy()
        if self.retainer is not None:
            writes += await self.retainer.reconcile()
        return writes

    async def _record_policy(self) -> int:
        assert self.policy is not None
        if not self.policy.started:
            # Its first list failed (the namespace or the permission missing): try again.
            try:
                await self.policy.start(self.admission.cache.values())
            except PykueueError as exc:
                if str(exc) != self._policy_problem:  # said once, not every pass
                    log.warning("policy history not recording yet: %s", exc)
                    self._policy_problem = str(exc)
                return 0
        return await self.policy.flush()

    def _reapply_reclaimable(self, previous: Manifest, current: Manifest) -> None:
        # The admission controller skips a Workload change that touches only its status, but
        # status.reclaimablePods changes the quota an admitted workload holds. Feed the new
        # status to the engine until the admission controller does it itself.
        def reclaimable(obj: Manifest) -> object:
            return (obj.get("status") or {}).get("reclaimablePods") or []

        if reclaimable(previous) == reclaimable(current) or workload_status.is_finished(current):
            return
        key = Key.of(current)
        try:
            parsed = manifests.parse_object(current, source=str(key))
        except InputError as exc:
            log.warning("ignoring %s: %s", key, exc)
            return
        loading.apply(self.admission.state, parsed)

    def _forget_gone(self) -> None:
        # The admission controller forgets a workload when it finishes or is deleted; this is
        # the safety net for any other way out of the engine (a bounded sweep, seldom run).
        settled, live = self.admission.settled, self.admission.state.workloads
        if len(settled) > 2 * len(live) + 1024:
            self.admission.forget({k for k in settled if k not in live})

    async def sync(self) -> dict[str, str]:
        """List everything: the engine's kinds first, then Workloads and jobs for the job reconciler."""
        # The kinds are listed together: a server busy with creates answers each list slowly.
        pods = self.pods.sync() if self.pods is not None else asyncio.sleep(0, {})
        _, job_versions, pod_versions = await asyncio.gather(self.admission.sync(), self.jobs.sync(), pods)
        job_versions.update(pod_versions)
        if self.ungater is not None:
            self.ungater.seed(obj for key, obj in self.admission.cache.items() if key.kind == "Pod")
        if self.node_failures is not None:
            for key, obj in self.admission.cache.items():
                if key.kind == "Node":
                    self.node_failures.handle(WatchEvent("ADDED", obj, resource_version(obj)))
        if self.retainer is not None:
            # What finished or was deactivated while the controller was down is due too.
            for key, obj in self.admission.cache.items():
                if key.kind == "Workload":
                    self.retainer.handle(WatchEvent("ADDED", obj, resource_version(obj)))
        if self.policy is not None:
            # Before the first watch event: what changed while nobody recorded is compared now.
            try:
                await self.policy.start(self.admission.cache.values())
            except PykueueError as exc:
                log.warning("policy history not recording yet: %s", exc)
                self._policy_problem = str(exc)
        versions = dict(self.admission.versions)
        versions.update({k: v for k, v in job_versions.items() if k not in versions})
        if not self.provisioning_checks:
            return versions
        # The provisioning check starts from the admission cache's Workloads and checks.
        for key, obj in self.admission.cache.items():
            if key.kind in ("Workload", "AdmissionCheck"):
                self.provisioning.handle(WatchEvent("ADDED", obj, resource_version(obj)))
        versions.update(await self.provisioning.sync())
        return versions

    async def _first_sync(self, stop: asyncio.Event) -> dict[str, str] | None:
        """List everything, retrying while the API server cannot answer; None once stopped.

        A controller may start before its API server (a node reboot, a control-plane upgrade):
        like an informer, it waits and tries again, with a doubling delay up to
        ``sync_retry_max_seconds``, instead of exiting. An answer that will not change by
        waiting (a refused credential, a missing CRD) still ends the run.
        """
        delay = self.sync_retry_seconds
        while not stop.is_set():
            try:
                return await self.sync()
            except StoreError as exc:
                if not exc.retryable:
                    raise
                log.warning("cannot list from the API server yet (%s); retrying in %.0fs", exc, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)
            delay = min(delay * 2, self.sync_retry_max_seconds)
        return None

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """List, then follow every kind and reconcile until ``stop`` is set."""
        versions = await self._first_sync(stop)
        if versions is None:
            return
        events: asyncio.Queue[WatchEvent] = asyncio.Queue()
        # Status writes travel in the background from here on; what they learn comes back
        # as events on the same queue as the watches'.
        if self.pipeline_writes:
            self.admission.outbox = events
            self.statuses.background = True
        provisioning = self.provisioning.kinds() if self.provisioning_checks else []
        pod_kinds = self.pods.kinds() if self.pods is not None else []
        kinds = list(dict.fromkeys([*self.admission.kinds, *self.jobs.kinds(), *provisioning, *pod_kinds]))
        followers = [
            asyncio.create_task(self._follow(kind, versions.get(kind, ""), events)) for kind in kinds
        ]
        if self.multikueue_checks is not None:
            # Its own loop: a worker that does not answer must not hold the manager's passes.
            followers.append(asyncio.create_task(self.multikueue_checks.run(stop)))
        loop = asyncio.get_running_loop()
        next_full = loop.time() + self.full_resync_seconds
        try:
            await self._pass()
            if ready is not None:
                ready.set()
            while not stop.is_set():
                last_pass = loop.time()
                with contextlib.suppress(TimeoutError):
                    event = await asyncio.wait_for(events.get(), timeout=self._wait_seconds())
                    await asyncio.sleep(max(0.0, last_pass + self.min_pass_seconds - loop.time()))
                    self.dispatch(event)
                    while not events.empty():
                        self.dispatch(events.get_nowait())
                if loop.time() >= next_full:
                    # A level-triggered safety net: look at every job again now and then.
                    self.jobs.dirty.update(self.jobs.jobs)
                    if self.pods is not None:
                        self.pods.dirty.update(self.pods.members)
                    self.admission.rescan = True
                    self.provisioning.rescan = True
                    if self.ungater is not None:
                        self.ungater.dirty.update(self.ungater.members)
                    next_full = loop.time() + self.full_resync_seconds
                await self._pass()
        finally:
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)
            await self.admission.stop_writing()
            await self.statuses.stop_writing()
            self.admission.outbox = None
            self.statuses.background = False
            if self.events is not None:
                await self.events.close()

    def _wait_seconds(self) -> float:
        """Until the next event, the resync, or the engine's next deadline (a timeout, a backoff)."""
        due = self.admission.next_deadline()
        kept = self.retainer.next_deadline() if self.retainer is not None else None
        if kept is not None and (due is None or kept < due):
            due = kept
        if due is None:
            return self.resync_seconds
        return max(0.0, min(self.resync_seconds, (due - self.clock()).total_seconds()))

    async def _pass(self) -> None:
        try:
            await self.reconcile()
        except PykueueError as exc:
            # The API server may be down for a while: keep the caches and try on the next pass.
            log.warning("reconcile pass failed: %s", exc)

    async def _follow(self, kind: str, since: str, events: asyncio.Queue[WatchEvent]) -> None:
        while True:
            try:
                async for event in self.store.watch(kind, since):
                    since = event.resource_version
                    await events.put(event)
            except StoreError as exc:
                # The version may be gone for good (compacted, trimmed): retrying it would
                # fail for ever, so list the kind again and go on from what that returns.
                log.warning("watch of %s failed (%s); listing it again", kind, exc)
                await asyncio.sleep(1.0)
                with contextlib.suppress(StoreError):
                    since = await self._relist(kind, events)

    async def _relist(self, kind: str, events: asyncio.Queue[WatchEvent]) -> str:
        """Turn a fresh list into events: every object as modified, every vanished one as deleted."""
        items, version = await self.store.list(kind)
        present = set()
        for obj in items:
            present.add(Key.of(obj))
            await events.put(WatchEvent("MODIFIED", obj, resource_version(obj)))
        for key, obj in list(self.admission.cache.items()):
            if key.kind == kind and key not in present:
                await events.put(WatchEvent("DELETED", obj, version))
        return version
