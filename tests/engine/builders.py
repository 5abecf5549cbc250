"""Fluent builders of engine states, so each test reads as the situation it sets up.

    c = (
        Cluster()
        .cohort("co", parent="root")
        .cq("a", {"f1": {"cpu": q(6, borrow=3, lend=2)}}, cohort="co", within=LOWER_PRIORITY)
        .admitted("old", "a", cpu=4, priority=1)
        .pending("new", "a", cpu=4, priority=5)
    )
    c.cycle()

Quantities are written in whole units (``cpu=2`` is two cores) and stored as the
engine's milli-units. Every ClusterQueue gets a LocalQueue ``team/<cq name>`` and an
empty namespace selector (the engine's ``None`` selects no namespace, as upstream),
so a workload names its ClusterQueue directly. Flavors a ClusterQueue names are
created on the fly when the test did not define them.

`Cluster.manifest` takes the other road, a manifest dict through
`pykueue.api.manifests.parse_object` and `pykueue.engine.loading.apply`, for the
cases where the API spelling is the clearest way to say it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Self

from pykueue.api import manifests
from pykueue.engine import cohort_tree, intake, loading, scheduler, specs
from pykueue.engine.cohort_tree import Node, Quota
from pykueue.engine.config import EngineConfig, FairSharing, WaitForPodsReady
from pykueue.engine.scheduler import CycleResult
from pykueue.engine.selectors import LabelSelector, Taint, Toleration
from pykueue.engine.state import State
from pykueue.engine.workloads import Admission, PodSet, PodSetAssignment, Workload

T0 = intake.micros(datetime(2026, 1, 1, tzinfo=UTC))
SECOND = 10**6
NS = "team"

NEVER = specs.NEVER
LOWER_PRIORITY = specs.LOWER_PRIORITY
LOWER_OR_NEWER_EQUAL = specs.LOWER_OR_NEWER_EQUAL
ANY = specs.ANY
STRICT_FIFO = specs.STRICT_FIFO
BEST_EFFORT_FIFO = specs.BEST_EFFORT_FIFO
MAY_STOP_SEARCH = specs.MAY_STOP_SEARCH
TRY_NEXT_FLAVOR = specs.TRY_NEXT_FLAVOR

QuotaSpec = Quota | float
FlavorQuotas = Mapping[str, Mapping[str, QuotaSpec]]  # flavor -> resource -> quota


def milli(units: float) -> int:
    """Whole units (as a test writes them) to the engine's milli-units."""
    return round(units * 1000)


def q(nominal: float, borrow: float | None = None, lend: float | None = None) -> Quota:
    """A quota in whole units; ``None`` limits are unlimited."""
    return Quota(
        nominal=milli(nominal),
        borrowing_limit=None if borrow is None else milli(borrow),
        lending_limit=None if lend is None else milli(lend),
    )


def _quota(value: QuotaSpec) -> Quota:
    return value if isinstance(value, Quota) else q(value)


def quotas(flavors: FlavorQuotas) -> dict[tuple[str, str], Quota]:
    """``{flavor: {resource: quota}}`` to the engine's ``{(flavor, resource): Quota}``."""
    return {(f, r): _quota(v) for f, per in flavors.items() for r, v in per.items()}


def group(flavors: FlavorQuotas, covered: Iterable[str] | None = None) -> specs.ResourceGroup:
    """One resource group: the flavors in the given order, covering every resource they name."""
    names = covered if covered is not None else sorted({r for per in flavors.values() for r in per})
    return specs.ResourceGroup(tuple(names), tuple(flavors))


def podset(
    name: str = "main",
    count: int = 1,
    *,
    min_count: int | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Iterable[Toleration] = (),
    **requests: float,
) -> PodSet:
    """A pod set; ``requests`` are per pod, in whole units (default one cpu)."""
    return PodSet(
        name=name,
        count=count,
        requests={r: milli(v) for r, v in (requests or {"cpu": 1}).items()},
        min_count=min_count,
        node_selector=dict(node_selector or {}),
        tolerations=list(tolerations),
    )


def workload(
    name: str,
    queue: str,
    *,
    ns: str = NS,
    count: int = 1,
    priority: int = 0,
    created: float = 0,
    pod_sets: list[PodSet] | None = None,
    uid: str = "",
    **requests: float,
) -> Workload:
    """A pending workload of one pod set (or ``pod_sets``); ``created`` is seconds after T0."""
    wl = Workload(
        namespace=ns,
        name=name,
        queue_name=queue,
        pod_sets=pod_sets if pod_sets is not None else [podset(count=count, **requests)],
        priority=priority,
        created=T0 + round(created * SECOND),
        uid=uid,
    )
    wl.shape = intake.shape_of(wl)
    return wl


class Cluster:
    """An engine `State` under construction, and the few verbs tests drive it with."""

    def __init__(
        self,
        *,
        fair_sharing: bool = False,
        strategies: tuple[str, ...] | None = None,
        gates: Mapping[str, bool] | None = None,
        wait_for_pods_ready: WaitForPodsReady | None = None,
        async_evictions: bool = False,
    ) -> None:
        fair = FairSharing(enable=fair_sharing)
        if strategies is not None:
            fair = FairSharing(enable=fair_sharing, preemption_strategies=strategies)
        self.state = State(
            config=EngineConfig(
                fair_sharing=fair,
                feature_gates=dict(gates or {}),
                wait_for_pods_ready=wait_for_pods_ready,
                async_evictions=async_evictions,
            )
        )
        self.state.now = T0
        self.results: list[CycleResult] = []

    # ------------------------------------------------------------------ objects

    def flavor(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Taint] = (),
        tolerations: Iterable[Toleration] = (),
    ) -> Self:
        self.state.apply_flavor(
            specs.ResourceFlavor(name, dict(labels or {}), tuple(taints), tuple(tolerations))
        )
        return self

    def cohort(
        self, name: str, *, parent: str = "", quota: FlavorQuotas | None = None, weight: float = 1.0
    ) -> Self:
        self.state.apply_cohort(specs.Cohort(name, parent, quotas(quota or {}), weight))
        return self

    def cq(
        self,
        name: str,
        quota: FlavorQuotas | None = None,
        *,
        groups: list[FlavorQuotas] | None = None,
        cohort: str = "",
        strategy: str = BEST_EFFORT_FIFO,
        within: str = NEVER,
        reclaim: str = NEVER,
        borrow_within: str = NEVER,
        threshold: int | None = None,
        when_can_borrow: str = MAY_STOP_SEARCH,
        when_can_preempt: str = TRY_NEXT_FLAVOR,
        weight: float = 1.0,
        namespace_selector: LabelSelector | None = LabelSelector(),
        checks: Iterable[str] = (),
    ) -> Self:
        """A ClusterQueue of one resource group (``quota``) or several (``groups``), and its LocalQueue.

        ``checks`` are admission checks for every flavor; they are created Active."""
        check_names = tuple(checks)
        for check in check_names:
            if check not in self.state.admission_checks:
                self.state.apply_admission_check(specs.AdmissionCheck(check, "example.com/" + check))
        all_groups = groups if groups is not None else [quota or {}]
        merged: dict[tuple[str, str], Quota] = {}
        for g in all_groups:
            merged.update(quotas(g))
            for flavor in g:
                if flavor not in self.state.flavors:
                    self.flavor(flavor)
        self.state.apply_cluster_queue(
            specs.ClusterQueue(
                name=name,
                resource_groups=tuple(group(g) for g in all_groups),
                quotas=merged,
                cohort=cohort,
                queueing_strategy=strategy,
                namespace_selector=namespace_selector,
                preemption=specs.Preemption(within, reclaim, borrow_within, threshold),
                fungibility=specs.FlavorFungibility(when_can_borrow, when_can_preempt),
                fair_weight=weight,
                admission_checks=check_names,
            )
        )
        return self.local_queue(name, name)

    def local_queue(self, name: str, cluster_queue: str, *, ns: str = NS) -> Self:
        self.state.apply_local_queue(specs.LocalQueue(ns, name, cluster_queue))
        return self

    def manifest(self, doc: Mapping[str, Any]) -> Self:
        """Apply one manifest dict as the scenario runner would."""
        loading.apply(self.state, manifests.parse_object(doc))
        return self

    # ---------------------------------------------------------------- workloads

    def pending(self, name: str, cq: str, **kwargs: Any) -> Self:
        """Add a pending workload to the LocalQueue of ``cq`` (see `workload` for the arguments)."""
        self.state.add_workload(workload(name, cq, **kwargs))
        return self

    def admitted(
        self,
        name: str,
        cq: str,
        *,
        flavor: str | None = None,
        admitted_at: float = 0,
        **kwargs: Any,
    ) -> Self:
        """Add a workload already holding quota in ``cq``, every resource in ``flavor`` (default: first)."""
        wl = workload(name, cq, **kwargs)
        spec = self.state.cluster_queues[cq]
        assignments = []
        for ps in wl.pod_sets:
            flavors = {}
            for resource in ps.requests:
                grp = spec.group_of(resource)
                assert grp is not None, f"{cq} does not cover {resource}"
                flavors[resource] = flavor if flavor is not None else grp.flavors[0]
            assignments.append(PodSetAssignment(ps.name, flavors, ps.total(), ps.count))
        wl.admission = Admission(cq, assignments)
        wl.admitted_at = T0 + round(admitted_at * SECOND)
        self.state.add_workload(wl)
        return self

    # -------------------------------------------------------------------- verbs

    def cycle(self, n: int = 1) -> CycleResult:
        """Run ``n`` cycles; return the last result (all are kept in ``results``)."""
        result = CycleResult()
        for _ in range(n):
            result = scheduler.run_cycle(self.state)
            self.results.append(result)
        return result

    def settle(self, limit: int = 200) -> int:
        for count in range(1, limit + 1):
            if not self.cycle().changed:
                return count
        raise AssertionError(f"did not settle within {limit} cycles")

    def finish(self, *names: str, ns: str = NS) -> Self:
        for name in names:
            self.state.finish(f"{ns}/{name}")
        return self

    # ------------------------------------------------------------------ reading

    def node(self, name: str) -> Node:
        """The tree node of a ClusterQueue or a Cohort (the tree is rebuilt when needed)."""
        self.state.ensure_tree()
        return self.state.nodes.get(name) or self.state.cohort_nodes[name]

    def available(self, name: str, flavor: str, resource: str = "cpu") -> int:
        return cohort_tree.available(self.node(name), (flavor, resource))

    def wl(self, name: str, ns: str = NS) -> Workload:
        return self.state.workloads.get(f"{ns}/{name}") or self.state.finished[f"{ns}/{name}"]

    def admitted_names(self) -> set[str]:
        return {wl.name for wl in self.state.workloads.values() if wl.admission is not None}

    def flavors_of(self, name: str, ns: str = NS) -> dict[str, str]:
        """resource -> flavor of an admitted single-pod-set workload."""
        admission = self.wl(name, ns).admission
        assert admission is not None, f"{name} is not admitted"
        return dict(admission.pod_sets[0].flavors)

    def pending_names(self, cq: str) -> set[str]:
        return {wl.name for wl in self.state.queues[cq].active()}

    def inadmissible_names(self, cq: str) -> set[str]:
        return {wl.name for wl in self.state.queues[cq].inadmissible.values()}

    def preempted_names(self) -> set[str]:
        return {key.split("/", 1)[1] for r in self.results for key in r.preempted}

    def condition(self, name: str, kind: str, ns: str = NS) -> tuple[str, str, str]:
        """(status, reason, message) of a workload condition."""
        cond = self.wl(name, ns).conditions[kind]
        return cond.status, cond.reason, cond.message
