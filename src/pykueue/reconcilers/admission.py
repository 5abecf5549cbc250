"""The admission controller: the engine, fed from a store, writing its decisions back.

    store ──list/watch──▶ informer cache ──parse──▶ engine State
                                                    │ run cycles until settled
    store ◀──update_status (Workload)───────────────┘

The store is the only source of truth. At start the controller lists every
kind and rebuilds the engine's state from it: a Workload whose status holds an
admission holds its quota again, so a crash or restart never admits a workload
twice nor leaks quota. Decisions are written as Workload status with the
resourceVersion last seen; a conflict means someone else wrote first, and the
next pass works from their version.

The controller never computes quota itself and never talks to jobs: job
adapters and the local executor react to the Workload status it writes. The
job reconciler, in the same process, tells it two things the store cannot say
quickly: an evicted workload's job has stopped (`complete_eviction`, with
asynchronous evictions the quota is released then), and whether an admitted
workload's pods are ready (`report_pods_ready`, for waitForPodsReady). States
written by admission check controllers arrive as Workload status changes and
are handed to the engine (`lifecycle.report_check`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pykueue.api import governance, manifests
from pykueue.api.workload import Workload as WorkloadManifest
from pykueue.engine import intake, lifecycle, loading, scheduler
from pykueue.engine.config import EngineConfig
from pykueue.engine.events import EVICTED, PREEMPTED
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload
from pykueue.errors import Conflict, InputError, NotFound
from pykueue.reconcilers import workload_status
from pykueue.reconcilers.write_queue import WriteQueue
from pykueue.store.base import Key, Manifest, Store, WatchEvent, resource_version, version_number

log = logging.getLogger(__name__)

# Applied in this order at start, so that references resolve before their users.
KINDS = (
    "Namespace",
    "ResourceFlavor",
    "AdmissionCheck",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "WorkloadPriorityClass",
    "PriorityClass",
    "LimitRange",
    "Workload",
)
# Topology-aware scheduling's inputs (Kubernetes mode): the topologies, the nodes, and the
# pods that hold node capacity. Listed after the queueing kinds, before the Workloads.
TOPOLOGY_KINDS = ("Topology", "Node", "Pod")
MAX_CYCLES_PER_PASS = 1000
# The write queue's lanes: admissions and evictions, then pending workloads' explanations.
LANES = ("admission", "explanation")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _signature(wl: Workload, stored: Manifest) -> tuple[Any, ...]:
    """What a workload's desired status (and its spec.active) is built from, cheaply comparable."""
    admission = None
    if wl.admission is not None:
        admission = (
            wl.admission.cluster_queue,
            tuple(
                (ps.name, ps.count, tuple(ps.flavors.items()), tuple(ps.resource_usage.items()))
                for ps in wl.admission.pod_sets
            ),
        )
    conditions = tuple(
        (c.type, c.status, c.reason, c.message, c.last_transition) for c in wl.conditions.values()
    )
    checks = tuple(
        (c.name, c.state, c.message, c.last_transition, c.requeue_after_seconds, c.retry_count)
        for c in wl.checks.values()
    )
    evictions = tuple(sorted(wl.eviction_counts.items()))
    return (
        resource_version(stored),
        wl.preempted_at,
        tuple(sorted((wl.lost_work or {}).items())),
        admission,
        conditions,
        wl.requeue_count,
        wl.requeue_at,
        checks,
        evictions,
        wl.active,
        wl.past_execution_seconds,
    )


def _urgency(wl: Workload, stored: Manifest) -> int:
    """Which writes go first: an admission (a job waits to start), an eviction, the rest."""
    if wl.admission is not None and not (stored.get("status") or {}).get("admission"):
        return 0
    if wl.admission is None and (stored.get("status") or {}).get("admission"):
        return 1
    return 2


def _only_words_changed(stored: Manifest, desired: Manifest) -> bool:
    """Nothing but the reasons and messages of a pending workload's conditions differ.

    The same conditions with the same statuses, no admission on either side: the
    workload was pending and stays pending, only the explanation moved (in a busy
    cohort a head flips between WaitingForQuota and Pending from cycle to cycle).
    """
    if stored.get("admission") or desired.get("admission"):
        return False
    if {k: v for k, v in stored.items() if k != "conditions"} != {
        k: v for k, v in desired.items() if k != "conditions"
    }:
        return False
    before = {c.get("type"): c for c in stored.get("conditions") or []}
    after = {c.get("type"): c for c in desired.get("conditions") or []}
    if before.keys() != after.keys():
        return False
    return all(cond.get("status") == before[kind].get("status") for kind, cond in after.items())


def _owned_by_a_job(obj: Manifest | None) -> bool:
    """Does a controller (a job) own this Workload? Only then is there a job to wait for."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("controller") for ref in refs)


def with_topology_kinds(kinds: tuple[str, ...] = KINDS) -> tuple[str, ...]:
    """``kinds`` with the topology kinds inserted just before the Workloads."""
    rest = tuple(k for k in kinds if k != "Workload")
    return (*rest, *TOPOLOGY_KINDS, *(("Workload",) if "Workload" in kinds else ()))


def _capacity_signature(pod: Manifest) -> tuple[Any, ...] | None:
    """What of a pod the engine's node usage depends on; None while it holds no node capacity.

    Kubelets (and kwok) rewrite pod status often; comparing this first keeps those writes
    from reaching the engine, where every pod change puts parked workloads back in line.
    """
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return None
    if labels.get(intake.TAS_POD_LABEL) == "true":
        return None  # counted through its workload's topology assignment

    def requests(containers: Any) -> tuple[Any, ...]:
        return tuple(repr((c.get("resources") or {}).get("requests")) for c in containers or [])

    return (
        spec["nodeName"],
        requests(spec.get("containers")),
        requests(spec.get("initContainers")),
        repr(spec.get("overhead")),
        repr(spec.get("resources")),
    )


def _unhealthy(obj: Manifest) -> Any:
    """Failed nodes under a TAS workload (the node failure controller's write): the engine re-places."""
    return (obj.get("status") or {}).get("unhealthyNodes")


def _same_status(previous: Manifest, obj: Manifest) -> bool:
    return (previous.get("status") or {}) == (obj.get("status") or {})


def _reclaimable(obj: Manifest) -> Any:
    """Pods that finished and give their quota back: the one status field the engine reads."""
    return (obj.get("status") or {}).get("reclaimablePods")


@dataclass
class AdmissionController:
    """Keeps one engine state in step with one store."""

    store: Store
    config: EngineConfig = field(default_factory=EngineConfig)
    clock: Callable[[], datetime] = _utc_now
    state: State = field(init=False)
    cache: dict[Key, Manifest] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    rejected: dict[Key, str] = field(default_factory=dict)
    # Per workload, what its stored status was last found to agree with (see `write_back`).
    settled: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    write_concurrency: int = 192
    # Decide at most this many admissions and evictions ahead of the writes that carry them
    # (0: no limit). See `reconcile`.
    max_ahead: int = 64
    words_refresh_seconds: float = 5.0
    _words_written: dict[str, int] = field(default_factory=dict)
    _words_due: dict[str, int] = field(default_factory=dict)
    # The Kubernetes manager's event queue: writes then run in the background (see write_back).
    outbox: asyncio.Queue[WatchEvent] | None = None
    _queue: WriteQueue | None = None
    _queue_loop: asyncio.AbstractEventLoop | None = None
    # Look at every workload on the next write-back, not only the touched ones.
    rescan: bool = True
    # The last pass's preemptions of workloads whose admission had not been written.
    unseen_preemptions: set[str] = field(default_factory=set)
    # The kinds listed and followed (Kubernetes mode adds TOPOLOGY_KINDS).
    kinds: tuple[str, ...] = KINDS
    _prefix_encoding: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        # A live deployment has check controllers: a check counts as active once its
        # controller says so (see EngineConfig.checks_active_without_condition).
        self.config = replace(self.config, checks_active_without_condition=False)
        self.state = State(config=self.config)
        # How topology assignments are written (upstream's default: runs of hostname prefixes).
        self._prefix_encoding = self.config.gate("TASAssignmentsEncodingByHostnamePrefix")

    # ------------------------------------------------------------------- sync

    async def sync(self) -> None:
        """Rebuild the engine state from everything stored now."""
        self.state = State(config=self.config, now=intake.micros(self.clock()))
        self.cache.clear()
        self.settled.clear()
        self.rescan = True
        # All kinds listed at once (a busy API server answers each slowly), applied in order.
        listed = await asyncio.gather(*(self.store.list(kind) for kind in self.kinds))
        for kind, (items, version) in zip(self.kinds, listed, strict=True):
            self.versions[kind] = version
            for obj in items:
                if kind == "Pod":
                    self._apply_pod(Key.of(obj), None, obj)
                else:
                    self._apply(obj)

    def handle(self, event: WatchEvent) -> None:
        """Apply one watched change to the cache and the engine."""
        obj = event.object
        key = Key.of(obj)
        if event.type == "DELETED":
            self.cache.pop(key, None)
            self.rejected.pop(key, None)
            loading.delete(self.state, key.kind, key.namespace, key.name)
            if key.kind == "Workload":
                self.forget({f"{key.namespace or 'default'}/{key.name}"})
            return
        previous = self.cache.get(key)
        if previous is not None and version_number(obj) <= version_number(previous):
            return  # our own write echoed back, or an older version we already moved past
        if key.kind == "Pod":
            self._apply_pod(key, previous, obj)
            return
        if key.kind == "Workload" and previous is not None and self._only_status_changed(previous, obj):
            if workload_status.is_finished(obj):
                self.cache[key] = obj
                self._finish(key)
                return
            if _reclaimable(previous) == _reclaimable(obj) and _unhealthy(previous) == _unhealthy(obj):
                # Someone else's status write (ours come back with a version already cached):
                # take the check states it carries, and compare the rest with the engine's
                # view on the next write-back.
                self.cache[key] = obj
                engine_key = f"{key.namespace or 'default'}/{key.name}"
                self._take_check_states(engine_key, obj)
                wl = self.state.workloads.get(engine_key)
                if wl is not None and wl.eviction is not None and not workload_status.holds_reservation(obj):
                    # Someone cleared the reservation of a workload being evicted (what
                    # upstream's job reconciler does once the job stopped): it is released.
                    self.state.complete_eviction(engine_key)
                self.state.touch(engine_key)
                return
        # A Workload whose spec or metadata changed, not its status, keeps the engine's status.
        self._apply(
            obj, keep_status=key.kind == "Workload" and previous is not None and _same_status(previous, obj)
        )

    def _take_check_states(self, engine_key: str, obj: Manifest) -> None:
        """Hand the engine the admission check states a check controller wrote."""
        wl = self.state.workloads.get(engine_key)
        if wl is None:
            return
        for written in (obj.get("status") or {}).get("admissionChecks") or []:
            name, value = str(written.get("name", "")), str(written.get("state", ""))
            mine = wl.checks.get(name)
            message = str(written.get("message") or "")
            updates = tuple(written.get("podSetUpdates") or ())
            if mine is not None and (mine.state, mine.message, mine.pod_set_updates) == (
                value,
                message,
                updates,
            ):
                continue
            try:
                lifecycle.report_check(
                    self.state,
                    engine_key,
                    name,
                    value,
                    message,
                    written.get("requeueAfterSeconds"),
                    updates,
                )
            except (KeyError, ValueError) as exc:
                log.warning("%s: admission check %s: %s", engine_key, name, exc)

    # ------------------------------------------------------- from the job reconciler

    def complete_eviction(self, key: Key) -> None:
        """The job of an evicted workload has stopped: its quota may go (asynchronous evictions)."""
        self.state.complete_eviction(f"{key.namespace or 'default'}/{key.name}")

    def report_pods_ready(self, key: Key, ready: bool) -> None:
        """The pods of an admitted workload are all ready, or one is not any more."""
        engine_key = f"{key.namespace or 'default'}/{key.name}"
        if engine_key in self.state.workloads:
            lifecycle.report_pods_ready(self.state, engine_key, ready)

    def next_deadline(self) -> datetime | None:
        """When the engine has work next without any event (a PodsReady timeout, a backoff's end)."""
        due = lifecycle.next_deadline(self.state)
        return None if due is None else intake.from_micros(due)

    @staticmethod
    def _only_status_changed(old: Manifest, new: Manifest) -> bool:
        return old.get("spec") == new.get("spec") and old.get("metadata", {}).get("generation") == new.get(
            "metadata", {}
        ).get("generation")

    def _apply(self, obj: Manifest, keep_status: bool = False) -> None:
        """Read a stored object into the engine.

        With ``keep_status`` (a Workload whose spec or metadata changed, not its status) the
        engine keeps its own status, which may be ahead of the stored one: a decision whose
        write is still queued (an eviction, a deactivation after a Rejected check). Reading the
        stored status back would forget it; a deactivated workload would then be evicted anew
        as if its user had switched it off, and the check's reason and message would be lost.
        """
        key = Key.of(obj)
        self.cache[key] = obj
        try:
            parsed = manifests.parse_object(obj, source=str(key))
        except InputError as exc:
            # A stored object the engine cannot read is reported, never half-applied.
            self.rejected[key] = str(exc)
            log.warning("ignored (the error names it): %s", exc)
            return
        self.rejected.pop(key, None)
        if key.kind == "Workload" and workload_status.is_finished(obj):
            self._finish(key)
            return
        if keep_status and f"{key.namespace or 'default'}/{key.name}" in self.state.workloads:
            assert isinstance(parsed, WorkloadManifest)
            loading.update_workload_spec(self.state, parsed)
            return
        loading.apply(self.state, parsed)

    def _apply_pod(self, key: Key, previous: Manifest | None, obj: Manifest) -> None:
        self.cache[key] = obj
        before = None if previous is None else _capacity_signature(previous)
        after = _capacity_signature(obj)
        if before == after:
            return
        if after is None:
            loading.delete(self.state, "Pod", key.namespace, key.name)
            return
        self._apply(obj)

    def _finish(self, key: Key) -> None:
        engine_key = f"{key.namespace or 'default'}/{key.name}"
        wl = self.state.workloads.get(engine_key)
        if wl is None:
            return
        if wl.admission is not None:
            self.state.finish(engine_key)
        else:
            self.state.delete_workload(engine_key)
        self.state.forget_finished(engine_key)  # nothing to remember: the store has it
        self.forget({engine_key})

    # -------------------------------------------------------------- reconcile

    async def reconcile(self) -> int:
        """Run the scheduler until it settles and write every changed Workload status.

        The engine decides faster than the API server takes writes (a client-side rate limit
        makes that certain). Quota the engine gave to an admission still queued for its
        write is held by nothing that runs, and the queues' status would count it as used.
        So, when writes travel in the background, a pass stops cycling once ``max_ahead``
        admissions and evictions wait to be written (counting its own): queued, or waiting
        for the client's rate limit. A write that has passed it no longer counts, however
        slowly the API server answers (with a burst of creations, 2-4 s: counting those
        held admissions far below the rate limit). The next pass, after writes went out,
        goes on. A cycle admits no more than that room either (a
        thousand queues' heads would otherwise all be decided at once, and a high-priority
        workload arriving a moment later would wait behind a thousand writes): it takes
        the best heads first and leaves the rest untried for the next one. Once admissions
        are waiting, a pass starts no cycle until half of ``max_ahead`` is free again, as a
        cycle weighs every queue's head however few it admits.
        """
        lifecycle.advance(self.state, intake.micros(self.clock()))
        limited = self.max_ahead > 0 and self.outbox is not None  # writes travel in the background
        backlog = self._urgent_backlog() if limited else 0
        budget = self.max_ahead - backlog if limited else MAX_CYCLES_PER_PASS**2
        if backlog and budget < self.max_ahead / 2:
            # A cycle looks at every head to admit a few: wait until half the room is free.
            budget = 0
        for _ in range(MAX_CYCLES_PER_PASS):
            if budget <= 0:
                break
            result = scheduler.run_cycle(self.state, budget if limited else None)
            budget -= len(result.admitted) + len(result.preempted)
            if not result.changed:
                break
        # Preemptions of admissions not written yet: nobody saw those (see workload_status).
        self.unseen_preemptions = {
            event.workload
            for event in self.state.events
            if event.type == PREEMPTED and not self.holds_stored_reservation(event.workload)
        }
        self._complete_unseen_evictions()
        return await self.write_back()

    def _complete_unseen_evictions(self) -> None:
        """An eviction with no job to wait for completes now: the admission was never written,
        or the Workload was created on its own (no job owns it)."""
        if not self.config.async_evictions:
            return
        for event in list(self.state.events):
            if event.type not in (PREEMPTED, EVICTED):
                continue
            wl = self.state.workloads.get(event.workload)
            if wl is None or wl.eviction is None:
                continue
            stored = self.cache.get(Key("Workload", wl.namespace, wl.name))
            if not workload_status.holds_reservation(stored) or not _owned_by_a_job(stored):
                self.state.complete_eviction(wl.key)

    async def write_back(self) -> int:
        """Queue a status write for every workload whose engine view differs from the store.

        Only the workloads the engine touched since the last write-back, or whose stored
        object changed, are looked at (``rescan`` asks for all of them once, a safety net
        the manager pulls now and then). Building a status document costs a deep copy; a
        cheap signature of what it is built from skips those that still agree.

        The writes wait in a `WriteQueue`: admissions and evictions have
        ``write_concurrency`` slots, ranked by the priority they serve (an eviction by its
        preemptor's, just ahead of that admission); the explanations of pending workloads
        have a quarter as many slots of their own, so they never hold an admission back,
        and start none while admissions are queued (under a rate limit they would take the
        tokens the admissions wait for).
        A status is built when its slot frees up, from the engine's view then.

        With an ``outbox`` (the Kubernetes manager's event queue) the writes run in the
        background and this returns the number queued: the next pass decides while they
        travel, and what a write learns (a newer object after a conflict, a deletion)
        comes back through the outbox to be applied between passes, never in the middle
        of one. Without one, this waits for them and returns the number written.
        """
        now = intake.micros(self.clock())
        if self.rescan:
            self.rescan = False
            candidates: list[str] = list(self.state.workloads)
        else:
            due = [name for name, at in self._words_due.items() if at <= now]
            for name in due:
                del self._words_due[name]
            candidates = sorted(self.state.touched.union(due))
        self.state.clear_touched()
        queue = self._write_queue()
        offered = 0
        for engine_key in candidates:
            wl = self.state.workloads.get(engine_key)
            if wl is None:
                continue
            stored = self.cache.get(Key("Workload", wl.namespace, wl.name))
            if stored is None:
                continue
            signature = _signature(wl, stored)
            if self.settled.get(engine_key) == signature:
                continue
            desired = workload_status.desired_status(wl, stored.get("status"), self._prefix_encoding)
            deactivate = not wl.active and (stored.get("spec") or {}).get("active", True)
            noted = self._preemptions_note(wl, stored) is None
            if desired == (stored.get("status") or {}) and not deactivate and noted:
                self.settled[engine_key] = signature
                continue
            if self._words_later(engine_key, stored, desired, now):
                continue
            lane, rank = self._place(wl, stored)
            queue.offer(engine_key, lane, rank)
            self._words_written[engine_key] = now
            offered += 1
        if self.outbox is not None:
            return offered
        before = queue.written
        await queue.drain()
        errors = queue.take_errors()
        if errors:
            raise errors[0]
        return queue.written - before

    def _place(self, wl: Workload, stored: Manifest) -> tuple[int, tuple[int, ...]]:
        """The lane and rank of a workload's write: what it serves goes first."""
        urgency = _urgency(wl, stored)
        if urgency == 2:
            return 1, (-wl.priority,)
        served = wl.priority
        if urgency == 1 and wl.preempted_by:
            preemptor = self.state.workloads.get(wl.preempted_by)
            served = max(served, preemptor.priority) if preemptor is not None else served
        # At the same priority an eviction goes just before the admission it makes room for.
        return 0, (-served, 0 if urgency == 1 else 1)

    def holds_stored_reservation(self, engine_key: str) -> bool:
        """Does the stored Workload (as last seen) hold a quota reservation?"""
        namespace, _, name = engine_key.partition("/")
        return workload_status.holds_reservation(self.cache.get(Key("Workload", namespace, name)))

    def _urgent_backlog(self) -> int:
        """Admission and eviction writes queued or still waiting for the rate limit."""
        if self._queue is None:
            return 0
        return self._queue.ahead(0)

    def write_backlog(self) -> dict[str, int]:
        """Workload status writes queued or travelling, per lane (for the metrics)."""
        if self._queue is None:
            return dict.fromkeys(LANES, 0)
        return {LANES[lane]: count for lane, count in sorted(self._queue.waiting().items())}

    def _write_queue(self) -> WriteQueue:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._queue_loop is not loop:
            slots = {0: self.write_concurrency, 1: max(1, self.write_concurrency // 4)}
            # Explanations use spare capacity only: a pending workload admitted before its
            # explanation went out needs none (its admission write says it all).
            self._queue = WriteQueue(slots, self._send, spare_lanes=frozenset({1}))
            self._queue_loop = loop
        return self._queue

    async def _send(self, engine_key: str) -> int:
        """Write one workload's status as the engine sees it now (the queue calls this)."""
        wl = self.state.workloads.get(engine_key)
        if wl is None:
            return 0
        key = Key("Workload", wl.namespace, wl.name)
        stored = self.cache.get(key)
        if stored is None:
            return 0
        if not wl.active and (stored.get("spec") or {}).get("active", True):
            # The engine deactivated it (a Rejected check, too many requeues): spec.active is
            # the user's switch, written as a spec update before the status that explains it.
            written = await self._write_inactive(key, stored)
            if written is None:
                return 0
            stored = written
        desired = workload_status.desired_status(wl, stored.get("status"), self._prefix_encoding)
        sent = 0
        if desired != (stored.get("status") or {}):
            sent = await self._write_status(key, stored, desired)
        notes = self._notes(wl, self.cache.get(key) or stored)
        if notes:
            # After the status: an eviction must not wait for its bookkeeping.
            sent += await self._write_preemptions(key, notes)
        return min(sent, 1)

    def _notes(self, wl: Workload, stored: Manifest) -> dict[str, str]:
        """The pykueue annotations the stored Workload should carry and does not: its preemption
        times (`_preemptions_note`) and the work its preemptions threw away
        (``pykueue.io/lost-work``, written once one did, so `describe` shows it after a restart)."""
        notes: dict[str, str] = {}
        note = self._preemptions_note(wl, stored)
        if note is not None:
            notes[governance.PREEMPTED_AT] = note
        lost = governance.lost_work_text(wl.lost_work)
        carried = ((stored.get("metadata") or {}).get("annotations") or {}).get(governance.LOST_WORK, "")
        if lost and lost != carried:
            notes[governance.LOST_WORK] = lost
        return notes

    def _preemptions_note(self, wl: Workload, stored: Manifest) -> str | None:
        """The ``pykueue.io/preempted-at`` value the stored Workload should carry, None when it does.

        Written only for a workload of a ClusterQueue whose preemption contract counts
        preemptions (``maxPreemptions``): without one nothing reads the times, and the
        Workload stays as upstream writes it.
        """
        lq = self.state.local_queues.get(wl.queue_key)
        name = wl.admission.cluster_queue if wl.admission is not None else (lq.cluster_queue if lq else "")
        cq = self.state.cluster_queues.get(name)
        if cq is None or cq.contract is None or cq.contract.max_preemptions is None:
            return None
        text = governance.preempted_at_text(wl.preempted_at)
        carried = ((stored.get("metadata") or {}).get("annotations") or {}).get(governance.PREEMPTED_AT, "")
        return None if text == carried or not text else text

    async def _write_preemptions(self, key: Key, notes: dict[str, str]) -> int:
        stored = self.cache.get(key)
        if stored is None:
            return 0
        meta = dict(stored.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **notes}
        try:
            written: Manifest = await self.store.update({**stored, "metadata": meta})
        except Conflict:
            # Someone wrote first: the fresh object comes back and a later pass tries again.
            with contextlib.suppress(NotFound):
                fresh = await self.store.get(key.kind, key.namespace, key.name)
                self._learned(WatchEvent("MODIFIED", fresh, resource_version(fresh)))
            return 0
        except NotFound:
            return 0
        current = self.cache.get(key)
        if current is None or version_number(current) <= version_number(written):
            self.cache[key] = written
        return 1

    async def _write_inactive(self, key: Key, stored: Manifest) -> Manifest | None:
        update = dict(stored)
        update["spec"] = {**(stored.get("spec") or {}), "active": False}
        try:
            written: Manifest = await self.store.update(update)
        except Conflict:
            with contextlib.suppress(NotFound):
                fresh = await self.store.get(key.kind, key.namespace, key.name)
                self._learned(WatchEvent("MODIFIED", fresh, resource_version(fresh)))
            return None
        except NotFound:
            self._learned(WatchEvent("DELETED", stored, resource_version(stored)))
            return None
        self.cache[key] = written
        return written

    def _words_later(self, engine_key: str, stored: Manifest, desired: dict[str, Any], now: int) -> bool:
        """Hold back a change of a pending workload's words only, if they were written lately.

        A pending head's reason and message ("... 5 more CPUs needed") change with every
        cycle of a busy cohort. A change of any condition's status (admitted, evicted,
        a first explanation) is written at once; new words for a workload that stays
        pending at most every ``words_refresh_seconds`` (the latest when they go out).
        """
        if not _only_words_changed(stored.get("status") or {}, desired):
            return False
        due = self._words_written.get(engine_key, -(10**18)) + int(self.words_refresh_seconds * 1e6)
        if due <= now:
            return False
        self._words_due[engine_key] = min(due, self._words_due.get(engine_key, due))
        return True

    def forget(self, engine_keys: set[str]) -> None:
        """Drop what is remembered of workloads that are gone (bounded memory)."""
        for book in (self.settled, self._words_written, self._words_due):
            for key in engine_keys:
                book.pop(key, None)

    async def drain(self) -> None:
        """Wait for the queued and travelling writes."""
        if self._queue is not None:
            await self._queue.drain()

    async def stop_writing(self) -> None:
        """Drop the queued writes, cancel those under way (shutdown, lost leadership)."""
        if self._queue is not None:
            await self._queue.stop()

    async def _write_status(self, key: Key, stored: Manifest, desired: dict[str, Any]) -> int:
        update = dict(stored)
        update["status"] = desired
        try:
            written = await self.store.update_status(update)
        except Conflict:
            try:
                fresh = await self.store.get(key.kind, key.namespace, key.name)
            except NotFound:
                return 0
            self._learned(WatchEvent("MODIFIED", fresh, resource_version(fresh)))
            return 0
        except NotFound:
            self._learned(WatchEvent("DELETED", stored, resource_version(stored)))
            return 0
        current = self.cache.get(key)
        if current is not None and version_number(current) <= version_number(written):
            self.cache[key] = written
        return 1

    def _learned(self, event: WatchEvent) -> None:
        if self.outbox is not None:
            self.outbox.put_nowait(event)
        else:
            self.handle(event)

    # -------------------------------------------------------------------- run

    async def run(self, stop: asyncio.Event, resync_seconds: float = 1.0) -> None:
        """Sync, then follow every kind's changes and reconcile until ``stop`` is set."""
        await self.sync()
        await self.reconcile()
        events: asyncio.Queue[WatchEvent] = asyncio.Queue()
        watchers = [asyncio.create_task(self._follow(kind, events)) for kind in self.kinds]
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    event = await asyncio.wait_for(events.get(), timeout=resync_seconds)
                    self.handle(event)
                    while not events.empty():
                        self.handle(events.get_nowait())
                await self.reconcile()
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def _follow(self, kind: str, events: asyncio.Queue[WatchEvent]) -> None:
        async for event in self.store.watch(kind, self.versions.get(kind, "0")):
            self.versions[kind] = event.resource_version
            await events.put(event)
