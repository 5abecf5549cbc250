"""Feeding API objects into a `State`: apply and delete by kind.

This is the one dispatch from Kubernetes kinds to engine changes, shared by
the scenario runner, the simulator and the controllers.
"""

from __future__ import annotations

from typing import Any

from pykueue.api.admission_check import AdmissionCheck
from pykueue.api.cluster_queue import ClusterQueue
from pykueue.api.cohort import Cohort
from pykueue.api.core import LimitRange, Namespace, Node, Pod, PriorityClass
from pykueue.api.local_queue import LocalQueue
from pykueue.api.priority import WorkloadPriorityClass
from pykueue.api.resource_flavor import ResourceFlavor
from pykueue.api.topology import Topology
from pykueue.api.workload import Workload
from pykueue.engine import admission_checks, evictions, intake, lifecycle
from pykueue.engine.state import State
from pykueue.engine.workloads import CHECK_READY, Condition, Eviction
from pykueue.engine.workloads import Workload as EngineWorkload

# Kinds the engine reads but that do not change admission decisions (yet).
IGNORED_KINDS = frozenset({"ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster", "Job"})


def apply(state: State, obj: Any) -> None:
    """Create or replace one object in the state."""
    kind = obj.kind
    if kind == "ResourceFlavor":
        assert isinstance(obj, ResourceFlavor)
        state.apply_flavor(intake.resource_flavor(obj))
    elif kind == "ClusterQueue":
        assert isinstance(obj, ClusterQueue)
        state.apply_cluster_queue(intake.cluster_queue(obj))
    elif kind == "Cohort":
        assert isinstance(obj, Cohort)
        state.apply_cohort(intake.cohort(obj))
    elif kind == "LocalQueue":
        assert isinstance(obj, LocalQueue)
        state.apply_local_queue(intake.local_queue(obj))
    elif kind == "Namespace":
        assert isinstance(obj, Namespace)
        state.apply_namespace(obj.metadata.name, dict(obj.metadata.labels))
    elif kind == "AdmissionCheck":
        assert isinstance(obj, AdmissionCheck)
        state.apply_admission_check(intake.admission_check(obj, state.config.checks_active_without_condition))
    elif kind == "WorkloadPriorityClass":
        assert isinstance(obj, WorkloadPriorityClass)
        state.apply_priority_class("WorkloadPriorityClass", obj.metadata.name, obj.value)
    elif kind == "PriorityClass":
        assert isinstance(obj, PriorityClass)
        state.apply_priority_class("PriorityClass", obj.metadata.name, obj.value)
    elif kind == "LimitRange":
        assert isinstance(obj, LimitRange)
        namespace = obj.metadata.namespace or "default"
        state.apply_limit_range(namespace, obj.metadata.name, intake.limit_range_items(obj))
    elif kind == "Workload":
        assert isinstance(obj, Workload)
        add_workload(state, obj)
    elif kind == "Topology":
        assert isinstance(obj, Topology)
        state.apply_topology(obj.metadata.name, tuple(obj.level_labels()))
    elif kind == "Node":
        assert isinstance(obj, Node)
        state.apply_node(intake.node_view(obj))
    elif kind == "Pod":
        assert isinstance(obj, Pod)
        usage = intake.pod_usage(obj)
        key = f"{obj.metadata.namespace or 'default'}/{obj.metadata.name}"
        state.apply_pod(key, usage[0] if usage else "", usage[1] if usage else None)
    elif kind not in IGNORED_KINDS:
        raise ValueError(f"the engine does not handle kind {kind}")


def workload(state: State, obj: Workload) -> EngineWorkload:
    """The engine's view of a Workload manifest under the state's configuration."""
    namespace = obj.metadata.namespace or "default"
    items = [item for items in state.limit_ranges.get(namespace, {}).values() for item in items]
    config = state.config
    wl = intake.workload(
        obj, state.priority_values, items, config.gate("PodLevelResources"), config.resources
    )
    if obj.spec.priority is None and obj.spec.priority_class_ref is None:
        _default_priority(state, wl)
    if not config.gate("ReclaimablePods"):
        wl.reclaimable = {}
    if not config.gate("AdmissionGatedBy"):
        wl.gated_by = ""
    evicted = wl.conditions.get("Evicted")
    if wl.evicted_at is not None:
        wl.evicted_at = evictions.queue_time(wl, wl.evicted_at, config)
    if wl.admission is not None:
        if "QuotaReserved" not in wl.conditions:
            wl.conditions["QuotaReserved"] = Condition(
                "QuotaReserved", "True", "QuotaReserved", "", state.now
            )
        reserved_at = wl.conditions["QuotaReserved"].last_transition or state.now
        if not wl.admitted_at:
            wl.admitted_at = state.now
        if "Admitted" not in wl.conditions:
            wl.conditions["Admitted"] = _admitted_at_load(state, wl, reserved_at)
        if config.async_evictions and evicted is not None and evicted.status == "True":
            # Stored while being evicted: its job is still stopping.
            wl.eviction = Eviction(
                reason=evicted.reason,
                message=evicted.message,
                cluster_queue=wl.admission.cluster_queue,
                underlying_cause=evicted.reason.partition("DueTo")[2],
                requeue=evicted.reason in (evictions.PREEMPTED, evictions.NODE_FAILURES),
            )
    return wl


def _admitted_at_load(state: State, wl: EngineWorkload, reserved_at: int) -> Condition:
    """The Admitted condition of a reservation given without one.

    A reservation is an admission (FORMAT.md) unless its ClusterQueue requires a check
    that is not Ready on the workload: then it only holds quota, as upstream's workload
    controller says when it syncs Admitted (QuotaReserved but not Admitted). A ClusterQueue
    not known yet counts as requiring nothing; when it arrives, its checks are synced.
    """
    assert wl.admission is not None
    cq = state.cluster_queues.get(wl.admission.cluster_queue)
    required = admission_checks.applicable(cq, wl.admission) if cq is not None else []
    if any(name not in wl.checks or wl.checks[name].state != CHECK_READY for name in required):
        return Condition(
            "Admitted", "False", "UnsatisfiedAdmissionChecks", admission_checks.NOT_READY_MESSAGE, reserved_at
        )
    return Condition("Admitted", "True", "Admitted", admission_checks.ADMITTED_MESSAGE, reserved_at)


def _default_priority(state: State, wl: EngineWorkload) -> None:
    """A workload naming no priority takes its LocalQueue's default WorkloadPriorityClass,
    else its ClusterQueue's (the `pykueue.io/default-priority-class` annotation), read when
    the workload is; without either it keeps upstream's 0."""
    lq = state.local_queues.get(wl.queue_key)
    name = lq.default_priority_class if lq is not None else ""
    if not name and lq is not None:
        cq = state.cluster_queues.get(lq.cluster_queue)
        name = cq.default_priority_class if cq is not None else ""
    if name:
        wl.priority_class = name
        wl.priority = state.priority_values.get(("WorkloadPriorityClass", name), 0)
        wl.shape = intake.shape_of(wl)


def add_workload(state: State, obj: Workload) -> None:
    wl = workload(state, obj)
    state.add_workload(wl)
    if wl.checks and wl.admission is not None:
        # Check states read with the workload take effect as upstream's workload
        # controller makes them: a Rejected or Retry check evicts, all Ready admit.
        lifecycle.reconcile_checks(state, wl.key)


def update_workload_spec(state: State, obj: Workload) -> None:
    """A new spec for a known workload whose manifest carries no status: it keeps the
    engine's status (reservation, conditions, checks, requeue state), as a spec update
    of a stored Workload does. An unknown workload is simply added."""
    old = state.workloads.get(f"{obj.metadata.namespace or 'default'}/{obj.metadata.name}")
    new = workload(state, obj)
    if old is None:
        state.add_workload(new)
        return
    carry_status(old, new)
    state.replace_workload(new)


def carry_status(old: EngineWorkload, new: EngineWorkload) -> None:
    """Copy what the engine knows about a workload's status onto a new version of it."""
    new.admission = old.admission
    new.admitted_at = old.admitted_at
    new.borrowing = old.borrowing
    new.evicted_at = old.evicted_at
    new.conditions = old.conditions
    new.reclaimable = old.reclaimable
    new.requeue_at = old.requeue_at
    new.requeue_count = old.requeue_count
    new.preemption_count = old.preemption_count
    new.preempted_at = old.preempted_at
    if old.lost_work is not None:  # the engine's count is ahead of the annotation it writes
        new.lost_work = old.lost_work
    if old.aged:
        # Aged priority until the next cycle recomputes it from the clock (engine/aging.py).
        new.aged = old.aged
        new.priority += old.aged
        new.shape = intake.shape_of(new)
    new.preempted_by = old.preempted_by
    new.preempted_for = old.preempted_for
    new.checks = old.checks
    new.eviction = old.eviction
    new.eviction_counts = old.eviction_counts
    new.unhealthy_nodes = old.unhealthy_nodes
    new.past_execution_seconds = old.past_execution_seconds


def delete(state: State, kind: str, namespace: str, name: str) -> None:
    """Delete one object; deleting what does not exist is not an error."""
    key = f"{namespace or 'default'}/{name}"
    if kind == "Workload":
        state.delete_workload(key)
    elif kind == "ResourceFlavor":
        state.delete_flavor(name)
    elif kind == "ClusterQueue":
        state.delete_cluster_queue(name)
    elif kind == "Cohort":
        state.delete_cohort(name)
    elif kind == "LocalQueue":
        state.delete_local_queue(key)
    elif kind == "AdmissionCheck":
        state.delete_admission_check(name)
    elif kind == "Namespace":
        state.delete_namespace(name)
    elif kind in ("WorkloadPriorityClass", "PriorityClass"):
        state.delete_priority_class(kind, name)
    elif kind == "LimitRange":
        state.delete_limit_range(namespace or "default", name)
    elif kind == "Topology":
        state.delete_topology(name)
    elif kind == "Node":
        state.delete_node(name)
    elif kind == "Pod":
        state.delete_pod(key)
