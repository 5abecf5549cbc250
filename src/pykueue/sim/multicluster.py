"""Several clusters on one virtual clock: a MultiKueue manager and its workers, one engine each.

Every cluster is an engine `State` of its own, scheduled by the same pure
engine as a single-cluster run (`pykueue.sim.driver`); this module only moves
jobs between them, as the MultiKueue admission check does
(`pykueue.multikueue.controller`, docs/multikueue.md):

1. a job arrives at the manager and queues there;
2. the manager reserves quota for it; when its ClusterQueue names a MultiKueue
   AdmissionCheck, the check stays Pending and copies of the job are sent to
   the eligible workers (`pykueue.sim.dispatch`: all at once, or a few at a
   time), each arriving ``dispatch latency`` later; a job of a ClusterQueue
   without such a check runs on the manager, as in a single-cluster run;
3. each worker queues its copy like any job (created when it arrives); the
   first copy to reserve quota wins (ties: the MultiKueueConfig's order), the
   others are withdrawn, releasing what they held, and the manager's check
   turns Ready;
4. the job runs on the winner for its runtime; when it ends, the worker and the
   manager both release its quota.

Preemptions: a job preempted on its worker goes back to that worker's queue
(the manager keeps its reservation and its check Ready, as the Kubernetes-mode
check does: the copy is still there) and keeps its progress up to its last
checkpoint, as in a single-cluster run. A job the manager evicts (its own
quota reclaimed) has every copy withdrawn and is dispatched afresh when the
manager reserves again.

Outages (``Options.outages``): a worker the manager cannot reach keeps running
its own jobs, but the manager sends it nothing, cannot see its copies win, and
cannot delete them. A job that won there stays for ``workerLostTimeout``; if
the worker is still out of reach then, the manager's check goes Retry, the
engine evicts and requeues the job, and it is dispatched again to the workers
that answer (its run there counts as lost work). A job that ends on a worker
out of reach ends for the manager when the worker is back. Copies the manager
wanted gone stay on the worker, holding its quota, until it is back.

At each instant: workers coming back and going away, completions, lost
workers, Incremental dispatch rounds, arrivals, then the clusters settle together, the manager, the copies due, every worker in
MultiKueueCluster order, the elections, until nothing changes anywhere.
Deterministic: the order of clusters and jobs is fixed, uids come from the seed.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from pykueue.engine import aging, lifecycle, scheduler
from pykueue.engine.evictions import PREEMPTED
from pykueue.engine.state import State
from pykueue.errors import EngineError, InputError
from pykueue.sim import dispatch
from pykueue.sim.cluster_metrics import MANAGER, WORKER, ClusterRecord, Figures, capacity_of
from pykueue.sim.design import Design
from pykueue.sim.driver import MIN_CYCLE_BUDGET, PING_PONG, Options, Run, holding_by_resource, parked_count
from pykueue.sim.federation import Federation
from pykueue.sim.jobs import SECOND, Job, saved_progress
from pykueue.sim.metrics import Recorder

MAX_ROUNDS = 10_000  # settle rounds over all clusters at one instant before the run is declared stuck
WORKER_LOST = "MultiKueueWorkerLost"  # the reason recorded when a lost worker's job is dispatched again


@dataclass(slots=True)
class _Trip:
    """One job's way through MultiKueue: its current dispatch, where it runs, its progress."""

    generation: int = 0  # bumped by every manager reservation and eviction: older sends are void
    check: str = ""  # the MultiKueue AdmissionCheck of this dispatch
    clusters: tuple[str, ...] = ()  # the check's workers, in the MultiKueueConfig's order
    reserved_at: int = -1  # the manager's reservation of this dispatch
    sent: set[str] = field(default_factory=set)  # workers a copy went to (arrived or on its way)
    arrived: dict[str, int] = field(default_factory=dict)  # workers holding a copy: when it arrived
    winner: str = ""  # the worker whose copy won ("" none yet, or the job runs on the manager)
    running: bool = False  # running on its site (the recorder's view: also while `ended_unseen`)
    ended_unseen: int = -1  # it ended then on a worker out of reach; the manager does not know yet
    progress: int = 0
    started: int = -1
    ends: int = -1  # when its current run ends
    epoch: int = 0  # bumped when a run stops: its scheduled completion is void
    holding: dict[str, int] = field(default_factory=dict)


class _GoingRound(Exception):
    """A workload was preempted more than `PING_PONG` times at one instant."""


def simulate(design: Design, jobs: list[Job], options: Options) -> Run:
    """Run ``jobs`` on ``design``'s manager and workers to the end."""
    if options.cycle_time:
        raise InputError(
            "--cycle-time: a cycle time is not modelled with several clusters (MultiKueue); leave it at 0"
        )
    loop = _Federated(design, jobs, options)
    loop.run()
    return Run(
        design,
        loop.jobs,
        loop.recorder,
        options.seed,
        loop.cycles,
        loop.instants,
        notes=[*design.notes, *loop.notes],
        clusters=loop.figures,
    )


class _Federated:
    """The state of one run over several clusters."""

    def __init__(self, design: Design, jobs: list[Job], options: Options) -> None:
        assert isinstance(design.federation, Federation)
        self.federation: Federation = design.federation
        self.options = options
        self.latency = options.dispatch_latency
        self.manager = design.state()
        self.workers: dict[str, State] = {
            name: worker.state() for name, worker in self.federation.workers.items()
        }
        self.rng = random.Random(options.seed)
        self.jobs = sorted(jobs, key=lambda job: job.submit)  # stable: trace order within an instant
        self.index_of = {job.key: i for i, job in enumerate(self.jobs)}
        self.cq_of = [self.manager.local_queues[job.queue_key].cluster_queue for job in self.jobs]
        self.uids = [""] * len(self.jobs)
        self.trips = [_Trip() for _ in self.jobs]
        self.recorder = Recorder(self.manager, self.jobs, self.cq_of, design.cq_classes)
        n = len(self.jobs)
        self.figures = Figures(
            self.federation.dispatcher,
            self.latency,
            ClusterRecord(design.name, MANAGER, capacity_of(self.manager)),
            {name: ClusterRecord(name, WORKER, capacity_of(state)) for name, state in self.workers.items()},
            [""] * n,
            [-1] * n,
            [-1] * n,
            self.federation.worker_lost_timeout,
        )
        self.awaiting: set[int] = set()  # jobs whose copies race for a winner
        self.outages = _merged(options.outages, set(self.workers))
        self.figures.outages = [
            (name, start, end) for name, windows in self.outages.items() for start, end in windows
        ]
        self.changes = sorted({t for windows in self.outages.values() for window in windows for t in window})
        self.stale: dict[str, set[int]] = {name: set() for name in self.workers}  # copies to delete when back
        self.lost: list[tuple[int, int, int, int]] = []  # (time, sequence, job, generation)
        # runs left behind on a worker out of reach: they go on until their end (time, sequence, job, worker)
        self.left_behind: list[tuple[int, int, int, str]] = []
        self.behind_until: dict[tuple[str, int], int] = {}  # (worker, job) -> when that run ends
        self.completions: list[tuple[int, int, int, int]] = []  # (time, sequence, job, epoch)
        self.deliveries: list[
            tuple[int, int, int, int, str]
        ] = []  # (time, sequence, job, generation, worker)
        self.rounds: list[tuple[int, int, int, int]] = []  # Incremental: (time, sequence, job, generation)
        self.sequence = 0
        self.next_job = 0
        self.cycles = 0
        self.instants = 0
        self.preempted_now: dict[int, int] = {}
        self.notes: list[str] = []

    # ------------------------------------------------------------ the clock

    def _live_delivery(self, entry: tuple[int, int, int, int, str]) -> bool:
        _, _, i, generation, _ = entry
        return generation == self.trips[i].generation and i in self.awaiting

    def _live_round(self, entry: tuple[int, int, int, int]) -> bool:
        _, _, i, generation = entry
        return generation == self.trips[i].generation and i in self.awaiting

    def next_instant(self) -> int | None:
        times = []
        if self.next_job < len(self.jobs):
            times.append(self.jobs[self.next_job].submit)
        while self.completions and self.trips[self.completions[0][2]].epoch != self.completions[0][3]:
            heapq.heappop(self.completions)  # voided by a preemption: not an event
        if self.completions:
            times.append(self.completions[0][0])
        while self.deliveries and not self._live_delivery(self.deliveries[0]):
            heapq.heappop(self.deliveries)
        if self.deliveries:
            times.append(self.deliveries[0][0])
        while self.rounds and not self._live_round(self.rounds[0]):
            heapq.heappop(self.rounds)
        if self.rounds:
            times.append(self.rounds[0][0])
        if self.lost:
            times.append(self.lost[0][0])
        if self.left_behind:
            times.append(self.left_behind[0][0])
        if self.changes:
            times.append(self.changes[0])
        for state in self._states():
            times.extend(t for t in state.protection_deadlines() if t > state.now)
            step = aging.next_step(state)  # a waiting workload's next point of aging
            if step is not None:
                times.append(step)
        return min(times) if times else None

    def reachable(self, name: str, now: int) -> bool:
        return not any(start <= now < end for start, end in self.outages.get(name, ()))

    def out_since(self, name: str, now: int) -> bool:
        """Whether worker ``name`` has been out of reach for workerLostTimeout at ``now``."""
        timeout = self.federation.worker_lost_timeout
        return any(start <= now - timeout and now < end for start, end in self.outages.get(name, ()))

    def _states(self) -> list[State]:
        return [self.manager, *self.workers.values()]

    def run(self) -> None:
        progress = self.options.progress
        while (now := self.next_instant()) is not None:
            for state in self._states():
                state.advance_clock(now)
            self.instants += 1
            dirty: set[str] = set()
            self.outage_changes(now, dirty)
            self.complete(now, dirty)
            self.end_left_behind(now)
            self.lost_workers(now, dirty)
            self.incremental_rounds(now)
            self.submit(now, dirty)
            self.settle(now, dirty)
            for state in self._states():
                state.clear_events()  # the records keep what matters
            self.recorder.settled(self.manager, now, dirty)
            primary = self.recorder.primary
            self.figures.manager.sample(self.manager, now, primary)
            for name, state in self.workers.items():
                self.figures.workers[name].sample(state, now, primary)
            if progress is not None and self.instants % self.options.progress_every == 0:
                progress(self._finished(), len(self.jobs), now)
        if progress is not None:
            progress(self._finished(), len(self.jobs), self.recorder.end)

    def _finished(self) -> int:
        return sum(record.finished for record in self.figures.records())

    # ------------------------------------------------------------- events

    def submit(self, now: int, dirty: set[str]) -> None:
        while self.next_job < len(self.jobs) and self.jobs[self.next_job].submit == now:
            i = self.next_job
            self.next_job += 1
            self.uids[i] = f"{self.rng.getrandbits(64):016x}"
            self.manager.add_workload(self.jobs[i].workload(self.uids[i]))
            self.recorder.arrived(i, now)
            dirty.add(self.cq_of[i])

    def complete(self, now: int, dirty: set[str]) -> None:
        while self.completions and self.completions[0][0] == now:
            _, _, i, epoch = heapq.heappop(self.completions)
            trip = self.trips[i]
            if trip.epoch != epoch:
                continue  # stopped since this completion was scheduled
            key = self.jobs[i].key
            if trip.winner:
                worker = self.workers[trip.winner]
                worker.finish(key)
                worker.delete_workload(key)
                self.figures.workers[trip.winner].finished += 1
                if not self.reachable(trip.winner, now):
                    trip.ended_unseen = now  # the manager learns when the worker is back
                    continue
            else:
                self.figures.manager.finished += 1
            self.finish_on_manager(i, now, dirty)

    def finish_on_manager(self, i: int, now: int, dirty: set[str]) -> None:
        key = self.jobs[i].key
        self.manager.finish(key)
        self.manager.delete_workload(key)
        trip = self.trips[i]
        trip.running = False
        trip.ended_unseen = -1
        # the job is gone from the manager: a later outage of its worker has nothing to lose
        trip.winner = ""
        trip.generation += 1
        self.recorder.finished(i, now)
        dirty.add(self.cq_of[i])

    def outage_changes(self, now: int, dirty: set[str]) -> None:
        """Workers coming back at ``now`` (first), then workers going out of reach."""
        while self.changes and self.changes[0] <= now:
            self.changes.pop(0)
        for name, windows in self.outages.items():
            if any(end == now for _, end in windows) and self.reachable(name, now):
                self.back(name, now, dirty)
        for name, windows in self.outages.items():
            for start, _ in windows:
                if start == now:
                    # what won there is lost if the worker is still away after workerLostTimeout
                    for i, trip in enumerate(self.trips):
                        if trip.winner == name:
                            self.sequence += 1
                            due = now + self.federation.worker_lost_timeout
                            heapq.heappush(self.lost, (due, self.sequence, i, trip.generation))

    def back(self, name: str, now: int, dirty: set[str]) -> None:
        """Worker ``name`` answers again: its unwanted copies go, what ended there ends, copies are sent."""
        worker = self.workers[name]
        for i in sorted(self.stale[name]):
            key = self.jobs[i].key
            self.behind_until.pop((name, i), None)
            if key in worker.workloads:
                worker.delete_workload(key)
                self.figures.workers[name].withdrawn += 1
        self.stale[name].clear()
        for i, trip in enumerate(self.trips):
            if trip.winner == name and trip.ended_unseen >= 0:
                self.finish_on_manager(i, now, dirty)
        for i in sorted(self.awaiting):
            self.send(i, now)

    def leave_behind(self, i: int, name: str, now: int) -> None:
        """The manager gives up job ``i``'s copy on worker ``name``, which it cannot reach: the copy
        stays until the worker is back, and a run there goes on until its end."""
        self.stale[name].add(i)
        trip = self.trips[i]
        if trip.winner == name and trip.running and trip.ended_unseen < 0 and trip.ends > now:
            self.sequence += 1
            heapq.heappush(self.left_behind, (trip.ends, self.sequence, i, name))
            self.behind_until[(name, i)] = trip.ends

    def end_left_behind(self, now: int) -> None:
        """Runs left behind on a worker out of reach end there, releasing its quota."""
        while self.left_behind and self.left_behind[0][0] <= now:
            ends, _, i, name = heapq.heappop(self.left_behind)
            if self.behind_until.get((name, i)) != ends:
                continue  # deleted when the worker came back
            del self.behind_until[(name, i)]
            key = self.jobs[i].key
            worker = self.workers[name]
            if key in worker.workloads and worker.workloads[key].admission is not None:
                worker.finish(key)
                worker.delete_workload(key)
                self.stale[name].discard(i)

    def lost_workers(self, now: int, dirty: set[str]) -> None:
        """Jobs whose worker has been out of reach for workerLostTimeout go back to the manager's queue."""
        while self.lost and self.lost[0][0] <= now:
            _, _, i, generation = heapq.heappop(self.lost)
            trip = self.trips[i]
            if generation != trip.generation or not trip.winner or not self.out_since(trip.winner, now):
                continue
            name = trip.winner
            self.leave_behind(i, name, now)
            if trip.running:
                self.abandon(i, trip.ended_unseen if trip.ended_unseen >= 0 else now, now, -1, WORKER_LOST)
            self.figures.workers[name].lost += 1
            trip.arrived.pop(name, None)
            trip.winner = ""
            trip.generation += 1
            key = self.jobs[i].key
            lifecycle.report_check(self.manager, key, trip.check, "Retry", f'The worker "{name}" is lost')
            dirty.add(self.cq_of[i])

    def incremental_rounds(self, now: int) -> None:
        while self.rounds and self.rounds[0][0] == now:
            entry = heapq.heappop(self.rounds)
            if self._live_round(entry):
                self.send(entry[2], now)

    # ------------------------------------------------------------- settling

    def settle(self, now: int, dirty: set[str]) -> None:
        """Settle every cluster at ``now``, together, until nothing changes anywhere."""
        self.preempted_now = {}
        try:
            for _ in range(MAX_ROUNDS):
                busy = self.deliver(now)
                busy |= self.settle_cluster(None, now, dirty)
                busy |= self.deliver(now)  # copies sent by those reservations, with no latency
                for name in self.workers:
                    busy |= self.settle_cluster(name, now, dirty)
                busy |= self.elect(now, dirty)
                if not busy:
                    return
        except _GoingRound:
            self._note_ping_pong(now)
            return
        raise EngineError(f"the clusters did not settle within {MAX_ROUNDS} rounds at t={now}us")

    def settle_cluster(self, worker: str | None, now: int, dirty: set[str]) -> bool:
        """Cycles on one cluster (None: the manager) until one is quiet; whether any did something."""
        state = self.manager if worker is None else self.workers[worker]
        budget = MIN_CYCLE_BUDGET + 2 * len(state.workloads)
        busy = False
        for _ in range(budget):
            parked = parked_count(state)
            result = scheduler.run_cycle(state)
            self.cycles += 1
            for key in result.preempted:
                self.preempted(worker, self.index_of[key], now, dirty)
            for key in result.admitted:
                self.reserved(worker, self.index_of[key], now, dirty)
            busy |= result.changed
            if result.heads == 0 or (not result.changed and parked_count(state) == parked):
                return busy
        raise EngineError(f"cluster {worker or MANAGER} did not settle within {budget} cycles at t={now}us")

    def reserved(self, worker: str | None, i: int, now: int, dirty: set[str]) -> None:
        """A cluster's cycle reserved quota for job ``i`` (on a worker: for its copy)."""
        trip = self.trips[i]
        if worker is not None:
            if trip.winner == worker:
                self.start(i, worker, now, dirty)  # back after a preemption on its worker
            return  # a copy in the race: `elect` looks at every worker's reservations
        dirty.add(self.cq_of[i])
        wl = self.manager.workloads[self.jobs[i].key]
        check = next((name for name in wl.checks if name in self.federation.checks), "")
        if not check:
            self.start(i, "", now, dirty)  # no MultiKueue check: it runs on the manager
            return
        trip.generation += 1
        trip.check = check
        trip.clusters = self.federation.checks[check]
        trip.reserved_at = now
        trip.sent = set()
        trip.arrived = {}
        trip.winner = ""
        self.awaiting.add(i)
        self.send(i, now)

    def send(self, i: int, now: int) -> None:
        """Send copies to the workers the dispatcher makes eligible now; plan the next round."""
        trip = self.trips[i]
        dispatcher = self.federation.dispatcher
        waited = now - trip.reserved_at
        answering = [name for name in trip.clusters if self.reachable(name, now)]
        for name in dispatch.eligible(dispatcher, answering, waited):
            if name not in trip.sent:
                trip.sent.add(name)
                self.sequence += 1
                heapq.heappush(self.deliveries, (now + self.latency, self.sequence, i, trip.generation, name))
        later = dispatch.next_round(dispatcher, answering, waited)
        if later is not None:
            self.sequence += 1
            heapq.heappush(self.rounds, (trip.reserved_at + later, self.sequence, i, trip.generation))

    def deliver(self, now: int) -> bool:
        """Copies due at ``now`` join their workers' queues, created now; whether any did."""
        delivered = False
        while self.deliveries and self.deliveries[0][0] <= now:
            entry = heapq.heappop(self.deliveries)
            if not self._live_delivery(entry):
                continue
            _, _, i, _, name = entry
            if not self.reachable(name, now):
                self.trips[i].sent.discard(name)  # it went away on the way: sent again when it is back
                continue
            wl = self.jobs[i].workload(self.uids[i])
            wl.created = now  # a new object on the worker: it queues from its arrival
            self.workers[name].add_workload(wl)
            self.trips[i].arrived[name] = now
            self.figures.workers[name].copies += 1
            delivered = True
        return delivered

    def elect(self, now: int, dirty: set[str]) -> bool:
        """Every job whose copy reserved quota on a worker gets its winner; the other copies go."""
        elected = False
        for i in sorted(self.awaiting):
            trip = self.trips[i]
            key = self.jobs[i].key
            reserved = {
                name: _reserved_at(self.workers[name], key, now)
                for name in trip.arrived
                if self.reachable(name, now) and self.workers[name].workloads[key].admission is not None
            }
            winner = dispatch.winner(reserved, trip.clusters)
            if winner is None:
                continue
            self.awaiting.discard(i)
            trip.winner = winner
            for name in sorted(trip.arrived):
                if name != winner:
                    self.withdraw(i, name)
            lifecycle.report_check(
                self.manager, key, trip.check, "Ready", f'The workload got reservation on "{winner}"'
            )
            if self.figures.worker_wait[i] < 0:
                self.figures.manager_wait[i] = trip.reserved_at - self.jobs[i].submit
                self.figures.worker_wait[i] = now - trip.reserved_at
            self.figures.workers[winner].waits.append(now - trip.arrived[winner])
            self.start(i, winner, now, dirty)
            elected = True
        return elected

    def withdraw(self, i: int, name: str) -> None:
        """Remove job ``i``'s copy from worker ``name`` (its quota, if it held some, is released);
        a worker out of reach keeps it until it is back."""
        del self.trips[i].arrived[name]
        if not self.reachable(name, self.manager.now):
            self.leave_behind(i, name, self.manager.now)
            return
        self.workers[name].delete_workload(self.jobs[i].key)
        self.figures.workers[name].withdrawn += 1

    def start(self, i: int, site: str, now: int, dirty: set[str]) -> None:
        """Job ``i`` starts running on worker ``site`` ("": on the manager)."""
        trip = self.trips[i]
        state = self.workers[site] if site else self.manager
        trip.running = True
        trip.started = now
        trip.holding = holding_by_resource(state.workloads[self.jobs[i].key].usage())
        record = self.figures.workers[site] if site else self.figures.manager
        record.admitted += 1
        self.figures.site[i] = site or MANAGER
        self.recorder.admitted(i, now)
        self.sequence += 1
        trip.ends = now + self.jobs[i].runtime - trip.progress
        heapq.heappush(self.completions, (trip.ends, self.sequence, i, trip.epoch))
        dirty.add(self.cq_of[i])

    def preempted(self, worker: str | None, i: int, now: int, dirty: set[str]) -> None:
        """A cluster's cycle preempted job ``i`` (on a worker: its copy)."""
        trip = self.trips[i]
        count = self.preempted_now.get(i, 0) + 1
        self.preempted_now[i] = count
        state = self.manager if worker is None else self.workers[worker]
        record = self.figures.manager if worker is None else self.figures.workers[worker]
        record.preemptions += 1
        if worker is not None:
            if trip.winner == worker and trip.running:
                self.stop(i, state, now, dirty)
            # a copy still in the race just queues again on its worker
        else:
            running = trip.running
            for name in sorted(trip.arrived):
                self.withdraw(i, name)
            if running:
                self.stop(i, state, now, dirty)
            trip.generation += 1  # copies still on their way are void
            trip.winner = ""
            self.awaiting.discard(i)
            dirty.add(self.cq_of[i])
        if count > PING_PONG:
            raise _GoingRound

    def stop(self, i: int, state: State, now: int, dirty: set[str]) -> None:
        """Job ``i`` is preempted: it keeps its progress to the last checkpoint."""
        trip = self.trips[i]
        wl = state.workloads[self.jobs[i].key]
        by = self.index_of.get(wl.preempted_by or "", -1)
        condition = wl.conditions.get(PREEMPTED)
        ended = trip.ended_unseen if trip.ended_unseen >= 0 else now
        self.abandon(i, ended, now, by, condition.reason if condition else "")
        dirty.add(self.cq_of[i])

    def abandon(self, i: int, ended: int, now: int, by: int, reason: str) -> None:
        """Job ``i``'s run, which went on until ``ended``, is given up at ``now`` (back to its
        last checkpoint); its scheduled completion is void."""
        trip = self.trips[i]
        ran = ended - trip.started
        kept = saved_progress(trip.progress, ran, self.jobs[i].checkpoint)
        lost = trip.progress + ran - kept
        trip.progress = kept
        trip.running = False
        trip.ended_unseen = -1
        trip.epoch += 1
        self.recorder.preempted(i, now, lost, trip.holding, by, reason)

    def _note_ping_pong(self, now: int) -> None:
        worst = sorted(self.preempted_now.items(), key=lambda item: (-item[1], item[0]))[:4]
        names = ", ".join(f"{self.jobs[i].key} ({count}x)" for i, count in worst)
        self.notes.append(
            f"at t={now / SECOND:g}s the schedulers went round in circles (workloads preempting each "
            f"other: {names}); the simulation moved on to the next event"
        )


def _reserved_at(state: State, key: str, now: int) -> int:
    """When a worker's copy reserved quota (a worker out of reach may have done so earlier)."""
    condition = state.workloads[key].conditions.get("QuotaReserved")
    return condition.last_transition if condition is not None else now


def _merged(outages: tuple[tuple[str, int, int], ...], workers: set[str]) -> dict[str, list[tuple[int, int]]]:
    """Each worker's outage windows, overlapping ones merged (a worker comes back once per window)."""
    windows: dict[str, list[tuple[int, int]]] = {}
    for name, start, end in sorted(outages):
        if name not in workers:
            continue  # `plan`: another design's worker
        current = windows.setdefault(name, [])
        if current and start <= current[-1][1]:
            current[-1] = (current[-1][0], max(current[-1][1], end))
        else:
            current.append((start, end))
    return windows
