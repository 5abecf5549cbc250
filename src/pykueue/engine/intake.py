"""From API models to the engine's values: the only place the engine reads `pykueue.api`.

Quantities become integers of milli-units, selectors become matchers, and a
Workload's pod sets get their per-pod requests computed the way Kubernetes
and Kueue compute them: LimitRange defaults first, limits standing in for
missing requests, init containers and pod overhead included. A workload whose
requests break a rule (request above limit, outside a LimitRange) is kept but
marked invalid with the reason, so it waits with an explanation instead of
being dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from pykueue.api import governance, quantity
from pykueue.api.admission_check import AdmissionCheck as ApiAdmissionCheck
from pykueue.api.cluster_queue import ClusterQueue as ApiClusterQueue
from pykueue.api.cluster_queue import ResourceGroup as ApiResourceGroup
from pykueue.api.cohort import Cohort as ApiCohort
from pykueue.api.core import LimitRange, Node, Pod, PodSpec
from pykueue.api.core import Toleration as ApiToleration
from pykueue.api.fair_sharing import FairSharing as ApiFairSharing
from pykueue.api.local_queue import LocalQueue as ApiLocalQueue
from pykueue.api.meta import LabelSelector as ApiLabelSelector
from pykueue.api.resource_flavor import ResourceFlavor as ApiResourceFlavor
from pykueue.api.workload import PodSet as ApiPodSet
from pykueue.api.workload import Workload as ApiWorkload
from pykueue.engine import pod_requests, specs, topology_assignments, topology_requests
from pykueue.engine.cohort_tree import Quota
from pykueue.engine.config import Resources
from pykueue.engine.resources import FlavorResource, resource_units
from pykueue.engine.selectors import LabelSelector, NodeSelectorTerm, Requirement, Taint, Toleration
from pykueue.engine.topology_snapshot import NodeView
from pykueue.engine.workloads import Admission, CheckState, Condition, PodSet, PodSetAssignment, Workload

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
RUNTIME_ANNOTATION = "scenario.kueue.x-k8s.io/runtime"
ADMISSION_GATED_BY_ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
# Set by the job reconciler on a Workload whose DRA devices cannot be charged (a DeviceClass
# with no mapping, an unsupported request field): what it says makes the Workload
# Misconfigured, as upstream's workload controller marks it (`pykueue.reconcilers.dra`).
DEVICE_PROBLEM_ANNOTATION = "pykueue.io/device-request-problem"
# Pods of workloads placed by topology carry it; their usage is their assignment's (see pod_usage).
TAS_POD_LABEL = "kueue.x-k8s.io/tas"


def micros(moment: datetime | None) -> int:
    """Microseconds since the epoch; the zero time when absent, as for an object without one."""
    if moment is None:
        moment = ZERO_TIME
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


# ----------------------------------------------------------------- selectors


def label_selector(selector: ApiLabelSelector | None) -> LabelSelector | None:
    if selector is None:
        return None
    return LabelSelector(
        match_labels=tuple(sorted(selector.match_labels.items())),
        expressions=tuple(
            Requirement(e.key, e.operator, tuple(e.values)) for e in selector.match_expressions
        ),
    )


def toleration(t: ApiToleration) -> Toleration:
    return Toleration(key=t.key, operator=t.operator or "Equal", value=t.value, effect=t.effect or "")


# ------------------------------------------------------------------- objects


def resource_flavor(obj: ApiResourceFlavor) -> specs.ResourceFlavor:
    spec = obj.spec
    return specs.ResourceFlavor(
        name=obj.metadata.name,
        node_labels=dict(spec.node_labels),
        node_taints=tuple(Taint(t.key, t.effect, t.value) for t in spec.node_taints),
        tolerations=tuple(toleration(t) for t in spec.tolerations),
        topology_name=spec.topology_name or "",
    )


def _quotas(
    groups: Iterable[ApiResourceGroup],
) -> tuple[tuple[specs.ResourceGroup, ...], dict[FlavorResource, Quota]]:
    result_groups = []
    quotas: dict[FlavorResource, Quota] = {}
    for group in groups:
        result_groups.append(
            specs.ResourceGroup(tuple(group.covered_resources), tuple(f.name for f in group.flavors))
        )
        for flavor in group.flavors:
            for res in flavor.resources:
                quotas[(flavor.name, res.name)] = Quota(
                    nominal=_units(res.name, res.nominal_quota),
                    borrowing_limit=None
                    if res.borrowing_limit is None
                    else _units(res.name, res.borrowing_limit),
                    lending_limit=None if res.lending_limit is None else _units(res.name, res.lending_limit),
                )
    return tuple(result_groups), quotas


def _units(resource: str, text: str) -> int:
    return resource_units(resource, quantity.parse(text))


def node_view(obj: Node) -> NodeView:
    """A node as topology-aware scheduling reads it; Ready only with a Ready=True condition."""
    ready = any(c.type == "Ready" and c.status == "True" for c in obj.status.conditions)
    return NodeView(
        name=obj.metadata.name,
        labels=dict(obj.metadata.labels),
        allocatable={res: _units(res, text) for res, text in obj.status.allocatable.items()},
        taints=tuple(Taint(t.key, t.effect, t.value) for t in obj.spec.taints),
        ready=ready,
        unschedulable=bool(obj.spec.unschedulable),
    )


def pod_usage(obj: Pod) -> tuple[str, dict[str, int]] | None:
    """(node, requests with one pod slot) of a pod holding node capacity, else None.

    A pod holds capacity once bound to a node and until it terminates. A pod labelled
    ``kueue.x-k8s.io/tas: "true"`` belongs to a workload placed by topology, whose
    assignment already counts it: it is left out, or its capacity would count twice.
    """
    if not obj.spec.node_name or obj.is_terminated():
        return None
    if (obj.metadata.labels or {}).get(TAS_POD_LABEL) == "true":
        return None
    pod = pod_requests.compute(obj.spec, "spec", [], True)
    requests = {res: resource_units(res, value) for res, value in pod.requests.items()}
    requests["pods"] = requests.get("pods", 0) + 1000
    return obj.spec.node_name, requests


def fair_weight(fair: ApiFairSharing | None) -> float:
    if fair is None or fair.weight is None:
        return 1.0
    return float(quantity.parse_exact(fair.weight))


def cluster_queue(obj: ApiClusterQueue) -> specs.ClusterQueue:
    spec = obj.spec
    groups, quotas = _quotas(spec.resource_groups)
    borrow = spec.preemption.borrow_within_cohort
    checks: tuple[str, ...] = ()
    on_flavors: dict[str, tuple[str, ...]] = {}
    if spec.admission_checks_strategy is not None:
        checks = tuple(rule.name for rule in spec.admission_checks_strategy.admission_checks)
        on_flavors = {
            rule.name: tuple(rule.on_flavors)
            for rule in spec.admission_checks_strategy.admission_checks
            if rule.on_flavors
        }
    afs = spec.admission_scope is not None and (
        spec.admission_scope.admission_mode == "UsageBasedAdmissionFairSharing"
    )
    return specs.ClusterQueue(
        name=obj.metadata.name,
        resource_groups=groups,
        quotas=quotas,
        cohort=spec.cohort_name,
        queueing_strategy=spec.queueing_strategy,
        namespace_selector=label_selector(spec.namespace_selector),
        preemption=specs.Preemption(
            within_cluster_queue=spec.preemption.within_cluster_queue,
            reclaim_within_cohort=spec.preemption.reclaim_within_cohort,
            borrow_within_cohort=borrow.policy,
            max_priority_threshold=borrow.max_priority_threshold,
            reclaim_unset="reclaim_within_cohort" not in spec.preemption.model_fields_set,
        ),
        fungibility=specs.FlavorFungibility(
            when_can_borrow=spec.flavor_fungibility.when_can_borrow,
            when_can_preempt=spec.flavor_fungibility.when_can_preempt,
            preference=spec.flavor_fungibility.preference,
        ),
        stop_policy=spec.stop_policy,
        admission_checks=checks,
        check_on_flavors=on_flavors,
        fair_weight=fair_weight(spec.fair_sharing),
        admission_fair_sharing=afs,
        default_priority_class=governance.default_priority_class(obj.metadata.annotations),
        aging=governance.aging(obj.metadata.annotations),
        contract=governance.contract(obj.metadata.annotations),
        preemption_cost=governance.preemption_cost(obj.metadata.annotations),
        reservation=governance.reservation(obj.metadata.annotations),
    )


def cohort(obj: ApiCohort) -> specs.Cohort:
    _, quotas = _quotas(obj.spec.resource_groups)
    return specs.Cohort(
        name=obj.metadata.name,
        parent=obj.spec.parent_name,
        quotas=quotas,
        fair_weight=fair_weight(obj.spec.fair_sharing),
        reservation=governance.reservation(obj.metadata.annotations),
        preemption_cost=governance.preemption_cost(obj.metadata.annotations),
    )


def local_queue(obj: ApiLocalQueue) -> specs.LocalQueue:
    consumed: dict[str, int] = {}
    consumed_at: int | None = None
    status = obj.status.fair_sharing
    if status is not None and status.admission_fair_sharing_status is not None:
        afs = status.admission_fair_sharing_status
        consumed = {res: quantity.parse(value) for res, value in afs.consumed_resources.items()}
        consumed_at = micros(afs.last_update) if afs.last_update is not None else None
    return specs.LocalQueue(
        namespace=obj.metadata.namespace or "default",
        name=obj.metadata.name,
        cluster_queue=obj.spec.cluster_queue,
        stop_policy=obj.spec.stop_policy,
        fair_weight=fair_weight(obj.spec.fair_sharing),
        consumed=consumed,
        consumed_at=consumed_at,
        default_priority_class=governance.default_priority_class(obj.metadata.annotations),
    )


def admission_check(obj: ApiAdmissionCheck, active_without_condition: bool = True) -> specs.AdmissionCheck:
    said = [c.status == "True" for c in obj.status.conditions if c.type == "Active"]
    active = said[-1] if said else active_without_condition
    return specs.AdmissionCheck(obj.metadata.name, obj.spec.controller_name, active)


def limit_range_items(obj: LimitRange) -> list[specs.LimitRangeItem]:
    return [
        specs.LimitRangeItem(
            kind=item.type,
            default={r: quantity.parse(v) for r, v in item.default.items()},
            default_request={r: quantity.parse(v) for r, v in item.default_request.items()},
            max={r: quantity.parse(v) for r, v in item.max.items()},
            min={r: quantity.parse(v) for r, v in item.min.items()},
        )
        for item in obj.spec.limits
    ]


# ----------------------------------------------------------------- workloads


def _affinity_terms(spec: PodSpec) -> list[NodeSelectorTerm] | None:
    affinity = spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return None
    required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    if required is None:
        return None
    return [
        NodeSelectorTerm(
            tuple(Requirement(e.key, e.operator, tuple(e.values)) for e in term.match_expressions),
            tuple(Requirement(f.key, f.operator, tuple(f.values)) for f in term.match_fields),
        )
        for term in required.node_selector_terms
    ]


def parse_duration(text: str) -> int:
    """A Go duration ("90s", "1h30m", "250ms") in microseconds."""
    units = {"h": 3600 * 10**6, "m": 60 * 10**6, "s": 10**6, "ms": 1000, "us": 1, "µs": 1, "ns": 0}
    rest = text.strip()
    if not rest:
        raise ValueError("empty duration")
    total = Fraction(0)
    sign = -1 if rest.startswith("-") else 1
    rest = rest.lstrip("+-")
    if rest == "0":
        return 0
    while rest:
        number = ""
        while rest and (rest[0].isdigit() or rest[0] == "."):
            number, rest = number + rest[0], rest[1:]
        unit = ""
        while rest and not (rest[0].isdigit() or rest[0] == "."):
            unit, rest = unit + rest[0], rest[1:]
        if not number or unit not in units:
            raise ValueError(f"{text!r} is not a duration (expected e.g. 90s, 1h30m, 250ms)")
        total += Fraction(number) * units[unit]
    return sign * int(total)


def workload(
    obj: ApiWorkload,
    priorities: Mapping[tuple[str, str], int],
    limit_items: list[specs.LimitRangeItem],
    pod_level_resources: bool = True,
    resources: Resources | None = None,
) -> Workload:
    """Build the engine's workload; ``priorities`` maps (kind, name) of priority classes to values.

    ``pod_level_resources`` is the PodLevelResources feature gate: off, a pod
    template's ``spec.resources`` is ignored, as an API server without the feature
    drops it. ``resources`` (upstream Configuration's) turns each pod's requests into
    what quota counts; placement on nodes keeps the pod's own.
    """
    spec = obj.spec
    pod_sets = []
    computed = []
    problems: list[str] = []
    for index, ps in enumerate(spec.pod_sets):
        path = f"spec.podSets[{index}].template.spec"
        pod = pod_requests.compute(ps.template.spec, path, limit_items, pod_level_resources)
        computed.append(pod)
        quota_requests = pod.requests if resources is None else resources.quota_requests(pod.requests)
        pod_sets.append(
            PodSet(
                name=ps.name,
                count=ps.count,
                requests=quota_requests,
                node_requests=None if quota_requests is pod.requests else pod.requests,
                min_count=ps.min_count,
                node_selector=dict(ps.template.spec.node_selector),
                affinity_terms=_affinity_terms(ps.template.spec),
                tolerations=[toleration(t) for t in ps.template.spec.tolerations],
                topology=_topology_request(ps, index, problems),
            )
        )
    priority = spec.priority
    class_name = ""
    if spec.priority_class_ref is not None:
        class_name = spec.priority_class_ref.name
        if priority is None:
            priority = priorities.get((spec.priority_class_ref.kind, class_name), 0)
    meta = obj.metadata
    wl = Workload(
        namespace=meta.namespace or "default",
        name=meta.name,
        queue_name=spec.queue_name,
        pod_sets=pod_sets,
        priority=priority or 0,
        priority_class=class_name,
        created=micros(meta.creation_timestamp),
        uid=meta.uid,
        active=spec.active,
        invalid_reason=meta.annotations.get(DEVICE_PROBLEM_ANNOTATION, "")
        or pod_requests.problem(computed)
        or "; ".join(problems),
        gated_by=obj.metadata.annotations.get(ADMISSION_GATED_BY_ANNOTATION, ""),
        max_execution_seconds=spec.maximum_execution_time_seconds,
    )
    wl.shape = shape_of(wl)
    _read_status(obj, wl)
    # Its preemption times, as the controller last wrote them: a contract's maxPreemptions
    # counts them across a restart (docs/governance.md).
    wl.preempted_at = governance.preempted_at(meta.annotations)
    # And the work its preemptions threw away, for `describe` after a restart.
    wl.lost_work = governance.lost_work(meta.annotations)
    wl.checkpoint_interval, problem = governance.checkpoint_interval(meta.annotations)
    if problem and not wl.invalid_reason:
        wl.invalid_reason = problem
    runtime = meta.annotations.get(RUNTIME_ANNOTATION)
    if runtime is not None:
        wl.runtime = parse_duration(runtime)
    return wl


def _topology_request(
    ps: ApiPodSet, index: int, problems: list[str]
) -> topology_requests.TopologyRequest | None:
    try:
        return topology_requests.from_pod_set(ps)
    except topology_requests.TopologyRequestError as exc:
        problems.append(f"spec.podSets[{index}].template.metadata.annotations: {exc}")
        return None


def shape_of(wl: Workload) -> object:
    """Upstream's scheduling-equivalence: priority and the pod sets' shapes (not the namespace)."""
    return (
        wl.priority,
        tuple(
            (
                ps.name,
                ps.count,
                ps.min_count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                tuple(ps.affinity_terms or ()),
                tuple(ps.tolerations),
                ps.topology,
            )
            for ps in wl.pod_sets
        ),
    )


def _read_status(obj: ApiWorkload, wl: Workload) -> None:
    status = obj.status
    for cond in status.conditions:
        wl.conditions[cond.type] = Condition(
            cond.type, cond.status, cond.reason, cond.message, micros(cond.last_transition_time)
        )
    wl.reclaimable = {rp.name: rp.count for rp in status.reclaimable_pods}
    wl.checks = {
        check.name: CheckState(
            name=check.name,
            state=check.state,
            message=check.message,
            last_transition=micros(check.last_transition_time) if check.last_transition_time else 0,
            requeue_after_seconds=check.requeue_after_seconds,
            retry_count=check.retry_count,
            pod_set_updates=tuple(
                u.model_dump(by_alias=True, exclude_defaults=True) for u in check.pod_set_updates
            ),
        )
        for check in sorted(status.admission_checks, key=lambda c: c.name)
    }
    wl.unhealthy_nodes = tuple(node.name for node in status.unhealthy_nodes)
    wl.past_execution_seconds = status.accumulated_past_execution_time_seconds
    if status.scheduling_stats is not None:
        wl.eviction_counts = {
            (e.reason, e.underlying_cause): e.count for e in status.scheduling_stats.evictions
        }
    if status.requeue_state is not None:
        wl.requeue_count = status.requeue_state.count or 0
        if status.requeue_state.requeue_at is not None:
            wl.requeue_at = micros(status.requeue_state.requeue_at)
    evicted = wl.conditions.get("Evicted")
    if evicted is not None and evicted.status == "True" and status.admission is None:
        wl.evicted_at = evicted.last_transition
    if status.admission is None:
        return
    assignments = []
    by_name = {ps.name: ps for ps in wl.pod_sets}
    for psa in status.admission.pod_set_assignments:
        spec_ps = by_name.get(psa.name)
        count = psa.count if psa.count is not None else (spec_ps.count if spec_ps else 0)
        usage = {res: resource_units(res, quantity.parse(v)) for res, v in psa.resource_usage.items()}
        for res in psa.flavors:
            if res not in usage and spec_ps is not None:
                usage[res] = spec_ps.requests.get(res, 0) * count
        topology = (
            topology_assignments.from_api(psa.topology_assignment)
            if psa.topology_assignment is not None
            else None
        )
        assignments.append(
            PodSetAssignment(
                psa.name, dict(psa.flavors), usage, count, topology, psa.delayed_topology_request
            )
        )
    wl.admission = Admission(status.admission.cluster_queue, assignments)
    reserved = wl.conditions.get("QuotaReserved")
    wl.admitted_at = reserved.last_transition if reserved is not None and reserved.last_transition else 0
