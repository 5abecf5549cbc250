"""The engine's whole world: queueing objects, workloads, quota usage and queues.

`State` is the single mutable value the engine works on. Callers change it
through its methods (apply/delete an object, add/finish/evict a workload);
`pykueue.engine.scheduler.run_cycle` makes admission decisions on it. Every
method is deterministic: dictionaries keep insertion order and every sort has
a total key.

Where a pending workload lives:

* in its ClusterQueue's queue (`queues`), when its LocalQueue and ClusterQueue
  exist and the LocalQueue is not stopped; the ClusterQueue may still be
  inactive (a missing flavor, a stop policy), and then it just waits there;
* otherwise in `unrouted`, keyed by its LocalQueue, until a change routes it.

Whenever quota is released (a workload finishes, is deleted or evicted) the
parked workloads of every ClusterQueue in the same cohort tree become active
again, as upstream's `QueueInadmissibleWorkloads` does; object changes do the
same for the queues they may affect.

An eviction has two halves (`pykueue.engine.evictions`): `evict` marks the
workload evicted while it still holds its quota, `complete_eviction` releases
the quota once its job stopped. With ``config.async_evictions`` off (scenario
files, the simulator) the second half follows the first at once.

A pending workload the scheduler cannot consider (its queue is missing or
stopped, its ClusterQueue inactive, it is deactivated or admission-gated) says
so in ``QuotaReserved=False`` with upstream's reason, as upstream's workload
controller writes it (`explain_waiting`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pykueue.engine import (
    activeness,
    admission_checks,
    admission_fair_sharing,
    cohort_shape,
    cohort_tree,
    contract,
    evictions,
    pods_ready,
    specs,
    waiting,
)
from pykueue.engine.cohort_tree import Node
from pykueue.engine.config import EngineConfig
from pykueue.engine.events import CHECKS_PASSED, EVICTED, FINISHED, Event
from pykueue.engine.put_offs import PutOffs
from pykueue.engine.queueing import ClusterQueueQueue
from pykueue.engine.resources import Quantities, add_into
from pykueue.engine.topology_snapshot import Cluster, NodeView, Requests
from pykueue.engine.waiting import EXPLICIT_STATUS
from pykueue.engine.workloads import Condition, Workload


@dataclass(slots=True)
class State:
    """Everything the engine knows. Read its fields; change them only through its methods
    (objects: ``apply_*``/``delete_*``; workloads: ``add_workload`` ... ``deactivate``; the
    rest: the bookkeeping methods), which keep the fields consistent with each other."""

    config: EngineConfig = field(default_factory=EngineConfig)
    flavors: dict[str, specs.ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, specs.ClusterQueue] = field(default_factory=dict)
    cohorts: dict[str, specs.Cohort] = field(default_factory=dict)
    local_queues: dict[str, specs.LocalQueue] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    admission_checks: dict[str, specs.AdmissionCheck] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    queues: dict[str, ClusterQueueQueue] = field(default_factory=dict)
    unrouted: dict[str, dict[str, Workload]] = field(default_factory=dict)
    admitted: dict[str, dict[str, Workload]] = field(default_factory=dict)
    cq_usage: dict[str, Quantities] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    cohort_nodes: dict[str, Node] = field(default_factory=dict)
    generation: dict[str, int] = field(default_factory=dict)
    inactive_reason: dict[str, str] = field(default_factory=dict)
    inactive_kind: dict[str, str] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    # Keys of workloads whose admission, conditions or requeue state may have changed since
    # the owner last looked; a controller writes those back and clears the set. Growing
    # without a reader is bounded by the live workloads (a set of their keys).
    touched: set[str] = field(default_factory=set)
    priority_values: dict[tuple[str, str], int] = field(default_factory=dict)
    limit_ranges: dict[str, dict[str, list[specs.LimitRangeItem]]] = field(default_factory=dict)
    finished: dict[str, Workload] = field(default_factory=dict)
    afs: admission_fair_sharing.Ledger | None = None
    cycle: int = 0
    now: int = 0
    _next_seq: int = 0
    _tree_dirty: bool = True
    _tree_members: cohort_shape.Members = field(default_factory=cohort_shape.Members)
    # Workloads holding a reservation whose pods are not ready (blockAdmission waits on them;
    # upstream's WorkloadsNotReady).
    pods_not_ready: set[str] = field(default_factory=set)
    # Workloads holding a reservation with a topology still to place after a ProvisioningRequest
    # (`delayedTopologyRequest: Pending`, engine/topology_delayed.py); stale keys are dropped there.
    topology_pending: set[str] = field(default_factory=set)
    # Workloads with a maximum execution time (`engine.execution_time`), admitted or not.
    time_limited: set[str] = field(default_factory=set)
    # ClusterQueues with an aging policy, and those whose workloads may still carry aged
    # priority (`engine.aging`); ClusterQueues with a preemption contract (`engine.contract`).
    # Only these are looked at, so a state without policies pays nothing for them.
    aging_queues: set[str] = field(default_factory=set)
    aged_queues: set[str] = field(default_factory=set)
    contract_queues: set[str] = field(default_factory=set)
    put_off: PutOffs = field(default_factory=PutOffs)  # preemptions put off (`engine.put_offs`)
    # Set when an object change may have changed why pending workloads wait.
    _waiting_dirty: bool = False
    _requeue_all_due: bool = False  # every parked workload is to go back (`_requeue_all`)
    # Topologies, nodes, their other pods and the TAS usage (engine/topology_snapshot.py).
    cluster: Cluster = field(default_factory=Cluster)

    def __post_init__(self) -> None:
        self.cluster.share_hosts = self.config.gate("TASHandleOverlappingFlavors")
        afs = self.config.admission_fair_sharing
        if afs is not None and self.config.gate("AdmissionFairSharing"):
            self.afs = admission_fair_sharing.Ledger(afs)

    # ----------------------------------------------------------------- objects

    def _shape_changed(self) -> None:
        """An object the cohort trees or the queues' activeness depend on changed: both are
        worked out again (`ensure_tree`), and the pending workloads say again why they wait."""
        self._waiting_dirty = True
        self._tree_dirty = True
        self._tree_members.clear()

    def apply_flavor(self, flavor: specs.ResourceFlavor) -> None:
        self.flavors[flavor.name] = flavor
        self.cluster.apply_flavor(flavor)
        self._shape_changed()
        self._requeue_all()

    def delete_flavor(self, name: str) -> None:
        self.flavors.pop(name, None)
        self.cluster.delete_flavor(name)
        self._shape_changed()

    # Topology-aware scheduling: a change of the nodes may let parked workloads fit.

    def apply_topology(self, name: str, levels: tuple[str, ...]) -> None:
        self.cluster.apply_topology(name, levels)
        self._requeue_all()

    def delete_topology(self, name: str) -> None:
        self.cluster.delete_topology(name)

    def apply_node(self, node: NodeView) -> None:
        self.cluster.apply_node(node)
        self._requeue_all()

    def delete_node(self, name: str) -> None:
        self.cluster.delete_node(name)

    def apply_pod(self, key: str, node: str, requests: Requests | None) -> None:
        self.cluster.apply_pod(key, node, requests)
        self._requeue_all()

    def delete_pod(self, key: str) -> None:
        self.cluster.delete_pod(key)
        self._requeue_all()

    def apply_admission_check(self, check: specs.AdmissionCheck) -> None:
        self.admission_checks[check.name] = check
        self._shape_changed()
        self._requeue_all()

    def delete_admission_check(self, name: str) -> None:
        self.admission_checks.pop(name, None)
        self._shape_changed()

    def apply_cluster_queue(self, cq: specs.ClusterQueue) -> None:
        if cq.contract is None and self.config.default_contract is not None:
            cq = dataclasses.replace(cq, contract=self.config.default_contract)
        old = self.cluster_queues.get(cq.name)
        self.cluster_queues[cq.name] = cq
        self._waiting_dirty = True
        for policy, names in ((cq.aging, self.aging_queues), (cq.contract, self.contract_queues)):
            if policy is None:
                names.discard(cq.name)
            else:
                names.add(cq.name)
        queue = self.queues.get(cq.name)
        if queue is None:
            self.queues[cq.name] = ClusterQueueQueue(cq.name, cq.queueing_strategy)
            self.admitted.setdefault(cq.name, {})
            self.cq_usage.setdefault(cq.name, {})
        elif queue.strategy != cq.queueing_strategy:
            queue.strategy = cq.queueing_strategy
        self.queues[cq.name].usage_of = self.afs_usage if self.uses_afs(cq.name) else None
        self._tree_dirty = True
        self._tree_members.note(cq, old, self.cohorts)
        self._route_unrouted()
        if old is not None and old.cohort and old.cohort != cq.cohort:
            self._requeue_cohort_of_name(old.cohort)
        if old is not None and old.stop_policy != "None" and cq.stop_policy == "None":
            self._restart(self.queues[cq.name].held(), evictions.CLUSTER_QUEUE_STOPPED)
        if old is None or (old.admission_checks, old.check_on_flavors) != (
            cq.admission_checks,
            cq.check_on_flavors,
        ):
            self._sync_checks_of(cq.name)
        self._requeue_tree(cq.name)
        if cq.stop_policy == "HoldAndDrain":
            for wl in list(self.admitted.get(cq.name, {}).values()):
                self.evict(wl.key, evictions.CLUSTER_QUEUE_STOPPED, "The ClusterQueue is stopped")

    def delete_cluster_queue(self, name: str) -> None:
        self._waiting_dirty = True
        cq = self.cluster_queues.pop(name, None)
        if cq is None:
            return
        self.aging_queues.discard(name)
        self.contract_queues.discard(name)
        queue = self.queues.pop(name, None)
        if queue is not None:
            for wl in [*queue.active(), *queue.inadmissible.values()]:
                self.unrouted.setdefault(wl.queue_key, {})[wl.key] = wl
        self._shape_changed()
        if cq.cohort:
            self._requeue_cohort_of_name(cq.cohort)

    def apply_cohort(self, cohort: specs.Cohort) -> None:
        self.cohorts[cohort.name] = cohort
        self._shape_changed()
        self._requeue_all()

    def delete_cohort(self, name: str) -> None:
        self.cohorts.pop(name, None)
        self._shape_changed()
        self._requeue_all()

    def apply_local_queue(self, lq: specs.LocalQueue) -> None:
        old = self.local_queues.get(lq.key)
        self.local_queues[lq.key] = lq
        self._waiting_dirty = True
        if self.afs is not None and (
            old is None or old.consumed != lq.consumed or old.consumed_at != lq.consumed_at
        ):
            self.afs.load(lq, self.now)
        if old is not None and (old.cluster_queue != lq.cluster_queue or old.stop_policy != lq.stop_policy):
            self._unroute_local_queue(lq.key)
        if old is not None and old.stop_policy != "None" and lq.stop_policy == "None":
            self._restart(self.unrouted.get(lq.key, {}).values(), evictions.LOCAL_QUEUE_STOPPED)
        self._route_unrouted()
        if lq.stop_policy == "HoldAndDrain":
            held = [w for w in self.workloads.values() if w.admission is not None and w.queue_key == lq.key]
            for wl in held:
                self.evict(wl.key, evictions.LOCAL_QUEUE_STOPPED, "The LocalQueue is stopped")
        if lq.cluster_queue in self.queues:
            self._requeue_tree(lq.cluster_queue)

    def delete_local_queue(self, key: str) -> None:
        self._waiting_dirty = True
        if self.local_queues.pop(key, None) is not None:
            self._unroute_local_queue(key)

    def apply_namespace(self, name: str, labels: dict[str, str]) -> None:
        self._waiting_dirty = True
        self.namespaces[name] = dict(labels)
        self._requeue_all()

    def delete_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)

    def namespace_labels(self, name: str) -> dict[str, str]:
        return self.namespaces.get(name, {})

    # Priority classes and LimitRanges are read when a workload is (`pykueue.engine.loading`):
    # a change applies to the workloads read after it.

    def apply_priority_class(self, kind: str, name: str, value: int) -> None:
        """``kind`` is WorkloadPriorityClass or PriorityClass (each its own namespace of names)."""
        self.priority_values[(kind, name)] = value

    def delete_priority_class(self, kind: str, name: str) -> None:
        self.priority_values.pop((kind, name), None)

    def apply_limit_range(self, namespace: str, name: str, items: list[specs.LimitRangeItem]) -> None:
        self.limit_ranges.setdefault(namespace, {})[name] = items

    def delete_limit_range(self, namespace: str, name: str) -> None:
        self.limit_ranges.get(namespace, {}).pop(name, None)

    # ------------------------------------------------------------ bookkeeping

    def set_clock(self, now: int) -> None:
        """Set the clock without what `advance_clock` does on the way (decay, backoffs,
        contracts): for a state being loaded, or a caller that fires those itself."""
        self.now = now

    def begin_cycle(self) -> int:
        """A scheduling cycle starts: its number, which its events carry."""
        self.cycle += 1
        return self.cycle

    def record(self, event: Event) -> None:
        """A decision for the audit trail; its reader takes them with `clear_events`."""
        self.events.append(event)

    def clear_events(self) -> None:
        """The reader has what it wanted of `events`: without this the list only grows."""
        self.events.clear()

    def touch(self, key: str) -> None:
        """The workload's status changed outside a `State` method: its owner writes it back."""
        self.touched.add(key)

    def clear_touched(self) -> None:
        """The owner has taken the workloads `touched` names (or writes back none)."""
        self.touched.clear()

    def topology_settled(self, key: str) -> None:
        """No topology of the workload waits for a second pass any more (or it is gone)."""
        self.topology_pending.discard(key)

    def forget_finished(self, key: str) -> None:
        """A finished workload no one needs to hear about again (its store has it)."""
        self.finished.pop(key, None)

    def mark_pods_ready(self, key: str, ready: bool) -> None:
        """Keep `pods_not_ready` (what blockAdmission waits on) as a workload's pods report."""
        wl = self.workloads.get(key)
        if ready:
            self.pods_not_ready.discard(key)
        elif wl is not None and wl.admission is not None:
            self.pods_not_ready.add(key)

    def mark_aged(self, cq_name: str, aged: bool) -> None:
        """Whether a ClusterQueue's workloads may carry aged priority (`pykueue.engine.aging`)."""
        if aged:
            self.aged_queues.add(cq_name)
        else:
            self.aged_queues.discard(cq_name)

    def adopt_fair_sharing(self, ledger: admission_fair_sharing.Ledger | None) -> None:
        """Take over another state's admission-fair-sharing ledger (a forward run's copy)."""
        self.afs = ledger

    # --------------------------------------------------------------- workloads

    def add_workload(self, wl: Workload) -> None:
        """Add a new workload, pending or already holding a quota reservation."""
        if wl.key in self.workloads:
            self.delete_workload(wl.key)
        wl.seq = self._next_seq
        self._next_seq += 1
        self._insert(wl)

    def replace_workload(self, wl: Workload) -> None:
        """A new version of a known workload's spec; its status is already carried over.

        It keeps its place (arrival order) and its reservation; what the spec change
        means for the lifecycle follows: deactivated, reactivated, gated, ungated.
        """
        old = self.workloads.get(wl.key)
        if old is None:
            self.add_workload(wl)
            return
        wl.seq = old.seq
        if old.admission is not None:
            self._account(old, -1)
        else:
            self._dequeue(old)
        self.pods_not_ready.discard(wl.key)
        self._insert(wl)
        if old.admission is not None and wl.admission is None:
            self._requeue_tree(old.admission.cluster_queue)  # an admission gate took it back

    def _insert(self, wl: Workload) -> None:
        self.workloads[wl.key] = wl
        self.touched.add(wl.key)
        if wl.max_execution_seconds is not None:
            self.time_limited.add(wl.key)
        else:
            self.time_limited.discard(wl.key)
        if wl.gated_by and wl.admission is not None:
            # An admission gate takes the reservation back (upstream's workload controller).
            wl.admission = None
            evictions.unreserve(wl, waiting.GATED, f"Admission is gated by: {wl.gated_by}", self.now)
        if wl.admission is not None:
            self._account(wl, +1)
            self.sync_checks(wl)
            if not wl.active:
                # Deactivating an admitted workload evicts it, as upstream does.
                wl.requeue_count, wl.requeue_at = 0, None
                self.evict(wl.key, evictions.DEACTIVATED, evictions.DEACTIVATED_MESSAGE)
            return
        if not wl.active:
            evictions.deactivate_pending(wl, self.now)
        else:
            # Reactivated after a deactivation: Requeued=True, and it queues again.
            evictions.release(
                wl, (evictions.DEACTIVATED,), evictions.REACTIVATED, evictions.REACTIVATED_MESSAGE, self.now
            )
        self._enqueue(wl)

    def delete_workload(self, key: str) -> None:
        wl = self.workloads.pop(key, None)
        self.touched.discard(key)
        self.pods_not_ready.discard(key)
        self.time_limited.discard(key)
        if wl is None:
            self.finished.pop(key, None)
            return
        if wl.admission is not None:
            self._account(wl, -1)
            self._requeue_tree(wl.admission.cluster_queue)  # quota released
            return
        self._dequeue(wl)

    def finish(self, key: str, message: str = "") -> None:
        """An admitted workload completed: release its quota and keep it as finished."""
        wl = self.workloads.get(key)
        if wl is None or wl.admission is None:
            return
        cq = wl.admission.cluster_queue
        self._account(wl, -1)
        del self.workloads[key]
        self.touched.discard(key)
        self.time_limited.discard(key)
        wl.finished = True
        wl.eviction = None
        wl.conditions["Finished"] = Condition(
            "Finished", "True", "Succeeded", message or "Job finished", self.now
        )
        self.finished[key] = wl
        self.events.append(Event(self.cycle, key, FINISHED, message or "the workload finished"))
        self._requeue_tree(cq)  # quota released

    def evict(
        self,
        key: str,
        reason: str,
        message: str,
        preempted_reason: str = "",
        underlying_cause: str = "",
    ) -> None:
        """Evict an admitted workload: its job is stopped and it goes back to its queue.

        ``reason`` is the Evicted condition's (Preempted, PodsReadyTimeout,
        AdmissionCheck, ClusterQueueStopped, LocalQueueStopped, Deactivated...);
        a deactivation names its ``underlying_cause``. Records an Evicted event,
        except for a preemption (``preempted_reason``), which the scheduler records
        as its Preempted event. A workload already being evicted is left alone.

        The quota is released by `complete_eviction`: at once, unless
        ``config.async_evictions`` says the controller reports when the job stopped.
        """
        wl = self.workloads.get(key)
        if wl is None or wl.admission is None or wl.eviction is not None:
            return
        ready = wl.conditions.get(pods_ready.PODS_READY)
        ran = self.now - ready.last_transition if ready is not None and ready.status == "True" else None
        eviction = evictions.begin(wl, reason, message, self.now, preempted_reason, underlying_cause)
        wl.evicted_at = evictions.queue_time(wl, self.now, self.config)
        self.touched.add(key)
        if not preempted_reason:
            cq = eviction.cluster_queue
            self.record(Event(self.cycle, key, EVICTED, message, reason, cq, underlying_cause, ran))
        if not self.config.async_evictions:
            self.complete_eviction(key)

    def complete_eviction(self, key: str) -> None:
        """An evicted workload's job stopped: release its quota and requeue it (or not).

        Requeued says when it may be scheduled again (see `pykueue.engine.evictions`);
        a deactivated workload is kept but never queued. Does nothing for a workload
        that is not being evicted.
        """
        wl = self.workloads.get(key)
        if wl is None or wl.eviction is None or wl.admission is None:
            return
        eviction, wl.eviction = wl.eviction, None
        self._account(wl, -1)
        wl.admission = None
        wl.last_tried_flavor = None
        evictions.complete(wl, eviction, self.now)
        if self.config.wait_for_pods_ready is not None:
            pods_ready.on_unadmitted(wl, self.now)
        evictions.backoff_over(wl, self.now)
        self.sync_checks(wl)
        self.touched.add(key)
        self._enqueue(wl)
        self._requeue_tree(eviction.cluster_queue)  # quota released

    def deactivate(self, key: str, underlying_cause: str, message: str) -> None:
        """The engine deactivates a workload (spec.active false), as upstream's
        DeactivationTarget does: a Rejected admission check, too many requeues.

        An admitted workload is evicted (reason DeactivatedDueTo<cause>); its requeue
        state is cleared; it stays known but is never queued until reactivated.
        """
        wl = self.workloads.get(key)
        if wl is None or not wl.active:
            return
        wl.active = False
        wl.requeue_count, wl.requeue_at = 0, None
        self.touched.add(key)
        if wl.admission is not None:
            self.evict(
                key,
                evictions.DEACTIVATED,
                f"{evictions.DEACTIVATED_MESSAGE} due to {message}",
                underlying_cause=underlying_cause,
            )
            return
        self._dequeue(wl)
        evictions.deactivate_pending(wl, self.now)
        self._enqueue(wl)

    # ------------------------------------------------------- admission checks

    def sync_checks(self, wl: Workload) -> None:
        """`status.admissionChecks` follows the workload's ClusterQueue (and admission)."""
        lq = self.local_queues.get(wl.queue_key)
        routed = lq.cluster_queue if lq is not None else ""
        cq = self.cluster_queues.get(wl.admission.cluster_queue if wl.admission is not None else routed)
        if cq is None:
            return
        if admission_checks.sync(wl, admission_checks.applicable(cq, wl.admission), self.now):
            self.touched.add(wl.key)

    def _sync_checks_of(self, cq_name: str) -> None:
        """A ClusterQueue's checks changed: every workload of it gets its list updated."""
        for wl in list(self.admitted.get(cq_name, {}).values()):
            self.sync_checks(wl)
            self.sync_admitted(wl)
        queue = self.queues.get(cq_name)
        if queue is not None:
            for wl in [*queue.active(), *queue.inadmissible.values()]:
                self.sync_checks(wl)

    def sync_admitted(self, wl: Workload, at_reservation: bool = False) -> None:
        """Admitted follows the reservation and the checks (`admission_checks.sync_admitted`);
        once Admitted after waiting for its checks, the workload's CHECKS_PASSED is recorded."""
        became = admission_checks.sync_admitted(wl, self.now)
        if became is None:
            return
        self.touched.add(wl.key)
        if not became or wl.admission is None:
            return
        if self.config.wait_for_pods_ready is not None:
            pods_ready.on_admitted(wl, self.now)
        if not at_reservation:
            reserved = wl.conditions.get("QuotaReserved")
            waited = self.now - reserved.last_transition if reserved is not None else None
            cq = wl.admission.cluster_queue
            message = f"Admitted by ClusterQueue {cq}: every admission check is Ready"
            self.record(Event(self.cycle, wl.key, CHECKS_PASSED, message, "Admitted", cq, "", waited))

    def register_admission(self, wl: Workload) -> None:
        """Account a workload the scheduler just admitted (its admission is already set)."""
        self._account(wl, +1)
        if self.afs is not None and wl.admission is not None and self.uses_afs(wl.admission.cluster_queue):
            self.afs.charge_admission(wl)

    # ------------------------------------------------------- admission fair sharing

    def uses_afs(self, cq_name: str) -> bool:
        cq = self.cluster_queues.get(cq_name)
        return self.afs is not None and cq is not None and cq.admission_fair_sharing

    def afs_usage(self, wl: Workload) -> float:
        """The fair-sharing usage of a workload's LocalQueue (0 without admission fair sharing)."""
        if self.afs is None:
            return 0.0
        lq = self.local_queues.get(wl.queue_key)
        return self.afs.usage(wl.queue_key, lq.fair_weight if lq is not None else 1.0)

    def advance_clock(self, now: int) -> None:
        """Move the clock; LocalQueue consumption decays toward current usage."""
        if self.afs is not None and now > self.now:
            current = admission_fair_sharing.requests_by_local_queue(self.workloads.values(), self.uses_afs)
            for key in self.local_queues:
                self.afs.decay(key, current.get(key, {}), now)
        if now > self.now:
            self._end_protections(now)
        self.now = max(self.now, now)
        for queue in self.queues.values():
            # A backoff holds a workload one by one (`ClusterQueueQueue.park`), so only the
            # held ones can have one that has run out.
            for wl in [wl for wl in queue.held() if evictions.backoff_ended(wl, self.now)]:
                self.touched.add(wl.key)
                queue.remove(wl.key)
                queue.push(wl)
        for bucket in self.unrouted.values():  # not queued (LocalQueue stopped, missing): it ends too
            self.touched.update(wl.key for wl in bucket.values() if evictions.backoff_over(wl, self.now))

    def _protection_ends(self) -> Iterator[tuple[str, int]]:
        """(ClusterQueue, when a protection ends) for the admitted workloads of contract queues."""
        for name in sorted(self.contract_queues):
            for until in contract.ends(
                self.cluster_queues[name], self.admitted.get(name, {}).values(), self.now
            ):
                yield name, until

    def _end_protections(self, now: int) -> None:
        """Preemption contracts that end by ``now`` make their workloads candidates again:
        the parked workloads of the cohort tree get another look, as on a release."""
        for name in sorted({name for name, until in self._protection_ends() if until <= now}):
            self._requeue_tree(name)

    def protection_deadlines(self) -> list[int]:
        """When the preemption contracts of admitted workloads end (for `lifecycle.next_deadline`)."""
        return [until for _, until in self._protection_ends() if until < contract.FOREVER]

    # ------------------------------------------------------------------ quota

    def ensure_tree(self) -> None:
        """Rebuild the cohort tree and activeness after object changes."""
        if not self._tree_dirty:
            return
        self._tree_dirty = False
        self._waiting_dirty = True
        self.nodes, self.cohort_nodes, in_cycle = cohort_shape.build(self.cohorts, self.cluster_queues)
        for name in self.cluster_queues:
            self.generation[name] = self.generation.get(name, 0) + 1
        for node in [*self.nodes.values(), *self.cohort_nodes.values()]:
            if node.parent is None:
                cohort_tree.rebuild(node, self.cq_usage)
        self.inactive_reason = {}
        self.inactive_kind = {}
        for cq in self.cluster_queues.values():
            found = activeness.inactive(cq, self.flavors, self.admission_checks, in_cycle)
            if found is not None:
                self.inactive_kind[cq.name], self.inactive_reason[cq.name] = found

    def is_active(self, cq_name: str) -> bool:
        self.ensure_tree()
        return cq_name in self.cluster_queues and cq_name not in self.inactive_reason

    def _account(self, wl: Workload, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) an admitted workload's usage everywhere."""
        assert wl.admission is not None
        cq = wl.admission.cluster_queue
        usage = wl.usage()
        add_into(self.cq_usage.setdefault(cq, {}), usage, sign)
        if sign > 0:
            self.admitted.setdefault(cq, {})[wl.key] = wl
            if not pods_ready.is_ready(wl):
                self.pods_not_ready.add(wl.key)
            if any(ps.topology_pending for ps in wl.admission.pod_sets):
                self.topology_pending.add(wl.key)
        else:
            self.admitted.get(cq, {}).pop(wl.key, None)
            self.pods_not_ready.discard(wl.key)
            self.generation[cq] = self.generation.get(cq, 0) + 1
        if not self._tree_dirty and cq in self.nodes:
            cohort_tree.add_usages(self.nodes[cq], usage, sign)
        self.cluster.account(wl, sign)

    # ----------------------------------------------------------------- queues

    def route_of(self, wl: Workload) -> str | None:
        """The ClusterQueue a pending workload waits in, or None when it cannot be routed."""
        if not wl.active or wl.gated_by:
            return None  # deactivated (spec.active: false) or admission-gated: kept, never queued
        lq = self.local_queues.get(wl.queue_key)
        if lq is None or lq.stop_policy != "None" or lq.cluster_queue not in self.queues:
            return None
        return lq.cluster_queue

    def _enqueue(self, wl: Workload) -> None:
        self.sync_checks(wl)
        self._explain_waiting(wl)
        cq = self.route_of(wl)
        if cq is None:
            self.unrouted.setdefault(wl.queue_key, {})[wl.key] = wl
            return
        self._place(wl, cq)

    def _place(self, wl: Workload, cq: str) -> None:
        if evictions.backoff_over(wl, self.now):  # ran out before it got here (read back late)
            self.touched.add(wl.key)
        if self.backing_off(wl):
            self.queues[cq].park(wl)
            return
        queue = self.queues[cq]
        queue.push(wl)
        if self.config.gate(EXPLICIT_STATUS) and wl.admission is None and wl.key in queue.inadmissible:
            # It joined a shape parked as not fitting: it says so, with its twins' reason.
            reason = waiting.twin_reason(queue.twins(wl))
            if reason is not None and evictions.unreserve(wl, reason, waiting.BYPASSED_MESSAGE, self.now):
                self.touched.add(wl.key)

    def unpark(self, wl: Workload) -> None:
        """A held pending workload that may be admissible again goes back to its active queue."""
        for queue in self.queues.values():
            if wl.key in queue.inadmissible and queue.remove(wl.key) is not None:
                self._place(wl, queue.name)
                return

    def _restart(self, waiting: Iterable[Workload], reason: str) -> None:
        """A stopped queue runs again: its workloads evicted by the stop may be requeued."""
        new_reason, message = evictions.RESTARTED[reason]
        for wl in list(waiting):
            if evictions.release(wl, (reason,), new_reason, message, self.now):
                self.touched.add(wl.key)

    def backing_off(self, wl: Workload) -> bool:
        """Is the workload in a requeue backoff now (`evictions.backing_off`)?"""
        return evictions.backing_off(wl, self.now)

    def _dequeue(self, wl: Workload) -> None:
        for queue in self.queues.values():
            if queue.remove(wl.key) is not None:
                return
        bucket = self.unrouted.get(wl.queue_key)
        if bucket is not None:
            bucket.pop(wl.key, None)

    def _route_unrouted(self) -> None:
        for lq_key in list(self.unrouted):
            bucket = self.unrouted[lq_key]
            for wl in list(bucket.values()):
                cq = self.route_of(wl)
                if cq is not None:
                    del bucket[wl.key]
                    self.sync_checks(wl)
                    self._place(wl, cq)
            if not bucket:
                del self.unrouted[lq_key]

    def _unroute_local_queue(self, lq_key: str) -> None:
        for queue in self.queues.values():
            moving = [wl for wl in [*queue.active(), *queue.inadmissible.values()] if wl.queue_key == lq_key]
            for wl in moving:
                queue.remove(wl.key)
                self.unrouted.setdefault(lq_key, {})[wl.key] = wl

    def _requeue_tree(self, cq_name: str) -> None:
        """Unpark the inadmissible workloads of every ClusterQueue sharing ``cq_name``'s cohort tree."""
        cq = self.cluster_queues.get(cq_name)
        if cq is None or not cq.cohort:
            queue = self.queues.get(cq_name)
            if queue is not None:
                queue.unpark_all(self.backing_off)
            return
        self._requeue_cohort_of_name(cq.cohort)

    def _requeue_cohort_of_name(self, cohort: str) -> None:
        for name in self._tree_members.of_tree(cohort, self.cohorts, self.cluster_queues):
            queue = self.queues.get(name)
            if queue is not None and queue.inadmissible:
                queue.unpark_all(self.backing_off)

    def _requeue_all(self) -> None:
        """Parked workloads go back to their heaps at the next `explain_waiting` (a cycle's start):
        at a start each of thousands of namespaces walking every queue made loading quadratic."""
        self._requeue_all_due = True

    def _requeue_all_now(self) -> None:
        if not self._requeue_all_due:
            return
        self._requeue_all_due = False
        for queue in self.queues.values():
            if queue.has_parked():
                queue.unpark_all(self.backing_off)

    # ------------------------------------------------------ waiting, explained

    def explain_waiting(self) -> None:
        """After object changes: every pending workload says again why it waits, if blocked.

        Cheap when nothing changed since the last call; the scheduling cycle calls it
        first, the scenario runner after every step.
        """
        self.ensure_tree()
        self._requeue_all_now()
        if not self._waiting_dirty:
            return
        self._waiting_dirty = False
        for queue in self.queues.values():
            queue.forget_stamps()
            for wl in [*queue.active(), *queue.inadmissible.values()]:
                self._explain_waiting(wl)
        for bucket in self.unrouted.values():
            for wl in bucket.values():
                self._explain_waiting(wl)

    def _explain_waiting(self, wl: Workload) -> None:
        if wl.admission is None and waiting.explain(
            wl, self.blocker(wl), self.config.gate(EXPLICIT_STATUS), self.now
        ):
            self.touched.add(wl.key)

    def blocker(self, wl: Workload) -> tuple[str, str] | None:
        """Why no cycle can consider a pending workload now (`pykueue.engine.waiting`)."""
        lq = self.local_queues.get(wl.queue_key)
        cq = self.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        inactive = cq is not None and cq.name in self.inactive_reason
        return waiting.blocker(wl, lq, cq, inactive, self.namespace_labels(wl.namespace))
