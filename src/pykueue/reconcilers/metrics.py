"""Prometheus metrics with upstream Kueue's names and labels, read from the engine.

Two kinds of metric, two ways of getting them:

* **gauges** (pending workloads, usage, nominal quota, ClusterQueue status, active
  workloads) are not kept up to date on every change: a custom collector computes
  them from the engine's state *when Prometheus scrapes*. The scrape runs on the
  controller's event loop (the HTTP server lives there), so it reads a state no
  pass is changing;
* **counters and histograms** (admitted, evicted, preempted, admission wait time)
  count things that happened (every eviction, by its reason). After each pass the
  manager hands the engine's event list to `Metrics.observe_pass`, which counts it
  and then empties it, so the engine's audit trail does not grow for as long as the
  controller runs.

Every series carries ``replica_role`` (``leader``, ``follower`` or ``standalone``),
as upstream's; a follower has no engine state and reports only its role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pykueue.engine import events as engine_events
from pykueue.engine import pending_causes
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload

ROLES = ("leader", "follower", "standalone")
# Upstream's generateExponentialBuckets(16): 1, then 2.5 doubling.
WAIT_BUCKETS = (1.0, *(2.5 * 2**i for i in range(15)))
# generateExponentialBuckets(14), for the newer histograms.
SHORT_BUCKETS = WAIT_BUCKETS[:14]
CQ_STATUSES = ("pending", "active", "terminating")


def _resource_value(resource: str, milli: int) -> float:
    return milli / 1000


@dataclass
class Metrics:
    """One registry with pykueue's collectors; `state` says what to read at scrape time."""

    state: Callable[[], State | None] = lambda: None
    role: Callable[[], str] = lambda: "standalone"
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))
    # With leader election: controller-runtime's leader_election_master_status{name=<lease>}.
    lease_name: str = ""
    # Workload status writes waiting or under way, per lane (pykueue's own gauge).
    write_backlog: Callable[[], Mapping[str, int]] = dict
    # Whether the preemption of a workload took back an admission whose write had not gone
    # out yet: it was never visible (nothing ran, nothing is written about it, see
    # workload_status) and is not counted.
    unseen_preemption: Callable[[str], bool] = lambda key: False

    def __post_init__(self) -> None:
        self.admitted = Counter(
            "kueue_admitted_workloads_total",
            "The total number of admitted workloads per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            registry=self.registry,
        )
        self.wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.reserved = Counter(
            "kueue_quota_reserved_workloads_total",
            "The total number of quota reserved workloads per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            registry=self.registry,
        )
        self.reserved_wait = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota reservation, "
            "per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            buckets=SHORT_BUCKETS,
            registry=self.registry,
        )
        self.checks_wait = Histogram(
            "kueue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            buckets=SHORT_BUCKETS,
            registry=self.registry,
        )
        self.ready_wait = Histogram(
            "kueue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            buckets=SHORT_BUCKETS,
            registry=self.registry,
        )
        self.admitted_until_ready = Histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'cluster_queue'",
            ["cluster_queue", "priority_class", "replica_role"],
            buckets=SHORT_BUCKETS,
            registry=self.registry,
        )
        self.ready_to_evicted = Histogram(
            "kueue_pods_ready_to_evicted_time_seconds",
            "The time between a workload's pods being ready and its eviction, per 'cluster_queue', "
            "'reason' and 'underlying_cause'",
            ["cluster_queue", "reason", "underlying_cause", "replica_role"],
            buckets=SHORT_BUCKETS,
            registry=self.registry,
        )
        self.evicted = Counter(
            "kueue_evicted_workloads_total",
            "The number of evicted workloads per 'cluster_queue'",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"],
            registry=self.registry,
        )
        self.preempted = Counter(
            "kueue_preempted_workloads_total",
            "The number of preempted workloads per 'preempting_cluster_queue'",
            ["preempting_cluster_queue", "reason", "replica_role"],
            registry=self.registry,
        )
        self.preempted_resource_seconds = Counter(
            "pykueue_preempted_resource_seconds_total",
            "Resource-seconds of the runs preemption stopped (a run's quota x the time since its reservation), "
            "per 'cluster_queue' of the victim, its 'namespace' (the tenant), 'flavor' and 'resource'",
            ["cluster_queue", "namespace", "flavor", "resource", "replica_role"],
            registry=self.registry,
        )
        self.registry.register(_StateCollector(self))

    # --------------------------------------------------------------- events

    def observe_pass(self, state: State) -> None:
        """Count what the engine reported since the last pass, then drop its event list."""
        role = self.role()
        for event in state.events:
            wl = state.workloads.get(event.workload)
            if event.type == engine_events.EVICTED:
                # Every eviction but a preemption (counted below), with the engine's reason:
                # ClusterQueueStopped, LocalQueueStopped, Deactivated, AdmissionCheck...
                priority_class = wl.priority_class if wl is not None else ""
                cause = event.underlying_cause
                self.evicted.labels(event.cluster_queue, event.reason, cause, priority_class, role).inc()
                if event.waited is not None:
                    ready_for = _seconds(event.waited)
                    self.ready_to_evicted.labels(event.cluster_queue, event.reason, cause, role).observe(
                        ready_for
                    )
            if wl is None:
                continue
            if event.type in (engine_events.ADMITTED, engine_events.CHECKS_PASSED):
                self._admitted(state, event, wl, role)
            elif event.type == engine_events.PODS_READY and wl.admission is not None:
                labels = (wl.admission.cluster_queue, wl.priority_class, role)
                self.ready_wait.labels(*labels).observe(_seconds(state.now - _queued_at(wl)))
                if event.waited is not None:
                    self.admitted_until_ready.labels(*labels).observe(_seconds(event.waited))
            elif event.type == engine_events.PREEMPTED:
                if self.unseen_preemption(event.workload):
                    continue
                victim_cq = state.route_of(wl) or ""
                self.evicted.labels(victim_cq, "Preempted", "", wl.priority_class, role).inc()
                if event.waited is not None:
                    self.ready_to_evicted.labels(victim_cq, "Preempted", "", role).observe(
                        _seconds(event.waited)
                    )
                preemptor = state.workloads.get(wl.preempted_by or "")
                preempting = (preemptor and state.route_of(preemptor)) or victim_cq
                self.preempted.labels(preempting, event.reason, role).inc()
                self._lost(event, event.cluster_queue or victim_cq, wl.namespace, role)
        state.clear_events()

    def _lost(self, event: engine_events.Event, cluster_queue: str, namespace: str, role: str) -> None:
        """Count the work a preemption stopped: each held resource (whole units) times the run's
        seconds since its reservation, or since its last declared checkpoint (engine/lost_work.py)."""
        seconds = _seconds(event.lost_for)
        if not seconds:
            return
        for (flavor, resource), milli in event.held.items():
            counter = self.preempted_resource_seconds.labels(cluster_queue, namespace, flavor, resource, role)
            counter.inc(milli / 1000 * seconds)

    def _admitted(self, state: State, event: engine_events.Event, wl: Workload, role: str) -> None:
        """A reservation (ADMITTED) and an admission (at once, or when the checks passed)."""
        if wl.admission is None:
            return
        labels = (wl.admission.cluster_queue, wl.priority_class, role)
        queued_at = _queued_at(wl)
        if event.type == engine_events.ADMITTED:
            self.reserved.labels(*labels).inc()
            self.reserved_wait.labels(*labels).observe(
                _seconds(wl.admitted_at - queued_at) if queued_at else 0.0
            )
            if event.reason != "Admitted":
                return  # admitted later, when its admission checks are Ready
        else:
            self.checks_wait.labels(*labels).observe(_seconds(event.waited or 0))
        self.admitted.labels(*labels).inc()
        waited = _seconds(state.now - queued_at) if queued_at else 0.0
        self.wait_time.labels(*labels).observe(waited)


def _queued_at(wl: Workload) -> int:
    """When the workload was created or last requeued (microseconds; 0 unknown)."""
    return wl.evicted_at if wl.evicted_at is not None else (wl.created or 0)


def _seconds(micros: int) -> float:
    return max(0.0, micros / 1e6)


class _StateCollector(Collector):
    """The gauges, computed from the engine at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked: the families depend on the state

    def collect(self) -> Iterator[Metric]:
        role = self.metrics.role()
        pending = GaugeMetricFamily(
            "kueue_pending_workloads",
            "The number of pending workloads, per 'cluster_queue' and 'status'",
            labels=["cluster_queue", "status", "replica_role"],
        )
        reserving = GaugeMetricFamily(
            "kueue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per 'cluster_queue'",
            labels=["cluster_queue", "replica_role"],
        )
        admitted = GaugeMetricFamily(
            "kueue_admitted_active_workloads",
            "The number of admitted Workloads that are active (unsuspended and not finished), per 'cluster_queue'",
            labels=["cluster_queue", "replica_role"],
        )
        status = GaugeMetricFamily(
            "kueue_cluster_queue_status",
            "Reports 'cluster_queue' with its 'status' (pending, active or terminating)",
            labels=["cluster_queue", "status", "replica_role"],
        )
        usage = GaugeMetricFamily(
            "kueue_cluster_queue_resource_usage",
            "Reports the 'cluster_queue' total resource usage",
            labels=["cohort", "cluster_queue", "flavor", "resource", "replica_role"],
        )
        reservation = GaugeMetricFamily(
            "kueue_cluster_queue_resource_reservation",
            "Reports the 'cluster_queue' total resource reservation",
            labels=["cohort", "cluster_queue", "flavor", "resource", "replica_role"],
        )
        nominal = GaugeMetricFamily(
            "kueue_cluster_queue_nominal_quota",
            "Reports the 'cluster_queue' resource nominal quota",
            labels=["cohort", "cluster_queue", "flavor", "resource", "replica_role"],
        )
        by_cause = GaugeMetricFamily(
            "pykueue_pending_workloads_by_cause",
            "The number of workloads of a 'cluster_queue' that wait, per 'cause' "
            "(pykueue.engine.pending_causes lists them; admission-check ones hold quota already)",
            labels=["cluster_queue", "cause", "replica_role"],
        )
        if self.metrics.lease_name:
            master = GaugeMetricFamily(
                "leader_election_master_status",
                "1 while this replica holds the lease 'name', else 0",
                labels=["name"],
            )
            master.add_metric([self.metrics.lease_name], 1.0 if role == "leader" else 0.0)
            yield master
        backlog = GaugeMetricFamily(
            "pykueue_workload_status_writes_waiting",
            "Workload status writes queued or under way, per 'lane' (admission: admissions and "
            "evictions; explanation: pending workloads' conditions)",
            labels=["lane", "replica_role"],
        )
        for lane, count in sorted(self.metrics.write_backlog().items()):
            backlog.add_metric([lane, role], float(count))
        yield backlog
        state = self.metrics.state()
        if state is not None:
            state.ensure_tree()
            for name, cq in sorted(state.cluster_queues.items()):
                queue = state.queues.get(name)
                inadmissible = len(queue.inadmissible) if queue is not None else 0
                total = len(queue) if queue is not None else 0
                pending.add_metric([name, "active", role], total - inadmissible)
                pending.add_metric([name, "inadmissible", role], inadmissible)
                holding = list(state.admitted.get(name, {}).values())
                reserving.add_metric([name, role], len(holding))
                admitted_now = [wl for wl in holding if _is_admitted(wl)]
                admitted.add_metric([name, role], len(admitted_now))
                for cause, count in pending_causes.counts(state, name).items():
                    by_cause.add_metric([name, cause, role], float(count))
                current = "active" if state.is_active(name) else "pending"
                for value in CQ_STATUSES:
                    status.add_metric([name, value, role], 1.0 if value == current else 0.0)
                cohort = cq.cohort or ""
                used: dict[tuple[str, str], int] = {}
                for wl in admitted_now:
                    for fr, amount in wl.usage().items():
                        used[fr] = used.get(fr, 0) + amount
                reserved = state.cq_usage.get(name, {})
                for (flavor, resource), quota in sorted(cq.quotas.items()):
                    labels = [cohort, name, flavor, resource, role]
                    nominal.add_metric(labels, _resource_value(resource, quota.nominal))
                    usage.add_metric(labels, _resource_value(resource, used.get((flavor, resource), 0)))
                    reservation.add_metric(
                        labels, _resource_value(resource, reserved.get((flavor, resource), 0))
                    )
        yield from (pending, by_cause, reserving, admitted, status, usage, reservation, nominal)


def _is_admitted(wl: Workload) -> bool:
    cond = wl.conditions.get("Admitted")
    return cond is not None and cond.status == "True"
