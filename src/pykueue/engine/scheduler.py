"""One scheduling cycle, read top to bottom as Kueue's docs describe it.

    heads      take the head workload of every active ClusterQueue (after the
               pending workloads that cannot be heads said why, `explain_waiting`)
    nominate   check each head can be admitted at all, then assign flavors
               (and find preemption targets) against the current usage
    order      non-borrowing entries first, then priority, then queue time
               (or by dominant resource share under fair sharing)
    process    admit in order, re-checking that each still fits after the
               entries before it; issue preemptions; never over-admit a cohort;
               with waitForPodsReady.blockAdmission, admit nothing while a
               workload holding a reservation is not PodsReady;
               with `nominal_first`, a head that would borrow waits for the next
               cycle while a ClusterQueue of its cohort tree admits within its
               nominal quota and still has room there
    requeue    put back every head that was not admitted: active or parked
    evict      targets of the issued preemptions release their quota

Quota used by an entry that only *waits* for its preemptions (or that
reserves capacity it cannot reclaim later, or waits for other workloads' pods
to be ready) counts against the cohort for the rest of the cycle only; it is
given back when the cycle ends. With upstream's PrioritizePreemptorWorkloads
gate on, a preemptor still waiting for its targets goes first in its cycle, so
the quota its evictions free is not taken by anyone else meanwhile.

An admission is a quota reservation: ``QuotaReserved=True``, and ``Admitted``
follows the admission checks that apply to the flavors it got (True at once
when there are none, or all are already Ready).

Why `nominal_first`: a cycle takes one head per ClusterQueue. When a queue
frees much of its nominal quota at once (a large job ended, or several jobs
ended between two passes of a controller), its first head takes part of it
back and the heads of its siblings, ordered after it because they borrow,
take the rest in the same cycle. The queue's next heads, a cycle later,
reclaim that quota by preemption: the borrowed workloads are stopped before
they ran. Upstream's scheduler meets the same cycle rules, but its loop runs
per event, so quota rarely frees up in larger pieces than one head takes.
Holding the borrowers back while the lender's own heads still fit within its
nominal quota keeps the quota with its owner and costs a few cycles, never a
preemption.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykueue.engine import (
    admission_checks,
    aging,
    cohort_tree,
    contract,
    cycle_order,
    evictions,
    lost_work,
    partial_admission,
    reservations,
    specs,
    topology_delayed,
    topology_placement,
    topology_recovery,
    waiting,
)
from pykueue.engine.entries import (
    ASSUMED,
    FAILED_AFTER_NOMINATION,
    GENERIC,
    NAMESPACE_MISMATCH,
    NO_FIT,
    NOMINATED,
    NOT_NOMINATED,
    PENDING_PREEMPTION,
    PREEMPTION_NO_CANDIDATES,
    SKIPPED,
    Entry,
)
from pykueue.engine.events import ADMITTED, PENDING, PREEMPTED, Event
from pykueue.engine.flavor_assigner import Assignment, FlavorAssigner, Mode, Possibility
from pykueue.engine.preemption import Preemptor
from pykueue.engine.resources import FlavorResource, Quantities
from pykueue.engine.state import State
from pykueue.engine.targets import HUMAN_REASONS, Target, can_always_reclaim
from pykueue.engine.topology_snapshot import Placement
from pykueue.engine.waiting import NAMESPACE_MISMATCH_MESSAGE
from pykueue.engine.workloads import DELAYED_PENDING, Admission, PodSetAssignment, Workload

TAS_RECOMPUTE = "TASRecomputeAssignmentWithinSchedulingCycle"


@dataclass(slots=True)
class CycleResult:
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    heads: int = 0
    # Workloads whose failed nodes were replaced or that were evicted for them.
    recovered: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.admitted or self.preempted or self.recovered)


def _end_put_offs(state: State) -> None:
    """A preemption put off by a preemption-cost policy (`Preemptor._put_off`) whose time is up
    is tried again: its parked preemptor goes back to its queue's heap."""
    for cq_name in state.put_off.take_due(state.now):
        queue = state.queues.get(cq_name)
        if queue is not None and queue.has_parked():
            queue.unpark_all(state.backing_off)


def run_cycle(state: State, max_admissions: int | None = None) -> CycleResult:
    """Run one scheduling cycle over ``state`` at ``state.now``.

    ``max_admissions`` stops the cycle after that many admissions, in the cycle's order;
    the heads it did not reach go back to their queues as they were, not tried (a
    controller whose admission writes wait for the API server decides no further ahead
    of them than it must: a head that arrives meanwhile is still weighed against the
    others). None, upstream's cycle: every head is tried.
    """
    aging.refresh(state)
    _end_put_offs(state)
    state.explain_waiting()
    state.begin_cycle()
    result = CycleResult()
    # The heads are taken before the second passes: a workload they evict goes back to its
    # queue for a later cycle, as upstream's (evicted during its cycle, requeued after).
    heads = _pop_heads(state)
    left: list[Placement] = []
    if state.config.gate("TopologyAwareScheduling") and state.config.gate("TASFailedNodeReplacement"):
        outcomes = topology_recovery.recover(
            state,
            least_free_mixed=state.config.gate("TASProfileMixed"),
            fail_fast=state.config.gate("TASFailedNodeReplacementFailFast"),
        )
        result.recovered = [o.workload for o in outcomes if o.replaced or o.evicted]
        left = [placement for o in outcomes for placement in o.left]
    if state.topology_pending and state.config.gate("TopologyAwareScheduling"):
        result.recovered += topology_delayed.second_pass(state, _tas_settings(state))
    # What ran on failed nodes is counted there until the cycle ends (upstream's snapshot
    # keeps it too): a head is not placed on a node whose pods may still be stopping.
    state.cluster.account_placements(left, +1)
    try:
        _run_heads(state, heads, result, max_admissions)
    finally:
        state.cluster.account_placements(left, -1)
    return result


def _run_heads(
    state: State, heads: list[tuple[Workload, str]], result: CycleResult, max_admissions: int | None
) -> None:
    result.heads = len(heads)
    if not heads:
        return
    # What nominating a head changes, kept to undo for the heads the cycle does not reach.
    untried: dict[str, _Tried] = {}
    if max_admissions is not None:
        untried = {wl.key: (wl.last_tried_flavor, wl.last_generation, wl.last_cycle) for wl, _ in heads}
    preemptor = Preemptor(state)
    entries, inadmissible = _nominate(state, heads, preemptor)
    cycle = _Cycle(state, preemptor, reserved_for=reservations.compute(state, heads))
    for entry in inadmissible:
        untried.pop(entry.workload.key, None)  # not considered: requeued as upstream does
    assumed = 0
    for entry in cycle_order.order(state, entries):
        if max_admissions is not None and assumed >= max_admissions:
            break
        cycle.process(entry)
        untried.pop(entry.workload.key, None)
        assumed += entry.status == ASSUMED
    cycle.undo_reservations()
    for entry in [*entries, *inadmissible]:
        if entry.status == ASSUMED:
            result.admitted.append(entry.workload.key)
        elif entry.workload.key in untried:
            _put_back(state, entry, untried[entry.workload.key])
        else:
            _requeue(state, entry)
    for target, preemptor_entry in cycle.issued:
        if target.workload.eviction is not None:
            continue  # already being evicted (a controller reports when its job stopped)
        _evict_target(state, target, preemptor_entry)
        result.preempted.append(target.workload.key)


# ------------------------------------------------------------------- heads


def _pop_heads(state: State) -> list[tuple[Workload, str]]:
    heads = []
    for name in sorted(state.queues):
        if not state.is_active(name):
            continue
        wl = state.queues[name].pop()
        if wl is not None:
            heads.append((wl, name))
    return heads


# ---------------------------------------------------------------- nominate


def _nominate(
    state: State, heads: list[tuple[Workload, str]], preemptor: Preemptor
) -> tuple[list[Entry], list[Entry]]:
    entries: list[Entry] = []
    inadmissible: list[Entry] = []
    for wl, cq_name in heads:
        entry = Entry(wl, cq_name)
        cq = state.cluster_queues[cq_name]
        problem = _admissibility_problem(state, wl, cq)
        if problem:
            entry.message, entry.reason = problem
            if entry.reason == NAMESPACE_MISMATCH:
                entry.requeue_reason = NAMESPACE_MISMATCH
                entry.reason = "Misconfigured"
            inadmissible.append(entry)
            continue
        queue = state.queues.get(cq_name)
        entry.is_preemptor = (
            state.config.gate("PrioritizePreemptorWorkloads") and queue is not None and queue.sticky == wl.key
        )
        entry.assignment, entry.targets = _assign(state, wl, cq, preemptor)
        entry.message = entry.assignment.message()
        if state.contract_queues and not entry.targets and entry.assignment.mode() == Mode.PREEMPT:
            note = _protection_note(state, cq)
            if note:
                entry.message = f"{entry.message}; {note}" if entry.message else note
        if not entry.targets:  # a preemption-cost policy's reason to stop nothing (engine/put_offs.py)
            entry.message = state.put_off.explained(wl.key, state.cycle, entry.message)
        wl.last_tried_flavor = dict(entry.assignment.last_tried)
        wl.last_generation = state.generation.get(cq_name, 0)
        wl.last_cycle = state.cycle
        entries.append(entry)
    return entries, inadmissible


def _protection_note(state: State, cq: specs.ClusterQueue) -> str:
    """Why preemption found too few targets, when preemption contracts are the reason
    (engine/contract.py): the protected workloads of the cohort tree, and the first end."""
    root = state.nodes[cq.name].root()
    reachable = {node.name for node in root.cluster_queues()} if cq.cohort else {cq.name}
    count, first, queues = 0, None, set()
    for name in sorted(state.contract_queues & reachable):
        spec = state.cluster_queues[name]
        for wl in state.admitted.get(name, {}).values():
            until = contract.protected_until(spec, wl, state.now)
            if until is None:
                continue
            count += 1
            queues.add(name)
            if until < contract.FOREVER and (first is None or until < first):
                first = until
    if not count:
        return ""
    when = (
        f", the first for another {(first - state.now + 999_999) // 1_000_000}s" if first is not None else ""
    )
    return (
        f"{count} admitted workload(s) of ClusterQueue {', '.join(sorted(queues))} "
        f"protected from preemption by its contract{when}"
    )


def _admissibility_problem(state: State, wl: Workload, cq: specs.ClusterQueue) -> tuple[str, str] | None:
    """(message, reason) of a head the scheduler cannot consider, in upstream's order."""
    if admission_checks.has_failed(wl):
        return "The workload has failed admission checks", evictions.PENDING_EVALUATION
    selector = cq.namespace_selector
    if selector is None or not selector.matches(state.namespace_labels(wl.namespace)):
        return NAMESPACE_MISMATCH_MESSAGE, NAMESPACE_MISMATCH
    if wl.invalid_reason:
        return wl.invalid_reason, "Misconfigured"
    return None


def _assign(
    state: State, wl: Workload, cq: specs.ClusterQueue, preemptor: Preemptor
) -> tuple[Assignment, list[Target]]:
    resume = wl.last_tried_flavor if _scan_progress_valid(state, wl, cq.name) else None
    tas = _tas_settings(state)
    tas_only = topology_placement.is_tas_only(cq, state.flavors)
    assigner = FlavorAssigner(
        workload=wl,
        cq=cq,
        node=state.nodes[cq.name],
        flavors=state.flavors,
        oracle=lambda w, fr, value: preemptor.simulate(cq.name, w, fr, value),
        can_preempt_while_borrowing=_can_preempt_while_borrowing(state, cq),
        resume_from=resume,
        tas_mismatch=(
            (
                lambda flavor, ps, covered: topology_placement.flavor_mismatch(
                    state.cluster, flavor, ps, covered, tas_only
                )
            )
            if tas.enabled
            else None
        ),
    )

    delayed = topology_delayed.provisioning_flavors(state, cq) if tas.enabled else frozenset()

    def assign(counts: list[int] | None = None) -> Assignment:
        found = assigner.assign(counts)
        topology_placement.assign(state.cluster, wl, cq, state.flavors, found, tas, delayed)
        return found

    def targets(found: Assignment) -> list[Target]:
        if any(ps.tas_mode is not None for ps in found.pod_sets):
            preemptor.tas_fits = lambda: topology_placement.fits(
                state.cluster, wl, cq, state.flavors, found, tas
            )
        try:
            return preemptor.targets(cq.name, wl, found)
        finally:
            preemptor.tas_fits = None

    def chosen(found: Assignment, found_targets: list[Target]) -> tuple[Assignment, list[Target]]:
        if tas.enabled and found.mode() == Mode.PREEMPT:
            _place_preempting(state, wl, cq, found, found_targets, tas)
        return found, found_targets

    most = partial_admission.most_counts(wl)
    full = assign(most)
    mode = full.mode()
    if mode == Mode.FIT:
        return full, []
    if mode == Mode.PREEMPT:
        found_targets = targets(full)
        if found_targets:
            return chosen(full, found_targets)
    if state.config.gate("PartialAdmission") and wl.can_be_partially_admitted():
        found = partial_admission.reduce_pod_sets(wl, assign, targets, most)
        if found is not None:
            return chosen(*found)
    return chosen(full, [])


def _place_preempting(
    state: State,
    wl: Workload,
    cq: specs.ClusterQueue,
    found: Assignment,
    found_targets: list[Target],
    tas: topology_placement.Settings,
) -> None:
    """The placement a preemptor holds while its targets go: on the nodes as they will be
    without its targets, or, with none, as if no TAS workload ran."""
    topology_placement.place_preempting(
        state.cluster, wl, cq, state.flavors, found, tas, [t.workload for t in found_targets]
    )


def _tas_settings(state: State) -> topology_placement.Settings:
    return topology_placement.Settings(
        enabled=state.config.gate("TopologyAwareScheduling"),
        least_free_mixed=state.config.gate("TASProfileMixed"),
    )


def _scan_progress_valid(state: State, wl: Workload, cq_name: str) -> bool:
    if wl.last_tried_flavor is None:
        return False
    if state.config.gate("FlavorFungibilityPreserveScanProgress") and state.cycle - wl.last_cycle <= 1:
        return True
    return state.generation.get(cq_name, 0) <= wl.last_generation


def _can_preempt_while_borrowing(state: State, cq: specs.ClusterQueue) -> bool:
    if cq.preemption.borrow_within_cohort != specs.NEVER:
        return True
    if not state.config.fair_sharing.enable:
        return False
    return cq.preemption.reclaim_within_cohort != specs.NEVER or cq.preemption.reclaim_unset


# ----------------------------------------------------------------- process


@dataclass(slots=True)
class _Cycle:
    """The admission loop of one cycle, with the usage it reserves only for this cycle."""

    state: State
    preemptor: Preemptor
    issued: list[tuple[Target, Entry]] = field(default_factory=list)
    preempted_keys: dict[str, Target] = field(default_factory=dict)
    # The same targets by the root of their cohort tree: `_fits` takes out only its own tree's,
    # as no other tree's usage bears on it (all of them made each fit cost the cycle's preemptions
    # so far, quadratic in the number of cohorts).
    preempted_by_root: dict[cohort_tree.Node | None, dict[str, Target]] = field(default_factory=dict)
    reserved: list[tuple[str, Quantities]] = field(default_factory=list)
    # Nodes held by preemptors for the rest of the cycle (`_hold_nodes`).
    held: list[list[Placement]] = field(default_factory=list)
    # nominal_first: (root of a cohort tree, flavor-resource) -> the ClusterQueue that
    # admitted within its nominal quota there in this cycle and still has room.
    lenders: dict[tuple[cohort_tree.Node, FlavorResource], str] = field(default_factory=dict)
    # Per cohort tree, the capacity an aged head holds against borrowers (engine/reservations.py).
    reserved_for: dict[cohort_tree.Node, reservations.Held] = field(default_factory=dict)

    def process(self, entry: Entry, recomputed: bool = False) -> None:
        mode = entry.assignment.mode()
        if mode == Mode.NO_FIT:
            entry.requeue_reason = NO_FIT
            entry.reason = entry.assignment.no_fit_reason or evictions.PENDING_EVALUATION
            return
        if mode == Mode.PREEMPT and not entry.targets:
            entry.requeue_reason = PREEMPTION_NO_CANDIDATES
            entry.reason = "WaitingForQuota"
            self._reserve_unreclaimable(entry)
            return
        if any(t.workload.key in self.preempted_keys for t in entry.targets):
            self._skip(entry, "Workload has overlapping preemption targets with another workload")
            return
        usage = entry.assignment.usage
        lender = self._lender_first(entry)
        if lender:
            self._skip(
                entry,
                f"Workload waits for a cycle: ClusterQueue {lender} of its cohort admits within its "
                "nominal quota first",
            )
            return
        held = reservations.holds(
            self.state,
            self.reserved_for,
            entry.cluster_queue,
            entry.workload,
            entry.assignment,
            entry.borrows > 0,
        )
        if held:
            self._skip(entry, held)
            entry.requeue_reason = reservations.HELD
            return
        quota_fits = self._fits(entry.cluster_queue, usage, entry.targets)
        placed = self._placed(entry)
        if quota_fits and not placed and not recomputed and self.state.config.gate(TAS_RECOMPUTE):
            # Upstream's TASRecomputeAssignmentWithinSchedulingCycle: the quota is there but
            # an admission earlier in this cycle took the nodes it was placed on; assign
            # again (flavors, placement, targets) against the nodes as they are now.
            cq = self.state.cluster_queues[entry.cluster_queue]
            entry.workload.last_tried_flavor = None
            entry.assignment, entry.targets = _assign(self.state, entry.workload, cq, self.preemptor)
            entry.message = entry.assignment.message()
            # The scan position of the new assignment, as nominating records it: a head whose
            # placement failed on a flavor with more after it is retried, not parked.
            entry.workload.last_tried_flavor = dict(entry.assignment.last_tried)
            self.process(entry, recomputed=True)
            return
        if not quota_fits or not placed:
            self._skip(entry, "Workload no longer fits after processing another workload")
            return
        for target in entry.targets:
            self.preempted_keys[target.workload.key] = target
            in_tree = self.preempted_by_root.setdefault(self._root(target.cluster_queue), {})
            in_tree[target.workload.key] = target
        if mode == Mode.PREEMPT:
            self._reserve(entry.cluster_queue, usage)
            self._hold_nodes(entry)
            entry.status = NOMINATED
            entry.requeue_reason = PENDING_PREEMPTION
            entry.reason = "WaitingForPreemptedWorkloads"
            entry.message = f"{entry.message}. Pending the preemption of {len(entry.targets)} workload(s)"
            entry.workload.last_tried_flavor = None  # after its preemptions it reconsiders every flavor
            entry.workload.preempted_for = partial_admission.promised_counts(entry)
            for target in entry.targets:
                self.issued.append((target, entry))
            return
        if self._waits_for_pods_ready():
            # Upstream's scheduler stops here until every admitted workload is ready, then
            # admits this one; the engine keeps its place (and its quota, for the rest of
            # the cycle) and tries again in a later cycle.
            self._reserve(entry.cluster_queue, usage)
            entry.status = SKIPPED
            entry.reason = "WaitingForPodsReady"
            entry.message = "waiting for all admitted workloads to be in PodsReady condition"
            return
        _admit(self.state, entry)
        if self.state.config.nominal_first and not entry.borrows:
            self._note_lender(entry)

    def _placed(self, entry: Entry) -> bool:
        """Do the entry's topology assignments fit on the nodes as this cycle left them, the
        targets of every preemption issued so far and its own taken off (as upstream checks)?"""
        placements = topology_placement.placements(self.state.cluster, entry.workload, entry.assignment)
        if not placements:
            return True
        cluster = self.state.cluster
        removed = {**self.preempted_keys, **{t.workload.key: t for t in entry.targets}}
        freed = [
            placement for target in removed.values() for placement in cluster.placements_of(target.workload)
        ]
        return topology_placement.still_fits(
            cluster, self.state.flavors, entry.workload, entry.assignment, freed
        )

    def _hold_nodes(self, entry: Entry) -> None:
        """Keep the nodes of a preemptor's placement for the rest of the cycle."""
        placements = topology_placement.placements(self.state.cluster, entry.workload, entry.assignment)
        if placements:
            self.state.cluster.account_placements(placements, +1)
            self.held.append(placements)

    def _waits_for_pods_ready(self) -> bool:
        config = self.state.config.wait_for_pods_ready
        return config is not None and config.block_admission and bool(self.state.pods_not_ready)

    def _lender_first(self, entry: Entry) -> str:
        """The ClusterQueue whose nominal admissions a borrowing ``entry`` waits for ("" if none)."""
        if not self.lenders or not entry.borrows:
            return ""
        root = self.state.nodes[entry.cluster_queue].root()
        for fr in entry.assignment.usage:
            lender = self.lenders.get((root, fr))
            if lender:
                return lender
        return ""

    def _note_lender(self, entry: Entry) -> None:
        """After an admission within nominal quota: where its queue still has nominal room."""
        node = self.state.nodes[entry.cluster_queue]
        if node.parent is None:
            return
        root = node.root()
        for fr in entry.assignment.usage:
            quota = node.quotas.get(fr)
            if quota is not None and node.usage.get(fr, 0) < quota.nominal:
                self.lenders.setdefault((root, fr), entry.cluster_queue)

    def _skip(self, entry: Entry, message: str) -> None:
        entry.status = SKIPPED
        entry.message = message
        entry.reason = "WaitingForQuota"

    def _root(self, cq_name: str) -> cohort_tree.Node | None:
        node = self.state.nodes.get(cq_name)
        return node.root() if node is not None else None

    def _fits(self, cq_name: str, usage: Quantities, targets: list[Target]) -> bool:
        removed: dict[str, Target] = dict(self.preempted_by_root.get(self._root(cq_name), {}))
        for target in targets:
            removed[target.workload.key] = target
        shifted: list[Target] = []
        try:
            for target in removed.values():
                self._shift(target.cluster_queue, target.workload.usage(), -1)
                shifted.append(target)
            node = self.state.nodes[cq_name]
            return all(max(0, cohort_tree.available(node, fr)) >= value for fr, value in usage.items())
        finally:
            for target in shifted:
                self._shift(target.cluster_queue, target.workload.usage(), +1)

    def _shift(self, cq_name: str, usage: Quantities, sign: int) -> None:
        node = self.state.nodes.get(cq_name)
        if node is not None:
            cohort_tree.add_usages(node, usage, sign)

    def _reserve(self, cq_name: str, usage: Quantities) -> None:
        self._shift(cq_name, usage, +1)
        self.reserved.append((cq_name, usage))

    def _reserve_unreclaimable(self, entry: Entry) -> None:
        """A queue that cannot always reclaim holds what it may use, so that others wait too."""
        cq = self.state.cluster_queues[entry.cluster_queue]
        if can_always_reclaim(cq) and not entry.is_preemptor:
            return
        node = self.state.nodes[entry.cluster_queue]
        reserved: Quantities = {}
        for fr, value in entry.assignment.usage.items():
            quota = cq.quotas.get(fr)
            nominal = quota.nominal if quota is not None else 0
            used = node.usage.get(fr, 0)
            if entry.assignment.borrowing > 0:
                limit = quota.borrowing_limit if quota is not None else None
                reserved[fr] = value if limit is None else min(value, nominal + limit - used)
            else:
                reserved[fr] = max(0, min(value, nominal - used))
        self._reserve(entry.cluster_queue, reserved)
        self._hold_nodes(entry)

    def undo_reservations(self) -> None:
        for cq_name, usage in reversed(self.reserved):
            self._shift(cq_name, usage, -1)
        self.reserved.clear()
        for placements in reversed(self.held):
            self.state.cluster.account_placements(placements, -1)
        self.held.clear()


def _admit(state: State, entry: Entry) -> None:
    wl = entry.workload
    cq = state.cluster_queues[entry.cluster_queue]
    pod_sets = []
    for ps in entry.assignment.pod_sets:
        flavors = {res: choice.flavor for res, choice in ps.flavors.items()}
        usage = {res: ps.requests[res] for res in flavors}
        pod_sets.append(
            PodSetAssignment(
                ps.name, flavors, usage, ps.count, ps.topology, DELAYED_PENDING if ps.delayed else None
            )
        )
    wl.admission = Admission(cq.name, pod_sets)
    state.touch(wl.key)
    wl.admitted_at = state.now
    wl.borrowing = entry.borrows > 0
    wl.preempted_by = None
    wl.preempted_for = None
    wl.evicted_at = None
    wl.last_tried_flavor = None
    queue = state.queues.get(cq.name)
    if queue is not None and queue.sticky == wl.key:
        queue.set_sticky(None)
    entry.status = ASSUMED
    message = f"Quota reserved in ClusterQueue {cq.name}"
    wl.set_condition("QuotaReserved", "True", "QuotaReserved", message, state.now)
    evictions.reset_on_reservation(wl, state.now)
    state.register_admission(wl)
    state.sync_checks(wl)
    state.sync_admitted(wl, at_reservation=True)
    chosen = ", ".join(
        f"{ps.name}: " + ", ".join(f"{res}={flv}" for res, flv in sorted(ps.flavors.items()))
        for ps in pod_sets
    )
    borrowing = " (borrowing from the cohort)" if entry.borrows else ""
    waiting = "" if wl.is_admitted() else "; waiting for admission checks"
    state.record(
        Event(
            state.cycle,
            wl.key,
            ADMITTED,
            f"Admitted by ClusterQueue {cq.name}{borrowing}; {chosen}{waiting}",
            "Admitted" if wl.is_admitted() else "QuotaReserved",
        )
    )


# ----------------------------------------------------------------- requeue


_Tried = tuple[dict[tuple[int, str], int] | None, int, int]


def _put_back(state: State, entry: Entry, before: _Tried) -> None:
    """Return a head the cycle did not reach to its queue, as if it had not been popped."""
    wl = entry.workload
    wl.last_tried_flavor, wl.last_generation, wl.last_cycle = before
    queue = state.queues.get(entry.cluster_queue)
    if queue is not None and state.workloads.get(wl.key) is wl:
        queue.requeue(wl, immediate=True, park_twins=False)


def _requeue(state: State, entry: Entry) -> None:
    wl = entry.workload
    queue = state.queues.get(entry.cluster_queue)
    if queue is None or state.workloads.get(wl.key) is not wl:
        return
    if entry.status != NOT_NOMINATED and entry.requeue_reason == GENERIC:
        entry.requeue_reason = FAILED_AFTER_NOMINATION
    strategy = queue.strategy
    if strategy == specs.STRICT_FIFO:
        immediate = entry.requeue_reason != NAMESPACE_MISMATCH
    else:
        immediate = entry.requeue_reason in (FAILED_AFTER_NOMINATION, PENDING_PREEMPTION)
    if wl.last_tried_flavor and any(idx != -1 for idx in wl.last_tried_flavor.values()):
        immediate = immediate or entry.requeue_reason != NAMESPACE_MISMATCH
    if entry.requeue_reason == PENDING_PREEMPTION:
        queue.set_sticky(wl.key)
    park_twins = state.config.gate("SchedulingEquivalenceHashing") and entry.requeue_reason in (
        NO_FIT,
        PREEMPTION_NO_CANDIDATES,
    )
    queue.requeue(wl, immediate, park_twins)
    reason = entry.reason or evictions.PENDING_EVALUATION
    message = entry.message or "The workload is waiting for quota"
    if evictions.unreserve(wl, reason, message, state.now):
        state.touch(wl.key)
        state.record(Event(state.cycle, wl.key, PENDING, message, reason))
    if park_twins and state.config.gate(waiting.EXPLICIT_STATUS):
        # Parked with it, its twins are never tried: they say so, with its reason (upstream's
        # workload controller answers them from the equivalence cache under this gate).
        for twin in queue.unstamped_twins(wl, reason):
            if twin.admission is None and evictions.unreserve(
                twin, reason, waiting.BYPASSED_MESSAGE, state.now
            ):
                state.touch(twin.key)


def _evict_target(state: State, target: Target, entry: Entry) -> None:
    preemptor = entry.workload
    why = HUMAN_REASONS.get(target.reason, target.reason)
    message = (
        f"Preempted to accommodate workload {preemptor.key} (ClusterQueue {entry.cluster_queue}, "
        f"priority {preemptor.priority}) due to {why}"
    )
    victim = target.workload
    ready = victim.conditions.get("PodsReady")
    ran = state.now - ready.last_transition if ready is not None and ready.status == "True" else None
    held = victim.usage()
    held_for = max(0, state.now - victim.admitted_at) if victim.admitted_at else 0
    lost_for = min(held_for, lost_work.lost_time(victim, state.now))
    lost_work.count(victim, held, lost_for)
    state.evict(victim.key, "Preempted", message, preempted_reason=target.reason)
    victim.preempted_by = preemptor.key
    if preemptor.preempted_by == victim.key:
        # It preempts the one that once preempted it: that one is its victim now, and letting
        # it go first (the yield rule) would hand it back the quota, the two taking turns.
        preemptor.preempted_by = None
    contract.record_preemption(victim, state.now)
    state.record(
        Event(
            state.cycle,
            victim.key,
            PREEMPTED,
            message,
            target.reason,
            target.cluster_queue,
            waited=ran,
            held=held,
            held_for=held_for,
            lost_for=lost_for,
        )
    )


def usage_fits(state: State, cq_name: str, usage: dict[FlavorResource, int]) -> bool:
    """Does ``usage`` fit in ``cq_name`` now (used by property tests and explanations)?"""
    node = state.nodes[cq_name]
    return all(max(0, cohort_tree.available(node, fr)) >= v for fr, v in usage.items())


__all__ = ["CycleResult", "Entry", "Possibility", "run_cycle"]
