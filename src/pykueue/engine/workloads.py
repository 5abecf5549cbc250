"""Workloads as the engine sees them: pod sets with per-pod requests, priority, times.

A `Workload` is built once from its manifest (by `pykueue.engine.intake`) and
then only its queueing fields change: admission, eviction, conditions, the
states of its admission checks, its requeue state. Requests are per pod in
milli-units after LimitRange defaults, so scaling a pod set to another count is
one multiplication.

Conditions follow Kubernetes' `meta.SetStatusCondition`: a condition's
``last_transition`` moves only when its status changes, so the times the
timeouts count from (``Admitted``, ``PodsReady``) are those of the transition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykueue.engine.resources import FlavorResource, Quantities
from pykueue.engine.selectors import NodeSelectorTerm, Toleration
from pykueue.engine.topology_assignments import TopologyAssignment
from pykueue.engine.topology_requests import TopologyRequest


@dataclass(slots=True)
class PodSet:
    """One group of identical pods of a workload."""

    name: str
    count: int
    requests: dict[str, int]  # per pod, milli-units, after LimitRange defaults
    min_count: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: list[NodeSelectorTerm] | None = None  # required node affinity, ORed terms
    tolerations: list[Toleration] = field(default_factory=list)
    # What it asks of the topology (engine/topology_requests.py); None: nothing.
    topology: TopologyRequest | None = None
    # One pod's requests as the nodes see them, when quota counts them otherwise
    # (`EngineConfig.resources`: excluded prefixes, transformations); None: `requests`.
    node_requests: dict[str, int] | None = None

    @property
    def pod_requests(self) -> dict[str, int]:
        """One pod's requests on a node: what topology-aware placement counts."""
        return self.requests if self.node_requests is None else self.node_requests

    def total(self, count: int | None = None) -> dict[str, int]:
        """The requests of ``count`` pods (default: all of them)."""
        n = self.count if count is None else count
        return {resource: value * n for resource, value in self.requests.items()}


@dataclass(slots=True)
class PodSetAssignment:
    """What an admission gives one pod set: a flavor per resource and the pod count."""

    name: str
    flavors: dict[str, str]
    resource_usage: dict[str, int]
    count: int
    topology: TopologyAssignment | None = None
    # `delayedTopologyRequest`: "Pending" while its topology waits for a ProvisioningRequest
    # (placed in a second pass once every check is Ready), then "Ready"; None: not delayed.
    delayed_topology: str | None = None

    @property
    def topology_pending(self) -> bool:
        return self.topology is None and self.delayed_topology == DELAYED_PENDING


DELAYED_PENDING = "Pending"
DELAYED_READY = "Ready"


@dataclass(slots=True)
class Admission:
    """A quota reservation in a ClusterQueue."""

    cluster_queue: str
    pod_sets: list[PodSetAssignment]
    _frs: frozenset[FlavorResource] | None = None
    _usage: Quantities | None = None  # with no pods given back, computed once (read-only)

    def flavor_resources(self) -> frozenset[FlavorResource]:
        """Every (flavor, resource) this admission uses; computed once."""
        if self._frs is None:
            self._frs = frozenset(
                (flavor, resource) for ps in self.pod_sets for resource, flavor in ps.flavors.items()
            )
        return self._frs

    def usage(
        self, reclaimable: dict[str, int] | None = None, pod_sets: list[PodSet] | None = None
    ) -> Quantities:
        """Quota this admission holds, less the pods that finished and gave theirs back.

        Callers only read the answer: without given-back pods it is the same dict every time.
        """
        if not reclaimable:
            if self._usage is None:
                self._usage = self._compute_usage(None, pod_sets)
            return self._usage
        return self._compute_usage(reclaimable, pod_sets)

    def _compute_usage(self, reclaimable: dict[str, int] | None, pod_sets: list[PodSet] | None) -> Quantities:
        result: Quantities = {}
        per_pod = {ps.name: ps for ps in pod_sets or []}
        for assignment in self.pod_sets:
            freed = (reclaimable or {}).get(assignment.name, 0)
            spec = per_pod.get(assignment.name)
            for resource, value in assignment.resource_usage.items():
                flavor = assignment.flavors.get(resource)
                if flavor is None:
                    continue
                if freed and spec is not None and resource in spec.requests:
                    value = spec.requests[resource] * max(0, assignment.count - freed)
                key: FlavorResource = (flavor, resource)
                result[key] = result.get(key, 0) + value
        return result


@dataclass(slots=True)
class Condition:
    """A status condition as upstream writes it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: int = 0  # microseconds since the epoch


# Admission check states (upstream's CheckState).
CHECK_PENDING = "Pending"
CHECK_READY = "Ready"
CHECK_RETRY = "Retry"
CHECK_REJECTED = "Rejected"
CHECK_STATES = (CHECK_PENDING, CHECK_READY, CHECK_RETRY, CHECK_REJECTED)


@dataclass(slots=True)
class CheckState:
    """One entry of a workload's `status.admissionChecks`.

    ``pod_set_updates`` is kept as the check's controller wrote it (a list of plain
    mappings); the engine never reads it, it only carries it so a status written
    back does not lose it.
    """

    name: str
    state: str = CHECK_PENDING
    message: str = ""
    last_transition: int = 0
    requeue_after_seconds: int | None = None
    retry_count: int | None = None
    pod_set_updates: tuple[dict[str, object], ...] = ()


@dataclass(frozen=True, slots=True)
class Eviction:
    """An eviction under way: the workload still holds its quota until its job stopped.

    ``requeue`` says how it goes back to its queue once stopped: upstream sets
    ``Requeued=True`` only for preemption (and node failures); every other reason
    leaves it ``False`` until something releases it (a backoff ends, a queue is
    restarted, the workload is reactivated).
    """

    reason: str  # the Evicted condition's reason (Deactivated causes included)
    message: str
    cluster_queue: str
    underlying_cause: str = ""
    requeue: bool = False


@dataclass(eq=False, slots=True)
class Workload:
    """A unit of admission: all its pod sets are admitted together or not at all."""

    namespace: str
    name: str
    queue_name: str
    pod_sets: list[PodSet]
    priority: int = 0  # effective: the manifest's priority plus `aged`
    priority_class: str = ""
    # Priority added by its ClusterQueue's aging policy (docs/governance.md): recomputed from
    # the wait while pending, kept as it was while admitted. 0 without a policy.
    aged: int = 0
    created: int = 0  # microseconds since the epoch
    uid: str = ""
    seq: int = 0  # order of arrival, the last tie-breaker
    active: bool = True
    admission: Admission | None = None
    admitted_at: int = 0  # when it got its quota reservation
    borrowing: bool = False  # its admission needed quota borrowed from the cohort
    evicted_at: int | None = None  # set while requeued after an eviction
    conditions: dict[str, Condition] = field(default_factory=dict)
    reclaimable: dict[str, int] = field(default_factory=dict)
    requeue_at: int | None = None
    requeue_count: int = 0
    runtime: int | None = None  # microseconds; the scenario annotation
    finished: bool = False
    invalid_reason: str = ""  # set when the workload can never be admitted as written
    # The flavor scan position kept between cycles (upstream's LastAssignment).
    last_tried_flavor: dict[tuple[int, str], int] | None = None
    last_generation: int = -1
    last_cycle: int = -10
    preemption_count: int = 0
    # When it was preempted (microseconds, oldest first): the preemption contract's window.
    preempted_at: tuple[int, ...] = ()
    preempted_by: str | None = None  # the preemptor it must not overtake while both wait
    # The pod counts it last preempted for, when it asked for fewer pods than it wants and a
    # victim was preemptible only for that size (within its quota, or without borrowing): it
    # is admitted with no more than these (engine/partial_admission.py). None: no such limit.
    preempted_for: tuple[int, ...] | None = None
    # Upstream's scheduling-equivalence hash: priority and pod sets. Twins share it.
    shape: object = None
    # `status.admissionChecks`, by check name (written back sorted by name, as upstream).
    checks: dict[str, CheckState] = field(default_factory=dict)
    # The `kueue.x-k8s.io/admission-gated-by` annotation ("" when absent or gated off).
    gated_by: str = ""
    # An eviction decided but not completed (the job still runs and holds its quota).
    eviction: Eviction | None = None
    # `status.schedulingStats.evictions`: (reason, underlying cause) -> count.
    eviction_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    # `status.unhealthyNodes`: nodes that failed under its topology assignment.
    unhealthy_nodes: tuple[str, ...] = ()
    # `spec.maximumExecutionTimeSeconds` and `status.accumulatedPastExecutionTimeSeconds`
    # (engine/execution_time.py); None when unset.
    max_execution_seconds: int | None = None
    past_execution_seconds: int | None = None
    # `pykueue.io/checkpoint-interval` (microseconds): a preemption loses only the run since the
    # last checkpoint (engine/lost_work.py). None: it saves nothing.
    checkpoint_interval: int | None = None
    # The work its preemptions threw away so far, per resource (milli-units x microseconds,
    # engine/lost_work.py); None until one did. Kept in memory: `describe` shows it.
    lost_work: dict[str, int] | None = None
    # "namespace/name" and "namespace/queue": asked for millions of times in a busy cohort,
    # so made once (a workload's namespace, name and queue never change; a changed spec
    # makes a new Workload).
    key: str = field(init=False)
    queue_key: str = field(init=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"
        self.queue_key = f"{self.namespace}/{self.queue_name}"

    def queue_order_time(self) -> int:
        """The time that places it in its queue: its eviction if it was evicted, else creation."""
        return self.evicted_at if self.evicted_at is not None else self.created

    def usage(self) -> Quantities:
        """The quota it holds (empty when not admitted)."""
        if self.admission is None:
            return {}
        return self.admission.usage(self.reclaimable, self.pod_sets)

    def total_requests(self) -> dict[str, int]:
        """All pods' requests summed per resource, ignoring flavors."""
        result: dict[str, int] = {}
        for ps in self.pod_sets:
            for resource, value in ps.total().items():
                result[resource] = result.get(resource, 0) + value
        return result

    def can_be_partially_admitted(self) -> bool:
        return any(ps.min_count is not None and ps.min_count < ps.count for ps in self.pod_sets)

    def condition_is(self, kind: str, status: str) -> bool:
        cond = self.conditions.get(kind)
        return cond is not None and cond.status == status

    def set_condition(self, kind: str, status: str, reason: str, message: str, now: int) -> bool:
        """Set a condition as `meta.SetStatusCondition` does; True when anything changed.

        The transition time moves only when the status changes.
        """
        old = self.conditions.get(kind)
        if old is None or old.status != status:
            self.conditions[kind] = Condition(kind, status, reason, message, now)
            return True
        if old.reason == reason and old.message == message:
            return False
        old.reason, old.message = reason, message
        return True

    def is_admitted(self) -> bool:
        """Holds a reservation and passed every admission check (``Admitted=True``)."""
        return self.admission is not None and self.condition_is("Admitted", "True")
