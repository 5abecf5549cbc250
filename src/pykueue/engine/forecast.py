"""When will each pending workload start? The engine, played forward on a copy of the state.

    live State ──copy──▶ private State (evictions complete at once, no PodsReady timeouts)
                           │ every admitted workload ends after its remaining running time
                           │ repeat: settle (cycles until quiet) at t; record first admissions;
                           │         t = next completion / backoff end / protection end /
                           │             end of a put-off preemption (`engine.put_offs`)
                           ▼
                        first admission time per pending workload

It is run three times: with every running time at its expected value (the
estimate), at the low end of its range and at the high end (the range). Running
times come from `pykueue.engine.runtimes`. The model assumes nothing new arrives
and nothing fails: a later workload of higher priority, a queue change or a job
that ends early moves the real start, which is why the caller recomputes on a
schedule. A quota reservation counts as the start (admission checks pass at once).

The live state is never touched: the copy shares only the frozen queue specs and
each workload's pod sets; every field the engine mutates is copied.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, replace

from pykueue.engine import admission_fair_sharing, lifecycle, scheduler, specs
from pykueue.engine.config import EngineConfig
from pykueue.engine.runtimes import SECOND, UNKNOWN_BASIS, Model
from pykueue.engine.state import State
from pykueue.engine.workloads import Workload

HORIZON = 7 * 24 * 3600 * SECOND  # no estimate beyond a week ahead
MAX_INSTANTS = 200_000  # event instants one forward run may visit (a bound on its cost)
MIN_CYCLE_BUDGET = 1_000  # cycles at one instant before moving on (a preemption ping-pong)
FITS_NOW = "fits now"  # the basis of a start that waits for no running workload's end
# The basis of a start that waits for the end of its preemption's put-off (`engine.put_offs`).
PUT_OFF = "the end of its preemption's put-off (preemption-cost policy: maxLostWork, putOffFor)"


@dataclass(frozen=True, slots=True)
class Estimate:
    """An estimated start (microseconds since the epoch) with its range and its basis.

    The basis names the source of the running time that decided the start: that of
    the workload whose end lets this one in (a limit, learned, or unknown; see
    `runtimes`), PUT_OFF when it waits for its preemption's put-off to end (a
    preemption-cost policy, docs/governance.md), or FITS_NOW when it waits for neither.
    """

    at: int
    low: int
    high: int
    basis: str

    @property
    def known(self) -> bool:
        """False when the start waits for an end nothing is known of (`runtimes.UNKNOWN_BASIS`):
        the times are the model's placeholder, not something to show."""
        return self.basis != UNKNOWN_BASIS


def pending_keys(state: State) -> list[str]:
    """Workloads waiting in a ClusterQueue's queue (unrouted ones cannot be estimated)."""
    keys: list[str] = []
    for queue in state.queues.values():
        keys.extend(wl.key for wl in queue.active())
        keys.extend(queue.inadmissible)
    return keys


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a forward run starts from: the live state's objects and copies of its workloads.

    Taking one is the only work done while the live state must hold still (the
    workloads are copied field by field); the forward runs then build their own
    states from it, wherever they run.
    """

    config: EngineConfig
    now: int
    cycle: int
    namespaces: dict[str, dict[str, str]]
    flavors: list[specs.ResourceFlavor]
    admission_checks: list[specs.AdmissionCheck]
    cohorts: list[specs.Cohort]
    cluster_queues: list[specs.ClusterQueue]
    local_queues: list[specs.LocalQueue]
    priority_values: dict[tuple[str, str], int]
    afs: admission_fair_sharing.Ledger | None
    workloads: list[Workload]  # copies, in arrival order
    pending: list[str]  # the keys waiting in a ClusterQueue's queue
    queue_of: dict[str, str]  # pending workload key -> its LocalQueue key


def snapshot(live: State) -> Snapshot:
    """Take a snapshot of ``live`` (copies: later changes to ``live`` do not reach it)."""
    pending = pending_keys(live)
    return Snapshot(
        config=replace(live.config, async_evictions=False, wait_for_pods_ready=None),
        now=live.now,
        cycle=live.cycle,
        namespaces={name: dict(labels) for name, labels in live.namespaces.items()},
        flavors=list(live.flavors.values()),
        admission_checks=list(live.admission_checks.values()),
        cohorts=list(live.cohorts.values()),
        cluster_queues=list(live.cluster_queues.values()),
        local_queues=list(live.local_queues.values()),
        priority_values=dict(live.priority_values),
        afs=copy.deepcopy(live.afs),
        workloads=sorted((_copy_workload(wl) for wl in live.workloads.values()), key=lambda wl: wl.seq),
        pending=pending,
        queue_of={key: live.workloads[key].queue_key for key in pending},
    )


class Estimates(dict[str, Estimate]):
    """Estimated starts by workload key, and the scheduling cycles the forward runs took."""

    cycles: int = 0


def estimate(
    snap: Snapshot,
    model: Model,
    targets: Iterable[str] | None = None,
    ranges: bool = True,
    horizon: int = HORIZON,
    max_cycles: int | None = None,
) -> Estimates:
    """Estimated starts of ``targets`` (default: every pending workload) from ``snap.now``.

    A workload missing from the answer does not start within ``horizon`` (or the
    forward run's bound) under the model: its queue is stopped, it never fits, or
    it waits behind more work than a week holds. ``max_cycles`` bounds the
    scheduling cycles of the expected run, so its cost: the run stops there and
    answers for the workloads that started before (the soonest ones). The range runs
    look only for those and get twice the cycles the expected run used. The answer's
    ``cycles`` counts the cycles of all the runs together.
    """
    wanted = set(snap.pending if targets is None else targets) & set(snap.queue_of)
    end = snap.now + horizon
    run = _Run(restore(snap), model, "expected", wanted, end, max_cycles)
    expected = run.play()
    cycles = run.cycles
    low = high = expected
    if ranges:
        # Each start in a range run needs the same ends as in the expected run, at other
        # times: about as many cycles, so twice as many is room enough.
        bound = None if max_cycles is None else max(2 * run.cycles, 10)
        low_run = _Run(restore(snap), model, "low", set(expected), end, bound)
        high_run = _Run(restore(snap), model, "high", set(expected), end, bound)
        low, high = low_run.play(), high_run.play()
        cycles += low_run.cycles + high_run.cycles
    answer = Estimates(
        (key, Estimate(at, min(at, low.get(key, at)), max(at, high.get(key, end)), run.because[key]))
        for key, at in expected.items()
    )
    answer.cycles = cycles
    return answer


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What one forward run did: first admissions of the pending and first preemptions."""

    admitted: dict[str, int]  # pending workload key -> when it was first admitted
    preempted: dict[str, int]  # workload key -> when it was first preempted


def outcomes(state: State, model: Model, end: int) -> Outcomes:
    """Play ``state`` (a private one, from `restore`) forward to ``end`` at expected running times."""
    run = _Run(state, model, "expected", set(pending_keys(state)), end)
    admitted = run.play()
    return Outcomes(admitted, dict(run.preempted))


def restore(snap: Snapshot) -> State:
    """A private state for one forward run, built from ``snap`` (which stays as it was)."""
    state = State(config=snap.config, now=snap.now, cycle=snap.cycle)
    for name, labels in snap.namespaces.items():
        state.apply_namespace(name, labels)
    for flavor in snap.flavors:
        state.apply_flavor(flavor)
    for check in snap.admission_checks:
        state.apply_admission_check(check)
    for cohort in snap.cohorts:
        state.apply_cohort(cohort)
    for cq in snap.cluster_queues:
        state.apply_cluster_queue(cq)
    for lq in snap.local_queues:
        state.apply_local_queue(lq)
    for (kind, name), value in snap.priority_values.items():
        state.apply_priority_class(kind, name, value)
    state.adopt_fair_sharing(copy.deepcopy(snap.afs))
    evicting = []
    for wl in snap.workloads:
        state.add_workload(_copy_workload(wl))
        if wl.eviction is not None:
            evicting.append(wl.key)
    for key in evicting:
        state.complete_eviction(key)  # the copy does not wait for the job to stop
    state.clear_events()
    state.clear_touched()
    return state


def _copy_workload(wl: Workload) -> Workload:
    """A copy whose mutable parts are its own.

    Field by field, written out: taking a snapshot holds the event loop, and this is
    several times faster than `copy.copy` or a loop over the slots (a test checks that
    every field is here).
    """
    clone = Workload.__new__(Workload)
    clone.namespace = wl.namespace
    clone.name = wl.name
    clone.queue_name = wl.queue_name
    clone.pod_sets = list(wl.pod_sets)
    clone.priority = wl.priority
    clone.priority_class = wl.priority_class
    clone.aged = wl.aged
    clone.created = wl.created
    clone.uid = wl.uid
    clone.seq = wl.seq
    clone.active = wl.active
    clone.admission = wl.admission
    clone.admitted_at = wl.admitted_at
    clone.borrowing = wl.borrowing
    clone.evicted_at = wl.evicted_at
    clone.conditions = {kind: copy.copy(cond) for kind, cond in wl.conditions.items()}
    clone.reclaimable = dict(wl.reclaimable)
    clone.requeue_at = wl.requeue_at
    clone.requeue_count = wl.requeue_count
    clone.runtime = wl.runtime
    clone.finished = wl.finished
    clone.invalid_reason = wl.invalid_reason
    clone.last_tried_flavor = None if wl.last_tried_flavor is None else dict(wl.last_tried_flavor)
    clone.last_generation = wl.last_generation
    clone.last_cycle = wl.last_cycle
    clone.preemption_count = wl.preemption_count
    clone.preempted_at = wl.preempted_at
    clone.preempted_by = wl.preempted_by
    clone.preempted_for = wl.preempted_for
    clone.shape = wl.shape
    clone.checks = {name: copy.copy(check) for name, check in wl.checks.items()} if wl.checks else {}
    clone.gated_by = wl.gated_by
    clone.eviction = wl.eviction
    clone.eviction_counts = dict(wl.eviction_counts)
    clone.unhealthy_nodes = wl.unhealthy_nodes
    clone.max_execution_seconds = wl.max_execution_seconds
    clone.past_execution_seconds = wl.past_execution_seconds
    clone.checkpoint_interval = wl.checkpoint_interval
    clone.lost_work = None if wl.lost_work is None else dict(wl.lost_work)
    clone.key = wl.key
    clone.queue_key = wl.queue_key
    return clone


class _Run:
    """One forward run: a completion heap over a private state."""

    def __init__(
        self,
        state: State,
        model: Model,
        which: str,
        targets: set[str],
        end: int,
        max_cycles: int | None = None,
    ) -> None:
        self.state = state
        self.max_cycles = max_cycles
        self.cycles = 0  # scheduling cycles run so far
        self.model = model
        self.which = which
        self.waiting = {key for key in targets if key in state.workloads}
        self.end = end
        self.started: dict[str, int] = {}
        self.preempted: dict[str, int] = {}  # workload key -> its first preemption in this run
        # Why each target started when it did: the basis of the running time of the
        # workload whose end let it in (or FITS_NOW).
        self.because: dict[str, str] = {}
        self._basis_of: dict[str, str] = {}  # workload key -> the basis of its scheduled end
        self._freed: list[str] = []  # the bases of the ends applied at the current instant
        self._put_off_ended: set[str] = set()  # targets whose put-off preemption ends at this instant
        self.completions: list[tuple[int, int, str, int]] = []  # (time, sequence, key, epoch)
        self.epoch: dict[str, int] = {}
        self.sequence = 0
        now = state.now
        for admitted in state.admitted.values():
            for wl in sorted(admitted.values(), key=lambda wl: wl.seq):
                ran = max(now - wl.admitted_at, 0)
                left = model.remaining(wl.key, wl.queue_key, ran, which)
                self._schedule(wl.key, now + left, model.runtime(wl.key, wl.queue_key).basis)

    def play(self) -> dict[str, int]:
        now = self.state.now
        self._complete(now)  # running workloads already due
        for _ in range(MAX_INSTANTS):
            # A put-off's end is an instant of its own (`lifecycle.next_deadline` has it): the
            # preemptor whose put-off ends now starts because of that, not of an end.
            self._put_off_ended = self.state.put_off.due(now)
            self._settle(now)
            if not self.waiting or self._spent():
                break
            later = self._next_instant(now)
            if later is None or later > self.end:
                break
            now = later
            self.state.advance_clock(now)
            self._complete(now)
        return self.started

    def _spent(self) -> bool:
        return self.max_cycles is not None and self.cycles >= self.max_cycles

    def _schedule(self, key: str, at: int, basis: str) -> None:
        self._basis_of[key] = basis
        self.sequence += 1
        heapq.heappush(self.completions, (at, self.sequence, key, self.epoch.get(key, 0)))

    def _next_instant(self, now: int) -> int | None:
        heap = self.completions
        while heap and self.epoch.get(heap[0][2], 0) != heap[0][3]:
            heapq.heappop(heap)  # voided by a preemption
        times = [heap[0][0]] if heap else []
        deadline = lifecycle.next_deadline(self.state)
        if deadline is not None and deadline > now:
            times.append(deadline)
        # A put-off preemption is tried again when its put-off ends (`engine.put_offs`), an
        # instant of its own: `next_deadline` has it too, but only as part of one minimum, which
        # a deadline this run has passed without acting on (it deactivates nothing: a running
        # workload's end is the model's) would hide.
        times.extend(self.state.put_off.deadlines(now))
        return max(min(times), now + 1) if times else None

    def _complete(self, now: int) -> None:
        heap = self.completions
        self._freed = []
        while heap and heap[0][0] <= now:
            _, _, key, epoch = heapq.heappop(heap)
            if self.epoch.get(key, 0) != epoch:
                continue
            self._freed.append(self._basis_of.pop(key))
            self.state.finish(key)
            self.state.delete_workload(key)

    def _basis_now(self, key: str) -> str:
        """Why ``key`` starts at this instant: a running workload's end applied now, else the
        end of its put-off preemption, else it fits now."""
        if self._freed:
            return self._freed[0]
        return PUT_OFF if key in self._put_off_ended else FITS_NOW

    def _settle(self, now: int) -> None:
        state = self.state
        for _ in range(MIN_CYCLE_BUDGET + 2 * len(self.waiting)):
            if self._spent():
                return
            parked = _parked(state)
            result = scheduler.run_cycle(state)
            self.cycles += 1
            for key in result.preempted:
                self.epoch[key] = self.epoch.get(key, 0) + 1
                self.preempted.setdefault(key, now)
            for key in result.admitted:
                wl = state.workloads[key]
                if key in self.waiting:
                    self.waiting.discard(key)
                    self.started[key] = now
                    self.because[key] = self._basis_now(key)
                runtime = self.model.runtime(key, wl.queue_key)
                self._schedule(key, now + max(runtime.pick(self.which), 1), runtime.basis)
            state.clear_events()
            state.clear_touched()
            if result.heads == 0 or (not result.changed and _parked(state) == parked):
                return


def _parked(state: State) -> int:
    return sum(len(queue.inadmissible) for queue in state.queues.values())
