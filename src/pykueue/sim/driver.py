"""The event loop: the admission engine on a virtual clock.

Time is the engine's integer microseconds and only moves to the next event:

1. take the earliest pending instant t (a completion or a submission);
2. move the engine's clock to t (requeue backoffs expire, fair-sharing usage decays);
3. apply every completion due at t, then every submission at t (in trace order);
4. *settle*: run scheduling cycles at t until a cycle admits nothing, preempts
   nothing and parks nothing more (or no queue has a head). Cycles take no
   virtual time, so a workload that fits is admitted at the very instant its
   quota frees up — the best a real Kueue, whose cycles take milliseconds,
   could do. Each cycle is upstream's: one head per ClusterQueue.
5. for each admission, schedule its completion after its remaining work; for
   each preemption, throw away the work since its last checkpoint and cancel
   its completion (a per-job epoch makes the stale heap entry a no-op).

Why settle at events rather than tick: between events nothing can change in
the engine (no job ends, none arrives), so a tick would only re-run cycles that
decide nothing, and would round admission times to the tick. Settling is exact
and does work only when something happens.

With ``Options.cycle_time`` > 0 a cycle takes that long instead, as in a real
Kueue whose scheduler loop admits one head per ClusterQueue per cycle: after a
cycle that did something the next one runs ``cycle_time`` later (events in
between wait for it); after a quiet cycle the scheduler sleeps until the next
event. This bounds admission throughput the way upstream's loop does.

Determinism: jobs are ordered by submission time, ties by trace order;
completions at one instant by admission order; the only randomness is each
workload's uid (upstream's last tie-breaker between equal priority and equal
queue time), drawn from a `random.Random(seed)`.
"""

from __future__ import annotations

import gc
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pykueue.engine import aging, scheduler
from pykueue.engine.evictions import PREEMPTED
from pykueue.engine.state import State
from pykueue.errors import EngineError
from pykueue.sim import policies
from pykueue.sim.cluster_metrics import Figures
from pykueue.sim.design import Design
from pykueue.sim.jobs import SECOND, Job, saved_progress
from pykueue.sim.metrics import Recorder

MIN_CYCLE_BUDGET = 10_000  # cycles per instant before the run is declared stuck (plus 2 per workload)
PING_PONG = 50  # preemptions of one workload at one instant that mean the engine is going round in circles
MAX_NOTES = 20
Progress = Callable[[int, int, int], None]  # (jobs finished, jobs in total, virtual now)


@dataclass(slots=True)
class Options:
    seed: int = 0
    progress: Progress | None = None
    progress_every: int = 1  # instants between progress callbacks
    cycle_time: int = 0  # microseconds one scheduling cycle takes; 0: settle at each instant
    dispatch_latency: int = 0  # MultiKueue: microseconds from the manager's reservation to a copy's arrival
    outages: tuple[
        tuple[str, int, int], ...
    ] = ()  # MultiKueue: (worker, start, end) out of the manager's reach


@dataclass(slots=True)
class Run:
    """A finished simulation: the recorder holds every figure."""

    design: Design
    jobs: list[Job]
    recorder: Recorder
    seed: int
    cycles: int
    instants: int
    cycle_time: int = 0
    notes: list[str] = field(default_factory=list)
    clusters: Figures | None = None  # a MultiKueue run's per-cluster figures

    def summary(self, source: str) -> dict[str, Any]:
        document = self.recorder.summary(self.design.name, source, self.seed, self.notes, self.model())
        document["policies"] = policies.in_force(self.design)  # aging and contracts in force
        if self.clusters is not None:
            document["multiKueue"] = self.clusters.summary(self.recorder)
        return document

    def model(self) -> dict[str, str]:
        if self.cycle_time:
            cycles = (
                f"each scheduling cycle takes {self.cycle_time / 1000:g} ms; after a cycle that did "
                "something the next runs that much later, after a quiet one the scheduler waits for an event"
            )
        else:
            cycles = (
                "events at one instant are applied together (completions, then arrivals); "
                "scheduling cycles then run at that instant until one changes nothing; cycles take no time"
            )
        config = self.design.config
        fair = config.fair_sharing
        afs = config.admission_fair_sharing
        model = {
            "clock": "virtual, microseconds",
            "cycles": cycles,
            "configuration": self.design.config_source or "none (the simulator's defaults)",
            "fairSharing": f"on ({', '.join(fair.preemption_strategies)})" if fair.enable else "off",
            "admissionFairSharing": (
                f"on (usage half-life {afs.usage_half_life / SECOND:g}s)" if afs is not None else "off"
            ),
        }
        if self.clusters is not None:
            model["clusters"] = (
                f"a MultiKueue manager and {len(self.clusters.workers)} worker(s), one engine each; "
                f"{self.clusters.dispatcher} dispatch, copies arrive {self.clusters.latency / SECOND:g}s "
                "after the manager's reservation; the first worker to reserve quota runs the job"
            )
            if self.clusters.outages:
                windows = ", ".join(
                    f"{name} {start / SECOND:g}s..{end / SECOND:g}s"
                    for name, start, end in self.clusters.outages
                )
                model["clusters"] += (
                    f"; out of the manager's reach: {windows} (workerLostTimeout "
                    f"{self.clusters.worker_lost_timeout / SECOND:g}s)"
                )
        return model


@dataclass(slots=True)
class _Running:
    """The live part of a job: saved progress, the current run, the epoch of its completion."""

    progress: int = 0
    started: int = -1
    epoch: int = 0
    holding: dict[str, int] = field(default_factory=dict)
    admitted_for: int = 0  # whole seconds admitted before this run, as upstream accumulates them
    spent: dict[str, int] = field(default_factory=dict)  # resource x microseconds held, all runs


def simulate(design: Design, jobs: list[Job], options: Options | None = None) -> Run:
    """Run ``jobs`` (already checked against ``design``, a single cluster) to the end and return the run.

    A MultiKueue manager's design runs through `pykueue.sim.simulation.simulate`."""
    options = options or Options()
    if design.federation is not None:
        raise ValueError(f"design {design.name} has workers: run it with pykueue.sim.simulation.simulate")
    loop = _Loop(design, jobs, options)
    gc.collect()
    gc.freeze()  # the loaded design and the job list are long-lived: keep them out of collections
    try:
        loop.run()
    finally:
        gc.unfreeze()
    return Run(
        design,
        loop.jobs,
        loop.recorder,
        options.seed,
        loop.cycles,
        loop.instants,
        options.cycle_time,
        notes=[*design.notes, *loop.notes],
    )


class _Loop:
    """The state of one run: the engine, the jobs in submission order, the completion heap."""

    def __init__(self, design: Design, jobs: list[Job], options: Options) -> None:
        self.options = options
        self.state = design.state()
        self.rng = random.Random(options.seed)
        self.jobs = sorted(jobs, key=lambda job: job.submit)  # stable: trace order within an instant
        self.cq_of = [self.state.local_queues[job.queue_key].cluster_queue for job in self.jobs]
        self.index_of = {job.key: i for i, job in enumerate(self.jobs)}
        self.recorder = Recorder(self.state, self.jobs, self.cq_of, design.cq_classes)
        self.live = [_Running() for _ in self.jobs]
        # (time, sequence, job, epoch, stopped at its maximum execution time rather than finished)
        self.completions: list[tuple[int, int, int, int, bool]] = []
        self.sequence = 0
        self.next_job = 0
        self.finished = 0
        self.cycles = 0
        self.instants = 0
        self.next_cycle: int | None = None  # with a cycle time: when the busy scheduler runs next
        self.last_preempted: list[int] = []
        self.recorder_preemptions = 0
        self.ping_pongs = 0
        self.notes: list[str] = []

    def next_instant(self) -> int | None:
        times = []
        if self.next_job < len(self.jobs):
            times.append(self.jobs[self.next_job].submit)
        while self.completions and self.live[self.completions[0][2]].epoch != self.completions[0][3]:
            heapq.heappop(self.completions)  # voided by a preemption: not an event
        if self.completions:
            times.append(self.completions[0][0])
        if self.next_cycle is not None:
            times.append(self.next_cycle)
        # A preemption contract's protection that ends may let a parked preemptor in.
        times.extend(t for t in self.state.protection_deadlines() if t > self.state.now)
        # A preemption put off by a preemption-cost policy is tried again when the put-off ends.
        times.extend(self.state.put_off.deadlines(self.state.now))
        # A waiting workload's next point of aging may let it preempt, or lead a StrictFIFO queue.
        step = aging.next_step(self.state)
        if step is not None:
            times.append(step)
        return min(times) if times else None

    def run(self) -> None:
        progress = self.options.progress
        while (now := self.next_instant()) is not None:
            self.state.advance_clock(now)
            self.instants += 1
            dirty: set[str] = set()
            self.complete(now, dirty)
            self.submit(now, dirty)
            if not self.options.cycle_time:
                self.settle(now, dirty)
            elif self.next_cycle is None or self.next_cycle <= now:
                quiet = self.cycle(now, dirty)
                self.next_cycle = None if quiet else now + self.options.cycle_time
            self.state.clear_events()  # the recorder keeps what matters; the audit trail would only grow
            self.recorder.settled(self.state, now, dirty)
            if progress is not None and self.instants % self.options.progress_every == 0:
                progress(self.finished, len(self.jobs), now)
        if progress is not None:
            progress(self.finished, len(self.jobs), self.recorder.end)

    def complete(self, now: int, dirty: set[str]) -> None:
        while self.completions and self.completions[0][0] == now:
            _, _, i, epoch, exceeded = heapq.heappop(self.completions)
            if self.live[i].epoch != epoch:
                continue  # preempted since this completion was scheduled
            key = self.jobs[i].key
            # A job past its limit is deactivated and never requeued: for the queues, it is gone too.
            self.state.finish(key)
            self.state.delete_workload(key)  # drop the finished record: the recorder has what it needs
            if exceeded:
                run = self.live[i]
                self.recorder.exceeded(i, now, _spent(run.spent, run.holding, now - run.started))
            else:
                self.recorder.finished(i, now)
            dirty.add(self.cq_of[i])
            self.finished += 1

    def submit(self, now: int, dirty: set[str]) -> None:
        while self.next_job < len(self.jobs) and self.jobs[self.next_job].submit == now:
            i = self.next_job
            self.next_job += 1
            self.state.add_workload(self.jobs[i].workload(f"{self.rng.getrandbits(64):016x}"))
            self.recorder.arrived(i, now)
            dirty.add(self.cq_of[i])

    def settle(self, now: int, dirty: set[str]) -> None:
        """Run cycles at ``now`` until one admits, preempts and parks nothing.

        Cycles take no time here, so a preemption ping-pong (workloads of two queues
        preempting each other in turn) would hold the clock forever. When one workload
        has been preempted more than `PING_PONG` times at this instant, settling stops,
        the run gets a note naming the workloads, and time moves on to the next event,
        as it would on a cluster whose cycles take time.
        """
        budget = MIN_CYCLE_BUDGET + 2 * len(self.state.workloads)
        preempted: dict[int, int] = {}
        for _ in range(budget):
            before = self.recorder_preemptions
            if self.cycle(now, dirty):
                return
            for i in self.last_preempted:
                preempted[i] = preempted.get(i, 0) + 1
            if self.recorder_preemptions != before and max(preempted.values()) > PING_PONG:
                self.note_ping_pong(now, preempted)
                return
        raise EngineError(f"the scheduler did not settle within {budget} cycles at t={now}us")

    def note_ping_pong(self, now: int, preempted: dict[int, int]) -> None:
        self.ping_pongs += 1
        if len(self.notes) >= MAX_NOTES:
            return
        worst = sorted(preempted.items(), key=lambda item: (-item[1], item[0]))[:4]
        names = ", ".join(f"{self.jobs[i].key} ({count}x)" for i, count in worst)
        self.notes.append(
            f"at t={now / SECOND:g}s the scheduler went round in circles (workloads preempting each "
            f"other: {names}); the simulation moved on to the next event"
        )

    def cycle(self, now: int, dirty: set[str]) -> bool:
        """One scheduling cycle at ``now``, its decisions applied to the jobs; True when it was quiet."""
        parked = parked_count(self.state)
        result = scheduler.run_cycle(self.state)
        self.cycles += 1
        self.last_preempted = [self.index_of[key] for key in result.preempted]
        self.recorder_preemptions += len(result.preempted)
        for i in self.last_preempted:
            self.preempted(i, now, dirty, *self.attribution(self.jobs[i].key))
        for key in result.admitted:
            self.admitted(self.index_of[key], now, dirty)
        return result.heads == 0 or (not result.changed and parked_count(self.state) == parked)

    def admitted(self, i: int, now: int, dirty: set[str]) -> None:
        run = self.live[i]
        run.started = now
        run.holding = holding_by_resource(self.state.workloads[self.jobs[i].key].usage())
        self.recorder.admitted(i, now)
        self.sequence += 1
        end = now + self.jobs[i].runtime - run.progress
        limit = self.jobs[i].max_execution
        # Finishing at the deadline itself counts as finishing within the limit.
        deadline = end if limit is None else now + limit - run.admitted_for
        exceeded = deadline < end
        heapq.heappush(self.completions, (min(deadline, end), self.sequence, i, run.epoch, exceeded))
        dirty.add(self.cq_of[i])

    def attribution(self, key: str) -> tuple[int, str]:
        """Who preempted the workload ``key`` (a job index, -1 if unknown) and upstream's reason."""
        wl = self.state.workloads[key]
        preemptor = self.index_of.get(wl.preempted_by or "", -1)
        condition = wl.conditions.get(PREEMPTED)
        return preemptor, condition.reason if condition is not None else ""

    def preempted(self, i: int, now: int, dirty: set[str], by: int = -1, reason: str = "") -> None:
        run = self.live[i]
        ran = now - run.started
        kept = saved_progress(run.progress, ran, self.jobs[i].checkpoint)
        lost = run.progress + ran - kept
        run.progress = kept
        run.admitted_for += ran // SECOND * SECOND  # each admission's whole seconds, as upstream
        run.spent = _spent(run.spent, run.holding, ran)
        run.epoch += 1  # its scheduled completion is void
        self.recorder.preempted(i, now, lost, run.holding, by, reason)
        dirty.add(self.cq_of[i])


def _spent(spent: dict[str, int], holding: dict[str, int], ran: int) -> dict[str, int]:
    """``spent`` plus what holding ``holding`` for ``ran`` microseconds adds."""
    total = dict(spent)
    for resource, value in holding.items():
        total[resource] = total.get(resource, 0) + value * ran
    return total


def parked_count(state: State) -> int:
    """How many workloads wait parked as inadmissible, in all ClusterQueues (a settled cycle parks none more)."""
    return sum(len(queue.inadmissible) for queue in state.queues.values())


def holding_by_resource(usage: dict[tuple[str, str], int]) -> dict[str, int]:
    """A workload's usage per resource, its flavors summed."""
    result: dict[str, int] = {}
    for (_, resource), value in usage.items():
        result[resource] = result.get(resource, 0) + value
    return result
