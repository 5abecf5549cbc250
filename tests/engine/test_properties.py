"""Properties of the admission engine over random clusters and random event sequences.

A cluster is 1-3 cohorts (sometimes under a common parent Cohort with its own quota),
1-6 ClusterQueues of one or two flavors with random nominal quotas, borrowing and
lending limits, queueing strategies, flavor fungibility and preemption policies, with
fair sharing on or off. Events add workloads of random size and priority, run
cycles, finish, delete and evict workloads, and settle. After every event:

(a) quota: no ClusterQueue exceeds nominal + borrowingLimit (nominal alone without a
    cohort), every ClusterQueue's `available` is >= 0, every root cohort's usage is
    within its subtree quota; usage recomputed from the admitted workloads equals
    `State.cq_usage`, and a fresh rebuild of the tree equals the incremental one;
(b) every workload is in exactly one place: admitted, finished, active or parked in
    one queue, or unrouted;
(c) the admitted workloads are exactly those the cycles reported admitted, less
    those finished, evicted, deleted or preempted since;
(e) every preemption set is minimal: restoring any single target leaves the
    preemptor unable to fit (re-checked with the engine's own `Preemptor` on a copy
    of the state taken before the cycle, replayed step by step);
(f) the policies protect who they say: a preemptor's ClusterQueue with
    withinClusterQueue=Never and reclaimWithinCohort=Never never preempts; a
    LowerPriority target always has a lower priority than its preemptor, a
    LowerOrNewerEqualPriority target a lower one or an equal one and a newer queue time;
(g) after `runner.settle`, one more cycle changes nothing.

And (d): the same sequence played twice on fresh states gives byte-identical
scenario snapshots (events included).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pykueue.engine import cohort_tree, cycle_order, loading, scheduler
from pykueue.engine.cohort_tree import Node, Quota
from pykueue.engine.entries import ASSUMED, Entry
from pykueue.engine.events import ADMITTED, PREEMPTED
from pykueue.engine.preemption import Preemptor
from pykueue.engine.resources import Quantities, add_into
from pykueue.engine.scheduler import CycleResult
from pykueue.engine.state import State
from pykueue.errors import ScenarioError
from pykueue.scenario import report, runner

from .builders import (
    ANY,
    BEST_EFFORT_FIFO,
    LOWER_OR_NEWER_EQUAL,
    LOWER_PRIORITY,
    MAY_STOP_SEARCH,
    NEVER,
    NS,
    SECOND,
    STRICT_FIFO,
    T0,
    TRY_NEXT_FLAVOR,
    Cluster,
    podset,
    workload,
)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLAVORS = ("f0", "f1")
ROOT_COHORT = "co-root"

# ------------------------------------------------------------------ plans


@dataclass(frozen=True)
class CQPlan:
    name: str
    cohort: str
    quota: dict[str, Quota]  # flavor -> cpu quota, in flavor order
    strategy: str
    within: str
    reclaim: str
    borrow_within: str
    threshold: int | None
    when_can_borrow: str
    when_can_preempt: str
    weight: float


@dataclass(frozen=True)
class ClusterPlan:
    fair_sharing: bool
    cohorts: list[tuple[str, str, dict[str, Quota]]]  # name, parent, flavor -> cpu quota
    cqs: list[CQPlan]

    def build(self) -> Cluster:
        c = Cluster(fair_sharing=self.fair_sharing)
        for flavor in FLAVORS:
            c.flavor(flavor)
        for name, parent, quota in self.cohorts:
            c.cohort(name, parent=parent, quota={f: {"cpu": v} for f, v in quota.items()})
        for cq in self.cqs:
            c.cq(
                cq.name,
                {f: {"cpu": v} for f, v in cq.quota.items()},
                cohort=cq.cohort,
                strategy=cq.strategy,
                within=cq.within,
                reclaim=cq.reclaim,
                borrow_within=cq.borrow_within,
                threshold=cq.threshold,
                when_can_borrow=cq.when_can_borrow,
                when_can_preempt=cq.when_can_preempt,
                weight=cq.weight,
            )
        return c


def _units(n: int) -> int:
    return n * 1000


@st.composite
def quotas(
    draw: st.DrawFn, flavors: tuple[str, ...], with_parent: bool, max_nominal: int = 8
) -> dict[str, Quota]:
    result = {}
    for flavor in flavors:
        nominal = draw(st.sampled_from(range(max_nominal + 1)))
        borrow = lend = None
        if with_parent:
            borrow = draw(st.none() | st.integers(0, 4))
            lend = draw(st.none() | st.integers(0, nominal))
        result[flavor] = Quota(
            _units(nominal),
            None if borrow is None else _units(borrow),
            None if lend is None else _units(lend),
        )
    return result


@st.composite
def clusters(
    draw: st.DrawFn, never_preempt: bool = False, fair: bool | None = None, two_level: bool | None = None
) -> ClusterPlan:
    fair = draw(st.booleans()) if fair is None else fair
    two_level = draw(st.booleans()) if two_level is None else two_level
    cohorts: list[tuple[str, str, dict[str, Quota]]] = []
    if two_level:
        root_flavors = draw(st.sampled_from([(), ("f0",), ("f0", "f1")]))
        cohorts.append((ROOT_COHORT, "", draw(quotas(root_flavors, False, 6))))
    names = [f"co-{i}" for i in range(draw(st.integers(1, 3)))]
    for name in names:
        parent = ROOT_COHORT if two_level and draw(st.booleans()) else ""
        if parent or draw(st.booleans()):  # else the cohort exists only by being named
            flavors = draw(st.sampled_from([(), ("f0",), ("f1",)]))
            cohorts.append((name, parent, draw(quotas(flavors, bool(parent), 4))))
    cqs = []
    for i in range(draw(st.integers(1, 6))):
        cohort = draw(st.sampled_from(["", *names, *names]))
        flavors = draw(st.sampled_from([("f0",), ("f1",), ("f0", "f1"), ("f1", "f0")]))
        policies = [NEVER] if never_preempt else [NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL]
        reclaims = [NEVER] if never_preempt else [NEVER, LOWER_PRIORITY, ANY]
        cqs.append(
            CQPlan(
                name=f"cq-{i}",
                cohort=cohort,
                quota=draw(quotas(flavors, bool(cohort))),
                strategy=draw(st.sampled_from([BEST_EFFORT_FIFO, STRICT_FIFO])),
                within=draw(st.sampled_from(policies)),
                reclaim=draw(st.sampled_from(reclaims)),
                borrow_within=draw(st.sampled_from([NEVER, LOWER_PRIORITY])),
                threshold=draw(st.none() | st.integers(0, 3)),
                when_can_borrow=draw(st.sampled_from([MAY_STOP_SEARCH, TRY_NEXT_FLAVOR])),
                when_can_preempt=draw(st.sampled_from([MAY_STOP_SEARCH, TRY_NEXT_FLAVOR])),
                weight=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])) if fair else 1.0,
            )
        )
    return ClusterPlan(fair, cohorts, cqs)


Event = tuple[Any, ...]

KINDS = ["add"] * 5 + ["burst"] * 2 + ["cycle"] * 3 + ["finish", "delete", "evict", "settle"]


@st.composite
def event(draw: st.DrawFn) -> Event:
    kind = draw(st.sampled_from(KINDS))
    if kind == "add":
        return (
            "add",
            draw(st.integers(0, 5)),  # ClusterQueue index
            draw(st.integers(1, 6)),  # cpus per pod
            draw(st.integers(1, 2)),  # pods
            draw(st.integers(0, 3)),  # priority
            draw(st.booleans()),  # partial admission allowed (minCount 1)
        )
    if kind == "burst":
        # Several workloads of one size into one queue, each of a higher priority than the
        # one before (with a cycle after each), so that later ones must preempt.
        return ("burst", draw(st.integers(0, 5)), draw(st.integers(2, 4)), draw(st.integers(1, 4)))
    if kind == "cycle":
        return ("cycle", draw(st.integers(1, 3)))
    if kind == "settle":
        return ("settle",)
    return (kind, draw(st.integers(0, 40)))


# Every sequence ends by settling, so what was added gets decided.
events = st.lists(event(), min_size=6, max_size=40).map(lambda seq: [*seq, ("settle",)])


# ------------------------------------------------------------- simulation

PREEMPTED_BY = re.compile(r"Preempted to accommodate workload (\S+) \(ClusterQueue (\S+), priority (-?\d+)\)")


@dataclass
class Sim:
    """Plays events on a fresh state, checking the invariants after each when ``check``."""

    plan: ClusterPlan
    check: bool = True
    c: Cluster = field(init=False)
    live: set[str] = field(default_factory=set)  # every workload not deleted (finished included)
    model_admitted: set[str] = field(default_factory=set)
    added: int = 0
    flapped: str = ""

    def __post_init__(self) -> None:
        self.c = self.plan.build()

    @property
    def state(self) -> State:
        return self.c.state

    def admitted_keys(self) -> list[str]:
        return sorted(k for k, wl in self.state.workloads.items() if wl.admission is not None)

    def play(self, event: Event) -> None:
        s = self.state
        s.now += SECOND
        events_before = len(s.events)
        kind = event[0]
        if kind == "add":
            _, index, cpus, count, priority, partial = event
            cq = self.plan.cqs[index % len(self.plan.cqs)].name
            name = f"w{self.added}"
            self.added += 1
            ps = podset(count=count, min_count=1 if partial and count > 1 else None, cpu=cpus)
            s.add_workload(
                workload(name, cq, pod_sets=[ps], priority=priority, created=(s.now - T0) / SECOND)
            )
            self.live.add(f"{NS}/{name}")
        elif kind == "burst":
            _, index, n, cpus = event
            for priority in range(n):
                self.play(("add", index, cpus, 1, priority, False))
                self.play(("cycle", 1))
        elif kind == "cycle":
            for _ in range(event[1]):
                self.cycle()
        elif kind in ("finish", "evict"):
            keys = self.admitted_keys()
            if keys:
                key = keys[event[1] % len(keys)]
                if kind == "finish":
                    s.finish(key)
                else:
                    s.evict(key, "AdmissionCheck", "evicted by the test")
                self.model_admitted.discard(key)
        elif kind == "delete":
            keys = sorted(self.live)
            if keys:
                key = keys[event[1] % len(keys)]
                namespace, name = key.split("/", 1)
                loading.delete(s, "Workload", namespace, name)
                self.live.discard(key)
                self.model_admitted.discard(key)
        elif kind == "settle":
            settle(s)
            for e in s.events[events_before:]:
                if e.type == ADMITTED:
                    self.model_admitted.add(e.workload)
                elif e.type == PREEMPTED:
                    self.model_admitted.discard(e.workload)
            if self.check:
                self.check_policies_from_events(events_before)
                self.check_settled()
        if self.check:
            self.check_invariants()
            if kind == "cycle":
                self.check_policies_from_events(events_before)

    def cycle(self) -> CycleResult:
        s = self.state
        before = copy.deepcopy(s) if self.check else None
        events_before = len(s.events)
        result = scheduler.run_cycle(s)
        self.model_admitted |= set(result.admitted)
        self.model_admitted -= set(result.preempted)
        if before is not None:
            admitted_events = [e.workload for e in s.events[events_before:] if e.type == ADMITTED]
            assert sorted(admitted_events) == sorted(result.admitted)
            replay_and_check_preemptions(before, result)
        return result

    # ----------------------------------------------------------- invariants

    def check_invariants(self) -> None:
        s = self.state
        s.ensure_tree()
        check_quota(s)
        check_places(s, self.live)
        assert set(self.admitted_keys()) == self.model_admitted, (
            "(c) admitted set differs from the cycles' reports"
        )

    def check_policies_from_events(self, start: int) -> None:
        """(f) from the Preempted events: the preemptor's queue allowed it, by priority."""
        s = self.state
        for e in s.events[start:]:
            if e.type != PREEMPTED:
                continue
            match = PREEMPTED_BY.match(e.message)
            assert match, e.message
            preemptor_cq = s.cluster_queues[match.group(2)]
            preemptor_priority = int(match.group(3))
            target = s.workloads[e.workload]
            target_cq = target.queue_name  # every LocalQueue is named after its ClusterQueue
            policy = preemptor_cq.preemption
            assert (policy.within_cluster_queue, policy.reclaim_within_cohort) != (NEVER, NEVER), (
                f"{preemptor_cq.name} preempts nothing by policy, yet {e.message}"
            )
            if target_cq == preemptor_cq.name:
                rule = policy.within_cluster_queue
            else:
                rule = policy.reclaim_within_cohort
            assert rule != NEVER, f"{rule} forbids: {e.message}"
            if rule == LOWER_PRIORITY:
                assert target.priority < preemptor_priority, e.message
            elif rule == LOWER_OR_NEWER_EQUAL:
                assert target.priority <= preemptor_priority, e.message

    def check_settled(self) -> None:
        """(g) one more cycle after settling changes nothing."""
        s = self.state
        fingerprint = runner.fingerprint(s)
        usage = {k: _nonzero(v) for k, v in s.cq_usage.items()}
        snap = json.dumps(report.snapshot(s, with_events=False), sort_keys=True)
        result = self.cycle()
        assert not result.changed, f"(g) a settled state changed: {result}"
        assert runner.fingerprint(s) == fingerprint
        assert {k: _nonzero(v) for k, v in s.cq_usage.items()} == usage
        assert json.dumps(report.snapshot(s, with_events=False), sort_keys=True) == snap


def _nonzero(q: Quantities) -> Quantities:
    return {fr: v for fr, v in sorted(q.items()) if v}


def check_quota(s: State) -> None:
    """(a)"""
    recomputed: dict[str, Quantities] = {name: {} for name in s.cluster_queues}
    for wl in s.workloads.values():
        if wl.admission is not None:
            add_into(recomputed[wl.admission.cluster_queue], wl.usage())
    for name, cq in s.cluster_queues.items():
        usage = _nonzero(s.cq_usage.get(name, {}))
        assert usage == _nonzero(recomputed[name]), f"(a) {name}: usage drifted from its workloads"
        assert set(usage) <= set(cq.quotas), f"(a) {name} uses a flavor it has no quota for"
        for fr, quota in cq.quotas.items():
            used = usage.get(fr, 0)
            if not cq.cohort:
                assert used <= quota.nominal, f"(a) {name} {fr}: {used} > nominal {quota.nominal}"
            elif quota.borrowing_limit is not None:
                limit = quota.nominal + quota.borrowing_limit
                assert used <= limit, f"(a) {name} {fr}: {used} > nominal+borrowingLimit {limit}"
    roots = {id(n.root()): n.root() for n in s.nodes.values()}
    for name, node in [*s.nodes.items(), *s.cohort_nodes.items()]:
        frs = set(node.root().subtree_quota) | set(node.usage)
        for fr in sorted(frs):
            assert cohort_tree.available(node, fr) >= 0, f"(a) {name} {fr}: over-admitted subtree"
    for root in roots.values():
        for fr, used in root.usage.items():
            assert used <= root.subtree_quota.get(fr, 0), f"(a) tree of {root.name} over its quota on {fr}"
        fresh = _clone(root)
        cohort_tree.rebuild(fresh, s.cq_usage)
        assert _tree_numbers(fresh) == _tree_numbers(root), "(a) incremental usage differs from a rebuild"


def _clone(node: Node) -> Node:
    twin = Node(node.name, node.is_cohort, dict(node.quotas), weight=node.weight)
    for child in node.children:
        copy_child = _clone(child)
        copy_child.parent = twin
        twin.children.append(copy_child)
    return twin


def _tree_numbers(root: Node) -> dict[str, tuple[Quantities, Quantities]]:
    return {n.name: (_nonzero(n.usage), _nonzero(n.subtree_quota)) for n in root.iter_subtree()}


def check_places(s: State, live: set[str]) -> None:
    """(b)"""
    places: Counter[str] = Counter()
    for cq_name, admitted in s.admitted.items():
        for key, wl in admitted.items():
            places[key] += 1
            assert wl.admission is not None and wl.admission.cluster_queue == cq_name, key
            assert s.workloads.get(key) is wl, f"(b) {key} admitted but not a live workload"
    for key in s.finished:
        places[key] += 1
        assert key not in s.workloads
    for queue in s.queues.values():
        for wl in [*queue.active(), *queue.inadmissible.values()]:
            places[wl.key] += 1
            assert wl.admission is None, f"(b) {wl.key} waits in {queue.name} while admitted"
            assert s.route_of(wl) == queue.name, f"(b) {wl.key} waits in the wrong queue {queue.name}"
    for bucket in s.unrouted.values():
        for key in bucket:
            places[key] += 1
    duplicated = sorted(k for k, n in places.items() if n > 1)
    assert not duplicated, f"(b) in more than one place: {duplicated}"
    assert set(places) == live, (
        f"(b) lost: {sorted(live - set(places))}, unknown: {sorted(set(places) - live)}"
    )
    assert set(s.workloads) | set(s.finished) == live


def replay_and_check_preemptions(before: State, result: CycleResult) -> None:
    """(e) and (f): replay the cycle on a copy, checking each preemptor's targets at nomination."""
    s = before
    s.ensure_tree()
    s.cycle += 1
    heads = scheduler._pop_heads(s)
    if not heads:
        assert not result.admitted and not result.preempted
        return
    preemptor = Preemptor(s)
    entries, _ = scheduler._nominate(s, heads, preemptor)
    for entry in entries:
        if entry.targets:
            check_minimal(preemptor, entry)
            check_policies(s, entry)
    cycle = scheduler._Cycle(s, preemptor)
    for entry in cycle_order.order(s, entries):
        cycle.process(entry)
    replayed = sorted(e.workload.key for e in entries if e.status == ASSUMED)
    assert replayed == sorted(result.admitted), "the replayed cycle admitted others"
    assert sorted(t.workload.key for t, _ in cycle.issued) == sorted(result.preempted)


def check_minimal(preemptor: Preemptor, entry: Entry) -> None:
    """(e) the targets make room, and restoring any one of them leaves no room."""
    cq, requests, targets = entry.cluster_queue, entry.assignment.usage, entry.targets
    for t in targets:
        preemptor.remove(t.workload, t.cluster_queue)
    try:
        assert preemptor.fits(cq, requests, True), f"(e) targets of {entry.workload.key} do not make room"
        # A set chosen so the preemptor need not borrow is minimal for that aim.
        allow_borrowing = not preemptor.fits(cq, requests, False)
        for t in targets:
            preemptor.restore(t.workload, t.cluster_queue)
            still = preemptor.fits(cq, requests, allow_borrowing)
            preemptor.remove(t.workload, t.cluster_queue)
            assert not still, (
                f"(e) {entry.workload.key} in {cq} fits without preempting {t.workload.key}; "
                f"targets {[x.workload.key for x in targets]}"
            )
    finally:
        for t in targets:
            preemptor.restore(t.workload, t.cluster_queue)


def check_policies(s: State, entry: Entry) -> None:
    """(f) with the exact queue times at the moment of the decision."""
    wl = entry.workload
    policy = s.cluster_queues[entry.cluster_queue].preemption
    for t in entry.targets:
        target = t.workload
        if t.cluster_queue == entry.cluster_queue:
            rule = policy.within_cluster_queue
        else:
            rule = policy.reclaim_within_cohort
        assert rule != NEVER, f"(f) {rule} forbids {wl.key} preempting {target.key}"
        if rule == LOWER_PRIORITY:
            assert target.priority < wl.priority, f"(f) {wl.key} preempts {target.key} of no lower priority"
        elif rule == LOWER_OR_NEWER_EQUAL:
            assert target.priority < wl.priority or (
                target.priority == wl.priority and wl.queue_order_time() < target.queue_order_time()
            ), f"(f) {wl.key} preempts {target.key}, neither lower nor newer-equal"


class Flapping(AssertionError):
    """`runner.settle` found no fixed point: the same decisions undo each other forever."""


def settle_limit(s: State) -> int:
    """Far more cycles than settling these workloads takes, unless decisions undo each other.

    Kept small (instead of the runner's 10000) so that a flapping example shrinks quickly.
    """
    return 50 + 5 * len(s.workloads)


def settle(s: State) -> None:
    limit, runner.MAX_SETTLE_CYCLES = runner.MAX_SETTLE_CYCLES, settle_limit(s)
    start = len(s.events)
    try:
        runner.settle(s, "property settle")
    except ScenarioError as exc:
        tail = [f"{e.cycle} {e.workload} {e.type}: {e.message}" for e in s.events[start:][-6:]]
        raise Flapping(f"(g) {exc}; the last events:\n" + "\n".join(tail)) from None
    finally:
        runner.MAX_SETTLE_CYCLES = limit


def play_all(plan: ClusterPlan, sequence: list[Event], check: bool) -> Sim:
    """Play every event; without ``check``, a flapping settle ends the run (see `Sim.flapped`)."""
    sim = Sim(plan, check)
    if check:
        sim.check_invariants()
    for event in sequence:
        try:
            sim.play(event)
        except Flapping as exc:
            if check:
                raise
            sim.flapped = str(exc)
            break
    return sim


# ------------------------------------------------------------------ tests


def _cq(name: str, quota: dict[str, Quota], **changes: Any) -> CQPlan:
    plain = CQPlan(
        name,
        "co-0",
        quota,
        BEST_EFFORT_FIFO,
        NEVER,
        NEVER,
        NEVER,
        None,
        MAY_STOP_SEARCH,
        MAY_STOP_SEARCH,
        1.0,
    )
    return dataclasses.replace(plain, **changes)


# Shrunk failures found by the properties, kept so they are tried on every run.
# (g) fails: settle stops while a resumed flavor scan would still preempt (see
# test_flavor_assignment.test_settled_state_does_not_depend_on_where_the_flavor_scan_stopped).
SCAN_PROGRESS_SETTLE = (
    ClusterPlan(
        False,
        [],
        [
            _cq("cq-0", {"f0": Quota(4000), "f1": Quota(0)}, strategy=STRICT_FIFO, within=LOWER_PRIORITY),
            _cq("cq-1", {"f0": Quota(1000)}),
        ],
    ),
    [
        ("add", 0, 1, 1, 0, False),
        ("cycle", 1),
        ("add", 0, 4, 1, 1, False),
        ("add", 1, 1, 1, 0, False),
        ("settle",),
    ],
)
# (g) fails: a partially admissible preemptor preempts the same workload forever (see
# test_preemption.test_a_partially_admissible_preemptor_does_not_preempt_the_same_workload_forever).
PARTIAL_PREEMPTOR_FLAPS = (
    ClusterPlan(True, [], [_cq("cq-0", {"f0": Quota(2000)}), _cq("cq-1", {"f0": Quota(2000)}, reclaim=ANY)]),
    [("add", 0, 3, 1, 0, False), ("cycle", 1), ("add", 1, 2, 2, 0, True), ("settle",)],
)

# (g) fails without partial admission: under fair sharing cq-3's head (2 pods of 6 cpus,
# borrowing) preempts two workloads of cq-4 (which borrows f0 heavily and f1 a little);
# next cycle the preempted f1 workload, now within cq-4's f1 nominal, is admitted first
# (FairSharingPrioritizeNonBorrowing), the preemptor "no longer fits", and it preempts the
# same workloads again, forever (upstream has open reports of such loops, kueue#14543).
_ROOT = [
    ("co-root", "", {"f0": Quota(6000), "f1": Quota(0)}),
    ("co-0", "co-root", {"f0": Quota(0)}),
    ("co-1", "co-root", {"f0": Quota(0, None, 0)}),
    ("co-2", "co-root", {}),
]
FAIR_PREEMPTEE_READMITTED_FIRST = (
    ClusterPlan(
        True,
        _ROOT,
        [
            _cq("cq-0", {"f1": Quota(0)}),
            _cq("cq-1", {"f1": Quota(0), "f0": Quota(0)}),
            _cq("cq-2", {"f1": Quota(1000)}),
            _cq(
                "cq-3",
                {"f0": Quota(6000), "f1": Quota(7000)},
                cohort="co-1",
                strategy=STRICT_FIFO,
                reclaim=ANY,
            ),
            _cq("cq-4", {"f0": Quota(8000), "f1": Quota(8000)}, cohort="co-2"),
        ],
    ),
    [
        ("add", 4, 1, 1, 3, False),
        ("add", 4, 1, 1, 0, False),
        ("add", 4, 1, 1, 1, False),
        ("add", 4, 1, 1, 2, False),
        ("add", 4, 1, 1, 3, False),
        ("add", 0, 3, 1, 3, False),
        ("cycle", 3),
        ("add", 3, 6, 2, 0, False),
        ("add", 4, 2, 1, 0, False),
        ("add", 4, 5, 2, 2, False),
        ("add", 4, 6, 1, 2, False),
        ("settle",),
    ],
)


# (g) fails: under fair sharing, two weight-0 queues' heads preempt each other in turn. cq-2's
# w8 once preempted cq-1's w1; w1 later preempts w8 back, but still "yields" to w8 as its
# preemptor, so w8 is readmitted first, w1 no longer fits, and preempts w8 again, forever.
MUTUAL_PREEMPTORS = (
    ClusterPlan(
        True,
        [("co-root", "", {})],
        [
            _cq("cq-0", {"f0": Quota(0)}, cohort="", weight=0.0),
            _cq("cq-1", {"f0": Quota(3000), "f1": Quota(3000)}, cohort="co-1", reclaim=ANY, weight=0.0),
            _cq("cq-2", {"f1": Quota(0), "f0": Quota(2000)}, cohort="co-1", reclaim=ANY, weight=0.0),
        ],
    ),
    [
        ("add", 0, 1, 1, 0, False),
        ("burst", 1, 3, 1),
        ("add", 1, 2, 2, 0, False),
        ("burst", 1, 3, 1),
        ("add", 2, 1, 1, 0, False),
        ("burst", 1, 2, 1),
        ("settle",),
    ],
)


@pytest.mark.parametrize(
    ("plan", "sequence"),
    [
        pytest.param(*MUTUAL_PREEMPTORS, id="mutual-preemptors"),
        pytest.param(*SCAN_PROGRESS_SETTLE, id="scan-progress-settle"),
        pytest.param(*PARTIAL_PREEMPTOR_FLAPS, id="partial-preemptor-flaps"),
        pytest.param(*FAIR_PREEMPTEE_READMITTED_FIRST, id="fair-preemptee-readmitted-first"),
    ],
)
def test_shrunk_property_failures(plan: ClusterPlan, sequence: list[Event]) -> None:
    """Shrunk examples of engine bugs the random search found, kept as regressions."""
    play_all(plan, sequence, check=True)


@SETTINGS
@given(clusters(), events)
def test_invariants_hold_after_every_event(plan: ClusterPlan, sequence: list[Event]) -> None:
    play_all(plan, sequence, check=True)


@SETTINGS
@given(clusters(), events)
def test_same_events_give_the_same_snapshot(plan: ClusterPlan, sequence: list[Event]) -> None:
    first = play_all(plan, sequence, check=False)
    second = play_all(plan, sequence, check=False)
    a = json.dumps(report.snapshot(first.state, with_events=True), sort_keys=True)
    b = json.dumps(report.snapshot(second.state, with_events=True), sort_keys=True)
    assert a == b
    assert first.flapped == second.flapped


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(never_preempt=True), events)
def test_nothing_is_preempted_when_every_policy_is_never(plan: ClusterPlan, sequence: list[Event]) -> None:
    sim = play_all(plan, sequence, check=False)
    assert [e for e in sim.state.events if e.type == PREEMPTED] == []
