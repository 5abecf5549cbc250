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

Determinism: jobs are ordered by submission time, ties by trace order;
completions at one instant by admission order; the only randomness is each
workload's uid (upstream's last tie-breaker between equal priority and equal
queue time), drawn from a `random.Random(seed)`.
"""

from __future__ import annotations

import gc
import heapq
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pykueue.engine import scheduler
from pykueue.engine.state import State
from pykueue.errors import EngineError
from pykueue.sim.design import Design
from pykueue.sim.jobs import Job, saved_progress
from pykueue.sim.metrics import Recorder

MAX_CYCLES_PER_INSTANT = 200_000
Progress = Callable[[int, int, int], None]  # (jobs finished, jobs in total, virtual now)


@dataclass(slots=True)
class Options:
    seed: int = 0
    progress: Progress | None = None
    progress_every: int = 200  # instants between progress callbacks


@dataclass(slots=True)
class Run:
    """A finished simulation: the recorder holds every figure."""

    design: Design
    jobs: list[Job]
    recorder: Recorder
    seed: int
    cycles: int
    instants: int
    notes: list[str] = field(default_factory=list)

    def summary(self, source: str) -> dict[str, object]:
        return self.recorder.summary(self.design.name, source, self.seed, self.notes)


@dataclass(slots=True)
class _Running:
    """The live part of a job: saved progress, the current run, the epoch of its completion."""

    progress: int = 0
    started: int = -1
    epoch: int = 0
    holding: dict[str, int] = field(default_factory=dict)


def simulate(design: Design, jobs: list[Job], options: Options | None = None) -> Run:
    """Run ``jobs`` (already checked against ``design``) to the end and return the run."""
    options = options or Options()
    state = design.state()
    rng = random.Random(options.seed)
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].submit)
    jobs = [jobs[i] for i in order]
    cq_of = [state.local_queues[job.queue_key].cluster_queue for job in jobs]
    index_of = {job.key: i for i, job in enumerate(jobs)}
    recorder = Recorder(state, jobs, cq_of, design.cq_classes)
    live = [_Running() for _ in jobs]
    completions: list[tuple[int, int, int, int]] = []  # (time, sequence, job, epoch)
    sequence = 0
    next_job = 0
    finished = 0
    cycles = 0
    instants = 0
    gc.collect()
    frozen = gc.isenabled()
    gc.freeze()  # the loaded design and the job list are long-lived: keep them out of collections
    try:
        while next_job < len(jobs) or completions:
            now = min(
                jobs[next_job].submit if next_job < len(jobs) else completions[0][0],
                completions[0][0] if completions else jobs[next_job].submit,
            )
            state.advance_clock(now)
            instants += 1
            dirty: set[str] = set()
            while completions and completions[0][0] == now:
                _, _, i, epoch = heapq.heappop(completions)
                if live[i].epoch != epoch:
                    continue
                key = jobs[i].key
                state.finish(key)
                state.delete_workload(key)  # drop the finished record: the recorder has what it needs
                recorder.finished(i, now)
                dirty.add(cq_of[i])
                finished += 1
            while next_job < len(jobs) and jobs[next_job].submit == now:
                i = next_job
                next_job += 1
                state.add_workload(jobs[i].workload(f"{rng.getrandbits(64):016x}"))
                recorder.arrived(i, now)
                dirty.add(cq_of[i])
            for kind, key in _settle(state):
                cycles += 0 if kind else 1
                if not kind:
                    continue
                i = index_of[key]
                run = live[i]
                dirty.add(cq_of[i])
                if kind == "admitted":
                    wl = state.workloads[key]
                    run.started = now
                    run.holding = _holding(wl.usage())
                    recorder.admitted(i, now)
                    sequence += 1
                    heapq.heappush(
                        completions, (now + jobs[i].runtime - run.progress, sequence, i, run.epoch)
                    )
                else:
                    ran = now - run.started
                    kept = saved_progress(run.progress, ran, jobs[i].checkpoint)
                    lost = run.progress + ran - kept
                    run.progress = kept
                    run.epoch += 1
                    recorder.preempted(i, now, lost, run.holding)
            state.events.clear()  # the recorder keeps what matters; the audit trail would only grow
            recorder.settled(state, now, dirty)
            if options.progress is not None and instants % options.progress_every == 0:
                options.progress(finished, len(jobs), now)
    finally:
        gc.unfreeze()
        if not frozen:
            gc.disable()
    if options.progress is not None:
        options.progress(finished, len(jobs), recorder.end)
    return Run(design, jobs, recorder, options.seed, cycles, instants)


def _settle(state: State) -> Iterator[tuple[str, str]]:
    """Run cycles at the current instant until nothing more happens.

    Yields ``("", "")`` after each cycle, then its preemptions and admissions, so the
    caller reads each admitted workload before a later cycle could preempt it.
    """
    for _ in range(MAX_CYCLES_PER_INSTANT):
        parked = _parked(state)
        result = scheduler.run_cycle(state)
        yield "", ""
        for key in result.preempted:
            yield "preempted", key
        for key in result.admitted:
            yield "admitted", key
        if result.heads == 0:
            return
        if not result.changed and _parked(state) == parked:
            return
    raise EngineError(
        f"the scheduler did not settle within {MAX_CYCLES_PER_INSTANT} cycles at t={state.now}us"
    )


def _parked(state: State) -> int:
    return sum(len(queue.inadmissible) for queue in state.queues.values())


def _holding(usage: dict[tuple[str, str], int]) -> dict[str, int]:
    result: dict[str, int] = {}
    for (_, resource), value in usage.items():
        result[resource] = result.get(resource, 0) + value
    return result
